"""Subscription sync: acknowledgements made on one cluster carried to the others.

The gateway reaches it through :class:`SyncSupervisor` alone, handing it the desired
set of synced topic partitions each discovery pass (:class:`DesiredSyncs`); everything
that runs (syncs, change watches, side channels) is the supervisor's. What it reads of
the configuration (:class:`SyncSettings`, :class:`NamespaceSync`) is exported here too.
"""

from georep.subsync.settings import NamespaceSync, Selection, SyncSettings
from georep.subsync.supervisor import DesiredSyncs, Replication, SyncSupervisor
from georep.subsync.topic_sync import TopicSync

__all__ = [
    "DesiredSyncs",
    "NamespaceSync",
    "Replication",
    "Selection",
    "SyncSettings",
    "SyncSupervisor",
    "TopicSync",
]
