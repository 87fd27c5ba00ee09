"""Replication worker: restores the copies a lost bookie held.

For one under-replicated ledger (taken under a lock in the metadata store so that two
workers never repair the same ledger at once):

1. An OPEN ledger whose *last* segment names a lost bookie is left to its writer (which
   replaces failed bookies itself on its next add) for a grace period; after it, the
   ledger is fenced and closed by recovery so its last fragment has a known end.
2. For each segment naming a lost bookie, a replacement is chosen, every entry of the
   segment whose write set includes the lost index is read from a surviving replica
   (checksum verified) and written to the replacement with recovery adds; then the
   segment's ensemble is changed by compare-and-set.
3. The marker is cleared for the bookies replaced; the lock is released.

Example: ledger 5, E=3 Qw=2, one segment (b1, b2, b3) covering entries 0..9, b2 lost.
b2 was index 1, in the write sets of entries 0, 1, 3, 4, 6, 7, 9 ((e+i) % 3 for i in
0..1 contains 1). Those seven are copied to b4 and the segment becomes (b1, b4, b3).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from georep import limits
from georep.runtime.awaiting import within
from georep.storage import bookie_protocol
from georep.storage.client.bookkeeper import BookKeeper
from georep.storage.client.distribution_schedule import Quorums
from georep.storage.client.read_handle import ReadEntryOp
from georep.storage.errors import (
    BadVersion,
    BookieError,
    BookieUnavailable,
    NoSuchLedger,
    StorageError,
)
from georep.storage.meta.bookies import BookieRepository
from georep.storage.meta.ledger_metadata import LedgerMetadata
from georep.storage.meta.ledgers import LedgerRepository
from georep.storage.meta.under_replication import UnderReplicatedLedger, UnderReplicationRepository

log = logging.getLogger(__name__)

#: Copies in flight per segment being re-replicated.
_COPY_CONCURRENCY = 64


class ReplicationWorker:
    def __init__(
        self,
        bookkeeper: BookKeeper,
        *,
        under_replication: UnderReplicationRepository,
        ledgers: LedgerRepository,
        bookies: BookieRepository,
        holder: str,
        lock_s: float = limits.underreplication_lock_s_default,
        grace_s: float = limits.open_ledger_rereplication_grace_s_default,
        interval_s: float = 1.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._under_replication = under_replication
        self._ledgers = ledgers
        self._bookies = bookies
        self._bk = bookkeeper
        self.holder = holder
        self._lock_s = lock_s
        self._grace_s = grace_s
        self._interval_s = interval_s
        self._clock = clock
        self._deferred: set[int] = set()
        self.stats = {"ledgers_replicated": 0, "entries_copied": 0, "failures": 0}

    async def replicate_once(self) -> int | None:
        """Repair one under-replicated ledger; its id, or None when there was nothing
        this worker could take."""
        marker = await self._under_replication.lock_underreplicated(
            self.holder, self._lock_s, exclude=self._deferred
        )
        if marker is None:
            self._deferred.clear()
            return None
        try:
            done = await self._repair(marker)
        except StorageError as error:
            self.stats["failures"] += 1
            log.warning(
                "re-replication of ledger %d failed, will retry: %s", marker.ledger_id, error
            )
            await self._under_replication.unlock_underreplicated(marker.ledger_id, self.holder)
            self._deferred.add(marker.ledger_id)
            return None
        if not done:
            await self._under_replication.unlock_underreplicated(marker.ledger_id, self.holder)
            self._deferred.add(marker.ledger_id)
            return None
        return marker.ledger_id

    async def _repair(self, marker: UnderReplicatedLedger) -> bool:
        ledger_id = marker.ledger_id
        try:
            metadata = await self._ledgers.get_ledger(ledger_id)
        except NoSuchLedger:
            await self._under_replication.complete_underreplicated(
                ledger_id, self.holder, replicated=marker.lost_bookies
            )
            return True
        alive = {b.address for b in await self._bookies.list_bookies(alive_only=True)}
        if not metadata.is_closed and any(b not in alive for b in metadata.last_ensemble):
            if self._clock() - marker.marked_at < self._grace_s:
                log.info(
                    "ledger %d is open with a lost bookie in its last segment; "
                    "waiting for the grace period",
                    ledger_id,
                )
                return False
            log.warning(
                "ledger %d: fencing its open last segment after the grace period", ledger_id
            )
            metadata = await self._bk.recover_ledger(ledger_id)
        replaced: set[str] = set()
        segments = len(metadata.ensembles) if metadata.is_closed else len(metadata.ensembles) - 1
        for segment in range(segments):
            for bookie in metadata.ensembles[segment][1]:
                if bookie in alive:
                    continue
                metadata = await self._replace(metadata, segment, bookie)
                replaced.add(bookie)
        lost = set(marker.lost_bookies) | replaced
        still_named = {b for b in lost if b in metadata.bookies()}
        await self._under_replication.complete_underreplicated(
            ledger_id, self.holder, replicated=lost - still_named
        )
        self.stats["ledgers_replicated"] += 1
        log.info("ledger %d re-replicated: replaced %s", ledger_id, sorted(replaced))
        return not still_named

    async def _replace(self, metadata: LedgerMetadata, segment: int, lost: str) -> LedgerMetadata:
        first, ensemble = metadata.ensembles[segment]
        _, last = metadata.segment_range(segment)
        index = ensemble.index(lost)
        quorums = Quorums(metadata.ensemble_size, metadata.write_quorum, metadata.ack_quorum)
        (target,) = [
            b for b in await self._bk.placement.replace(ensemble, [lost]) if b not in ensemble
        ]
        entries = [e for e in range(first, last + 1) if index in quorums.write_set(e)]
        log.info(
            "ledger %d segment %d: copying %d entries from the replicas of %s to %s",
            metadata.ledger_id,
            segment,
            len(entries),
            lost,
            target,
        )
        gate = asyncio.Semaphore(_COPY_CONCURRENCY)

        async def copy(entry_id: int) -> None:
            async with gate:
                sources = [ensemble[i] for i in quorums.write_set(entry_id) if i != index]
                op = ReadEntryOp(
                    self._bk,
                    metadata.ledger_id,
                    entry_id,
                    sources,
                    speculative_timeout_s=self._bk.speculative_read_timeout_ms / 1000,
                )
                _, data = await op.run()
                answer = await self._bk.clients.get(target).request(
                    bookie_protocol.AddRequest(0, metadata.ledger_id, entry_id, True, data)
                )
                if answer.status != bookie_protocol.Status.OK:
                    raise BookieError(
                        f"bookie {target} refused a recovery add of entry "
                        f"{entry_id}: {answer.status.name}",
                        answer.status,
                    )

        await asyncio.gather(*(copy(e) for e in entries))
        self.stats["entries_copied"] += len(entries)
        for _ in range(limits.metadata_cas_retries_max):
            current = metadata.ensembles[segment][1]
            if lost not in current:
                return metadata  # someone else replaced it
            if target in current:
                raise BookieUnavailable(f"{target} joined segment {segment} meanwhile")
            try:
                return await self._ledgers.update_ledger(
                    metadata.with_bookie_replaced(segment, lost, target)
                )
            except BadVersion:
                metadata = await self._ledgers.get_ledger(metadata.ledger_id)
        raise BadVersion(f"ledger {metadata.ledger_id}: lost every CAS replacing {lost}")

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                repaired = await self.replicate_once()
            except StorageError as error:
                log.warning("replication worker pass failed: %s", error)
                repaired = None
            if repaired is not None:
                continue  # more may be waiting
            try:
                await within(stop.wait(), self._interval_s)
            except TimeoutError:
                pass
