"""The metadata store: one engine (``engine.py``) and storage's repositories, each given
that engine. :class:`MetadataStore` opens the engine and holds one of each of storage's
repositories; a process opens it once and hands each component the repository it uses
(BookKeeper keeps one manager per metadata domain likewise):

- ``ledgers.py``: ledger metadata (BookKeeper's LedgerManager);
- ``bookies.py``: bookie registrations (RegistrationManager);
- ``under_replication.py``: under-replicated ledgers (LedgerUnderreplicationManager);
- ``leases.py``: named leases (the auditor's leadership);
- ``managed_ledgers.py``: managed ledgers and cursors (``storage/managed_ledger``).

The layers above keep their own metadata beside them and build their repositories over
this store's ``engine``: the broker's catalog and schemas
(``broker/meta/store.py``, ``BrokerRepositories``), the gateway's policies and members
(``gateway/meta/store.py``, ``GatewayRepositories``). Storage never imports them.

How a call runs (one short transaction in a worker thread, CAS on versions, retries,
time from an injected clock) is the engine's docstring, and so is the interface a
repository may use of it.
"""

from __future__ import annotations

import time
from typing import Self

from georep.storage.meta.bookies import BookieRegistration, BookieRepository
from georep.storage.meta.engine import Clock, MetadataEngine
from georep.storage.meta.leases import LeaseRepository
from georep.storage.meta.ledgers import LedgerRepository
from georep.storage.meta.managed_ledgers import (
    LedgerInfo,
    ManagedCursorInfo,
    ManagedLedgerInfo,
    ManagedLedgerRepository,
)
from georep.storage.meta.under_replication import (
    UnderReplicatedLedger,
    UnderReplicationRepository,
)

__all__ = [
    "BookieRegistration",
    "BookieRepository",
    "Clock",
    "LeaseRepository",
    "LedgerInfo",
    "LedgerRepository",
    "ManagedCursorInfo",
    "ManagedLedgerInfo",
    "ManagedLedgerRepository",
    "MetadataEngine",
    "MetadataStore",
    "UnderReplicatedLedger",
    "UnderReplicationRepository",
]


class MetadataStore:
    """One engine and a repository of each of storage's domains on it. Create with
    :meth:`open`; close once, when every component given one of its repositories (or a
    repository built over its engine) has stopped."""

    def __init__(self, engine: MetadataEngine) -> None:
        self.engine = engine
        self.ledgers = LedgerRepository(engine)
        self.leases = LeaseRepository(engine)
        self.bookies = BookieRepository(engine, self.leases)
        self.under_replication = UnderReplicationRepository(engine)
        self.managed_ledgers = ManagedLedgerRepository(engine)

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
