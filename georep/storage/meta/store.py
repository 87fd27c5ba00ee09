"""The metadata store: one engine core (``engine.py``) and one repository per domain,
composed into :class:`MetadataStore`, the one object a process opens and passes around:

- ``ledgers.py``: ledger metadata (BookKeeper's LedgerManager);
- ``bookies.py``: bookie registrations (RegistrationManager);
- ``under_replication.py``: under-replicated ledgers (LedgerUnderreplicationManager);
- ``leases.py``: named leases (the auditor's leadership);
- ``managed_ledgers.py``: managed ledgers and cursors (``storage/managed_ledger``);
- ``catalog.py``: tenants and namespaces (the admin REST, the broker);
- ``replication_policies.py``: the gateway's remote clusters and policies;
- ``gateway_members.py``: the gateway instances of a cluster (``gateway/ownership.py``).

How a call runs (one short transaction in a worker thread, CAS on versions, retries,
time from an injected clock) is the engine core's docstring.
"""

from __future__ import annotations

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
from georep.storage.meta.under_replication import (
    UnderReplicatedLedger,
    UnderReplicationRepository,
)

__all__ = [
    "POLICY_SCOPES",
    "BookieRegistration",
    "CatalogOutcome",
    "Clock",
    "GatewayMember",
    "LedgerInfo",
    "ManagedCursorInfo",
    "ManagedLedgerInfo",
    "MetadataStore",
    "NamespaceRecord",
    "RemoteClusterRecord",
    "ReplicationPolicyRecord",
    "TenantRecord",
    "UnderReplicatedLedger",
]


class MetadataStore(
    LedgerRepository,
    BookieRepository,
    UnderReplicationRepository,
    LeaseRepository,
    ManagedLedgerRepository,
    CatalogRepository,
    ReplicationPolicyRepository,
    GatewayMemberRepository,
    MetadataEngine,
):
    """Async access to the metadata database, every domain of it. Create with
    :meth:`open`."""
