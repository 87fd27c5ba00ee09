"""The metadata store: one engine (``engine.py``) and one repository per domain, each
given that engine. :class:`MetadataStore` opens the engine and holds one of each
repository; a process opens it once and hands each component the repository it uses
(BookKeeper keeps one manager per metadata domain likewise):

- ``ledgers.py``: ledger metadata (BookKeeper's LedgerManager);
- ``bookies.py``: bookie registrations (RegistrationManager);
- ``under_replication.py``: under-replicated ledgers (LedgerUnderreplicationManager);
- ``leases.py``: named leases (the auditor's leadership);
- ``managed_ledgers.py``: managed ledgers and cursors (``storage/managed_ledger``);
- ``catalog.py``: tenants and namespaces (the admin REST, the broker);
- ``replication_policies.py``: the gateway's remote clusters and policies;
- ``subscription_sync_policies.py``: the gateway's subscription-sync policies;
- ``gateway_members.py``: the gateway instances of a cluster (``gateway/ownership.py``);
- ``schemas.py``: topics' schema versions and namespaces' compatibility strategies.

How a call runs (one short transaction in a worker thread, CAS on versions, retries,
time from an injected clock) is the engine's docstring, and so is the interface a
repository may use of it.
"""

from __future__ import annotations

import time
from typing import Self

from georep.storage.meta.bookies import BookieRegistration, BookieRepository
from georep.storage.meta.catalog import (
    CatalogOutcome,
    CatalogRepository,
    NamespaceRecord,
    TenantRecord,
)
from georep.storage.meta.engine import Clock, MetadataEngine
from georep.storage.meta.gateway_members import GatewayMember, GatewayMemberRepository
from georep.storage.meta.leases import LeaseRepository
from georep.storage.meta.ledgers import LedgerRepository
from georep.storage.meta.managed_ledgers import (
    LedgerInfo,
    ManagedCursorInfo,
    ManagedLedgerInfo,
    ManagedLedgerRepository,
)
from georep.storage.meta.replication_policies import (
    POLICY_SCOPES,
    RemoteClusterRecord,
    ReplicationPolicyRecord,
    ReplicationPolicyRepository,
)
from georep.storage.meta.schemas import SchemaRepository
from georep.storage.meta.subscription_sync_policies import (
    SubscriptionSyncPolicyRecord,
    SubscriptionSyncPolicyRepository,
)
from georep.storage.meta.under_replication import (
    UnderReplicatedLedger,
    UnderReplicationRepository,
)

__all__ = [
    "POLICY_SCOPES",
    "BookieRegistration",
    "BookieRepository",
    "CatalogOutcome",
    "CatalogRepository",
    "Clock",
    "GatewayMember",
    "GatewayMemberRepository",
    "LeaseRepository",
    "LedgerInfo",
    "LedgerRepository",
    "ManagedCursorInfo",
    "ManagedLedgerInfo",
    "ManagedLedgerRepository",
    "MetadataEngine",
    "MetadataStore",
    "NamespaceRecord",
    "RemoteClusterRecord",
    "ReplicationPolicyRecord",
    "ReplicationPolicyRepository",
    "SchemaRepository",
    "SubscriptionSyncPolicyRecord",
    "SubscriptionSyncPolicyRepository",
    "TenantRecord",
    "UnderReplicatedLedger",
    "UnderReplicationRepository",
]


class MetadataStore:
    """One engine and a repository of each domain on it. Create with :meth:`open`; close
    once, when every component given one of its repositories has stopped."""

    def __init__(self, engine: MetadataEngine) -> None:
        self.engine = engine
        self.ledgers = LedgerRepository(engine)
        self.leases = LeaseRepository(engine)
        self.bookies = BookieRepository(engine, self.leases)
        self.under_replication = UnderReplicationRepository(engine)
        self.managed_ledgers = ManagedLedgerRepository(engine)
        self.catalog = CatalogRepository(engine)
        self.replication_policies = ReplicationPolicyRepository(engine)
        self.subscription_sync_policies = SubscriptionSyncPolicyRepository(engine)
        self.gateway_members = GatewayMemberRepository(engine)
        self.schemas = SchemaRepository(engine)

    @classmethod
    async def open(cls, url: str, *, migrate: bool = True, clock: Clock = time.time) -> Self:
        """Connect to ``url`` (see :meth:`MetadataEngine.open`)."""
        return cls(await MetadataEngine.open(url, migrate=migrate, clock=clock))

    async def close(self) -> None:
        await self.engine.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *_exc_info: object) -> None:
        await self.close()
