"""Subscription sync: a gateway keeps each replicated subscription's acknowledgements in
step across clusters (docs/SUBSYNC.md). The decisions of one topic partition without I/O
(``core.py``), the gateway's I/O around them (``topic_sync.py``), what it asks of a
cluster (``ports.py``, georep's own or real Pulsar's), the markers it builds and applies,
the namespaces' change watches, and what a failover now would deliver again
(``exposure.py``).

The gateway reaches it through :class:`SyncSupervisor` alone, handing it the desired
set of synced topic partitions each discovery pass (:class:`DesiredSyncs`); everything
that runs (syncs, change watches, side channels) is the supervisor's. What it reads of
the configuration (:class:`SyncSettings`, :class:`NamespaceSync`) is exported here too.
"""

from georep.subsync.caught_up import TooManyTopics, caught_up
from georep.subsync.settings import NamespaceSync, Selection, SyncMode, SyncSettings, parse_sync
from georep.subsync.supervisor import DesiredSyncs, Replication, SyncSupervisor
from georep.subsync.topic_sync import TopicSync

__all__ = [
    "DesiredSyncs",
    "NamespaceSync",
    "Replication",
    "Selection",
    "SyncMode",
    "SyncSettings",
    "SyncSupervisor",
    "TooManyTopics",
    "TopicSync",
    "caught_up",
    "parse_sync",
]
