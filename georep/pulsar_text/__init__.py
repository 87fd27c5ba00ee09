"""Pulsar's own spellings, read: what georep's runtime needs of Pulsar's pages.

``cursor`` reads a cursor as Pulsar's ``internalStats`` writes it
(``markDeletePosition``, ``individuallyDeletedMessages``), for the gateway's
``PulsarPort``, the drill and the export alike; ``schema_version`` reads a message's
schema version as the official client hands it. Pure parsing, no I/O. Launching and
administering a real Pulsar is development tooling, outside georep (``pulsar_tools/``).
"""
