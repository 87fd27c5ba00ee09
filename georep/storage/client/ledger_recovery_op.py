"""Ledger recovery: fence the last segment, find the true end, close the ledger.

The steps (docs/ARCHITECTURE.md, "Fencing and recovery"), for a ledger whose writer may be
dead or alive:

1. CAS the metadata OPEN -> IN_RECOVERY (a ledger already IN_RECOVERY is recovered
   again: parallel recoveries are allowed and end in one agreed CLOSED record).
2. Fencing LAC reads to every bookie of the last segment, until the answers cover
   every write quorum with Qw - Qa + 1 bookies (:class:`CoverageSet`). The bookie
   journals the fence before it answers, so from then on no write quorum has Qa
   unfenced bookies: the old writer can confirm nothing more and gets LedgerFenced.
3. Start at ``max(highest LAC answered, first entry of the last segment - 1)``: all
   entries up to there are confirmed.
4. Read forward with fencing reads sent to the whole write set. An entry found on any
   bookie is re-written to its full write set with recovery adds (through a recovery
   :class:`LedgerHandle`, so a dead bookie is replaced by an ensemble change). An entry
   is missing once Qw - Qa + 1 bookies answered "no such entry": it was never
   confirmed, and neither was anything after it. Any other outcome (too many bookies
   silent) aborts with :class:`RecoveryFailed`; nothing was closed, it can be retried.
5. CAS to CLOSED with the last entry found and the ledger's length. If the CAS loses to
   a parallel recovery that already closed the ledger, that record wins and is returned.

Example, E=3 Qw=3 Qa=2, writer confirmed 0..9 and sent 10 to one bookie before dying:
LAC answers are 8 or 9 (entry 9's header carries LAC 8, entry 10's carries 9), so the
read starts at 10. If the bookie holding 10 answers first, 10 is copied to all three
and the ledger closes at 10; if the two others answer "no such entry" first, it closes
at 9. Either end is correct: 10 was never acknowledged.
"""

from __future__ import annotations

import asyncio
import logging

from georep import limits
from georep.storage import bookie_protocol
from georep.storage import entry as entry_format
from georep.storage.client.client_context import ClientContext
from georep.storage.client.distribution_schedule import Quorums
from georep.storage.client.ledger_handle import LedgerHandle
from georep.storage.client.read_handle import ReadHandle, replicas
from georep.storage.errors import BadVersion, CorruptEntry, LedgerFenced, RecoveryFailed
from georep.storage.meta.ledger_metadata import LedgerMetadata, LedgerState

log = logging.getLogger(__name__)


class LedgerRecoveryOp:
    def __init__(self, context: ClientContext, ledger_id: int) -> None:
        self._context = context
        self._ledger_id = ledger_id

    async def run(self) -> LedgerMetadata:
        metadata = await self._mark_in_recovery()
        if metadata.is_closed:
            return metadata
        quorums = Quorums(metadata.ensemble_size, metadata.write_quorum, metadata.ack_quorum)
        lac = await self._fence(metadata, quorums)
        start = max(lac, metadata.last_segment_first_entry - 1)
        length = await self._length_at(metadata, start)
        handle = LedgerHandle(
            self._context, metadata, recovery=True, last_add_confirmed=start, length=length
        )
        recovered = 0
        adds: list[asyncio.Future[int]] = []
        entry_id = start + 1
        try:
            while True:
                found = await self._recovery_read(handle.metadata, quorums, entry_id)
                if found is None:
                    break
                entry, data = found
                adds.append(handle.add_recovered(data, entry))
                recovered += 1
                entry_id += 1
            await asyncio.gather(*adds)
        except LedgerFenced:
            # A parallel recovery closed the ledger while we re-wrote entries.
            closed = await self._context.ledgers.get_ledger(self._ledger_id)
            if closed.is_closed:
                return closed
            raise RecoveryFailed(f"ledger {self._ledger_id}: recovery adds were refused") from None
        log.info(
            "ledger %d recovered: LAC %d, %d entries re-written, closing at %d",
            self._ledger_id,
            lac,
            recovered,
            entry_id - 1,
        )
        return await self._close(handle, entry_id - 1)

    async def _mark_in_recovery(self) -> LedgerMetadata:
        ledgers = self._context.ledgers
        for _ in range(limits.metadata_cas_retries_max):
            metadata = await ledgers.get_ledger(self._ledger_id)
            if metadata.state != LedgerState.OPEN:
                return metadata  # CLOSED: nothing to do; IN_RECOVERY: recover again
            try:
                return await ledgers.update_ledger(metadata.replace(state=LedgerState.IN_RECOVERY))
            except BadVersion:
                continue
        raise RecoveryFailed(f"ledger {self._ledger_id}: lost every CAS to IN_RECOVERY")

    async def _fence(self, metadata: LedgerMetadata, quorums: Quorums) -> int:
        ensemble = metadata.last_ensemble
        coverage = quorums.coverage_set()
        futures = {
            self._context.clients.get(bookie).submit(
                bookie_protocol.ReadLacRequest(0, self._ledger_id, fence=True)
            ): index
            for index, bookie in enumerate(ensemble)
        }
        highest = -1
        pending = set(futures)
        errors: list[str] = []
        try:
            while pending and not coverage.covered:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for future in done:
                    index = futures[future]
                    if future.exception() is not None:
                        errors.append(f"{ensemble[index]}: {future.exception()}")
                        continue
                    answer = future.result()
                    if answer.status != bookie_protocol.Status.OK:
                        errors.append(f"{ensemble[index]}: {answer.status.name}")
                        continue
                    highest = max(highest, answer.last_add_confirmed)  # type: ignore[attr-defined]  # READ_LAC answers
                    coverage.add(index)
        finally:
            for future in pending:
                future.cancel()
        if not coverage.covered:
            raise RecoveryFailed(
                f"ledger {self._ledger_id}: fencing did not reach Qw-Qa+1 bookies of every "
                f"write quorum: {'; '.join(errors)}"
            )
        return highest

    async def _length_at(self, metadata: LedgerMetadata, entry_id: int) -> int:
        if entry_id < 0:
            return 0
        reader = ReadHandle(self._context, metadata, entry_id)
        (entry,) = await reader.read(entry_id, entry_id)
        return entry.length

    async def _recovery_read(
        self, metadata: LedgerMetadata, quorums: Quorums, entry_id: int
    ) -> tuple[entry_format.Entry, bytes] | None:
        """The entry, or None once ``Qw - Qa + 1`` bookies said they do not have it."""
        bookies = replicas(metadata, quorums, entry_id)
        futures = [
            self._context.clients.get(bookie).submit(
                bookie_protocol.ReadRequest(0, self._ledger_id, entry_id, fence=True)
            )
            for bookie in bookies
        ]
        owner = dict(zip(futures, bookies, strict=True))
        missing = 0
        errors: list[str] = []
        pending = set(futures)
        try:
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for future in done:
                    bookie = owner[future]
                    if future.exception() is not None:
                        errors.append(f"{bookie}: {future.exception()}")
                        continue
                    answer = future.result()
                    if answer.status in (
                        bookie_protocol.Status.NO_SUCH_ENTRY,
                        bookie_protocol.Status.NO_SUCH_LEDGER,
                    ):
                        missing += 1
                        if missing >= quorums.missing_quorum:
                            return None
                        continue
                    if answer.status != bookie_protocol.Status.OK:
                        errors.append(f"{bookie}: {answer.status.name} {answer.error}")
                        continue
                    data = answer.data  # type: ignore[attr-defined]  # a READ is answered by a ReadResponse
                    try:
                        return entry_format.decode(data, self._ledger_id, entry_id), data
                    except CorruptEntry as error:
                        errors.append(f"{bookie}: {error}")
        finally:
            for future in pending:
                future.cancel()
        raise RecoveryFailed(
            f"ledger {self._ledger_id} entry {entry_id}: neither found nor proven missing "
            f"({missing} of {quorums.missing_quorum} 'no such entry'): {'; '.join(errors)}"
        )

    async def _close(self, handle: LedgerHandle, last_entry_id: int) -> LedgerMetadata:
        metadata = handle.metadata
        ledgers = self._context.ledgers
        for _ in range(limits.metadata_cas_retries_max):
            if metadata.is_closed:
                return metadata  # a parallel recovery won: its record is the truth
            proposal = metadata.replace(
                state=LedgerState.CLOSED,
                last_entry_id=last_entry_id,
                length=handle.confirmed_length,
            )
            try:
                return await ledgers.update_ledger(proposal)
            except BadVersion:
                metadata = await ledgers.get_ledger(self._ledger_id)
        raise RecoveryFailed(f"ledger {self._ledger_id}: lost every CAS to CLOSED")
