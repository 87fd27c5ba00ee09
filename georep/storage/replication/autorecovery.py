"""Auto-recovery: an auditor candidate and a replication worker in one service.

Runs inside a bookie process (``georep bookie --autorecovery``) or alone
(``georep autorecovery --metadata URL``). Every instance runs a worker; only the
instance holding the auditor lease audits.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import socket
from typing import Any

from georep import limits
from georep.storage.client.bookkeeper import BookKeeper
from georep.storage.meta.bookies import BookieRepository
from georep.storage.meta.leases import LeaseRepository
from georep.storage.meta.ledgers import LedgerRepository
from georep.storage.meta.store import MetadataStore
from georep.storage.meta.under_replication import UnderReplicationRepository
from georep.storage.replication.auditor import Auditor
from georep.storage.replication.replication_worker import ReplicationWorker

log = logging.getLogger(__name__)


class AutoRecovery:
    def __init__(
        self,
        *,
        ledgers: LedgerRepository,
        bookies: BookieRepository,
        leases: LeaseRepository,
        under_replication: UnderReplicationRepository,
        holder: str | None = None,
        audit_interval_s: float = limits.audit_interval_s_default,
        auditor_lease_s: float = limits.auditor_lease_s_default,
        grace_s: float = limits.open_ledger_rereplication_grace_s_default,
        lock_s: float = limits.underreplication_lock_s_default,
    ) -> None:
        self.holder = holder or f"{socket.gethostname()}:{os.getpid()}:{id(self):x}"
        self.bookkeeper = BookKeeper(ledgers, bookies)
        self.auditor = Auditor(
            leases=leases,
            bookies=bookies,
            ledgers=ledgers,
            under_replication=under_replication,
            holder=self.holder,
            lease_s=auditor_lease_s,
            interval_s=audit_interval_s,
        )
        self.worker = ReplicationWorker(
            self.bookkeeper,
            under_replication=under_replication,
            ledgers=ledgers,
            bookies=bookies,
            holder=self.holder,
            lock_s=lock_s,
            grace_s=grace_s,
            interval_s=min(1.0, audit_interval_s),
        )
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    @classmethod
    def of(cls, store: MetadataStore, **options: Any) -> AutoRecovery:
        """The service on ``store``'s ledgers, bookies, leases and under-replication
        markers; ``options`` as for the constructor."""
        return cls(
            ledgers=store.ledgers,
            bookies=store.bookies,
            leases=store.leases,
            under_replication=store.under_replication,
            **options,
        )

    async def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self.auditor.run(self._stop), name="auditor"),
            asyncio.create_task(self.worker.run(self._stop), name="replication"),
        ]

    async def stop(self) -> None:
        self._stop.set()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.bookkeeper.close()

    def stats(self) -> dict[str, Any]:
        return {"auditor": dict(self.auditor.stats), "worker": dict(self.worker.stats)}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--metadata", required=True, help="metadata store URL")
    parser.add_argument(
        "--audit-interval",
        type=float,
        default=limits.audit_interval_s_default,
        help="seconds between audits (default %(default)s)",
    )
    parser.add_argument(
        "--grace",
        type=float,
        default=limits.open_ledger_rereplication_grace_s_default,
        help="seconds before an open ledger's lost fragment is fenced (default %(default)s)",
    )


def run(args: argparse.Namespace) -> int:
    import uvloop

    async def main() -> None:
        store = await MetadataStore.open(args.metadata)
        service = AutoRecovery.of(store, audit_interval_s=args.audit_interval, grace_s=args.grace)
        await service.start()
        log.info("auto-recovery running as %s", service.holder)
        print("AUTORECOVERY_READY", flush=True)
        try:
            await asyncio.Event().wait()
        finally:
            await service.stop()
            await store.close()

    try:
        uvloop.run(main())
    except KeyboardInterrupt:
        pass
    return 0
