"""The gateway's repositories, built over storage's metadata engine.

The gateway opens one :class:`~georep.storage.meta.store.MetadataStore` (the engine)
and builds ``GatewayRepositories(store.engine)``; closing the store closes the engine these
repositories use.
"""

from __future__ import annotations

from georep.gateway.meta.members import GatewayMemberRepository
from georep.gateway.meta.replication_policies import ReplicationPolicyRepository
from georep.gateway.meta.subscription_sync_policies import SubscriptionSyncPolicyRepository
from georep.storage.meta.engine import MetadataEngine


class GatewayRepositories:
    """The gateway's repositories on one engine: replication policies and remote
    clusters, subscription-sync policies, and the cluster's gateway instances."""

    def __init__(self, engine: MetadataEngine) -> None:
        self.replication_policies = ReplicationPolicyRepository(engine)
        self.subscription_sync_policies = SubscriptionSyncPolicyRepository(engine)
        self.members = GatewayMemberRepository(engine)
