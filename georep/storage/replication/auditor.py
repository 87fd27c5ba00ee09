"""The auditor: finds ledgers with a copy on a lost bookie and marks them.

One auditor is active at a time: every candidate tries to take (or renew) the
``auditor`` lease in the metadata store and only the holder audits. A bookie is lost
when its registration lease lapsed (it stopped renewing: crashed, partitioned, or
stopped). Every ledger whose ensembles name a lost bookie is marked under-replicated
with the set of lost bookies; replication workers take it from there.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from georep import limits
from georep.runtime.awaiting import within
from georep.storage.errors import NoSuchLedger, StorageError
from georep.storage.meta.bookies import BookieRepository
from georep.storage.meta.leases import LeaseRepository
from georep.storage.meta.ledgers import LedgerRepository
from georep.storage.meta.under_replication import UnderReplicationRepository

log = logging.getLogger(__name__)

AUDITOR_LEASE = "auditor"


@dataclass
class AuditReport:
    lost_bookies: set[str] = field(default_factory=set)
    marked_ledgers: dict[int, set[str]] = field(default_factory=dict)
    ledgers_checked: int = 0


class Auditor:
    def __init__(
        self,
        *,
        leases: LeaseRepository,
        bookies: BookieRepository,
        ledgers: LedgerRepository,
        under_replication: UnderReplicationRepository,
        holder: str,
        lease_s: float = limits.auditor_lease_s_default,
        interval_s: float = limits.audit_interval_s_default,
    ) -> None:
        self._leases = leases
        self._bookies = bookies
        self._ledgers = ledgers
        self._under_replication = under_replication
        self.holder = holder
        self._lease_s = lease_s
        self._interval_s = interval_s
        self.stats = {"audits": 0, "ledgers_marked": 0, "leader": False}

    async def is_leader(self) -> bool:
        leader = await self._leases.acquire_lease(AUDITOR_LEASE, self.holder, self._lease_s)
        if leader != self.stats["leader"]:
            log.info("auditor %s %s leadership", self.holder, "took" if leader else "lost")
        self.stats["leader"] = leader
        return leader

    async def audit_once(self) -> AuditReport:
        report = AuditReport()
        registered = {b.address for b in await self._bookies.list_bookies(alive_only=False)}
        alive = {b.address for b in await self._bookies.list_bookies(alive_only=True)}
        for ledger_id in await self._ledgers.list_ledger_ids():
            try:
                metadata = await self._ledgers.get_ledger(ledger_id)
            except NoSuchLedger:
                continue  # deleted meanwhile
            report.ledgers_checked += 1
            lost = {bookie for bookie in metadata.bookies() if bookie not in alive}
            if lost:
                await self._under_replication.mark_underreplicated(ledger_id, lost)
                report.marked_ledgers[ledger_id] = lost
                report.lost_bookies |= lost
        self.stats["audits"] += 1
        self.stats["ledgers_marked"] += len(report.marked_ledgers)
        if report.marked_ledgers:
            log.warning(
                "audit: lost bookies %s (%s registered); marked ledgers %s",
                sorted(report.lost_bookies),
                len(registered),
                sorted(report.marked_ledgers),
            )
        return report

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                if await self.is_leader():
                    await self.audit_once()
            except StorageError as error:
                log.warning("audit pass failed, will retry: %s", error)
            try:
                await within(stop.wait(), self._interval_s)
            except TimeoutError:
                pass
        await self._leases.release_lease(AUDITOR_LEASE, self.holder)
