"""The embedded broker: Pulsar's binary protocol served over managed ledgers (docs/ARCHITECTURE.md,
"Embedded cluster"). It owns connections, topics, producers (deduplication), subscriptions
and their dispatchers, schemas, namespace policies as they apply to a topic, the change
feed subscription sync listens to, and the embedded cluster as a process (``georep
cluster``: ``cluster.py``, ``main.py``); its admin REST is ``broker/admin/``. It reaches
storage only through the narrow Protocols of ``ports.py``."""
