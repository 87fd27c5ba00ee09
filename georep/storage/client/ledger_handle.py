"""Writing a ledger: pipelined adds, in-order confirmation, fencing, ensemble change.

An add is an :class:`PendingAddOp`. It is sent to every bookie of its write set at
once and is *quorum-complete* when Qa of them confirmed. It is *confirmed* (its future
resolves, LAC advances) only when it is quorum-complete and every earlier add is
confirmed, so LAC moves strictly in order. Example, Qa=2: acks arrive for entry 1 (two
bookies), then entry 0 (two bookies); entry 1 waits, then 0 and 1 confirm together and
LAC goes -1 -> 1.

Ensemble change. A bookie that fails an add (connection lost, deadline passed) is
replaced: a new segment starting at LAC + 1 with a replacement bookie is written to the
metadata store by compare-and-set, and every pending add whose write set held the failed
index is re-sent to the replacement (its earlier ack from the failed bookie is dropped:
the metadata now says the replacement holds it). Confirmations are held while the change
is in flight, so the segment boundary (LAC + 1 when the change began) stays right. The
CAS aborts if the ledger is no longer OPEN (a reader is recovering it): the writer is
fenced.

A recovery handle (``recovery=True``) is the same machinery used by ledger recovery and
re-replication: its adds carry the recovery flag (accepted by fenced bookies) and its
ensemble changes expect the ledger IN_RECOVERY.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections import deque

from georep import limits
from georep.invariant import invariant
from georep.storage import bookie_protocol
from georep.storage import entry as entry_format
from georep.storage.client.client_context import ClientContext
from georep.storage.client.distribution_schedule import AckSet, Quorums
from georep.storage.errors import (
    BadVersion,
    EntryTooLarge,
    LedgerClosed,
    LedgerFenced,
    NotEnoughBookies,
    StorageError,
)
from georep.storage.meta.ledger_metadata import LedgerMetadata, LedgerState

log = logging.getLogger(__name__)


class PendingAddOp:
    """One add in flight: its bytes, write set, and which indices confirmed it."""

    __slots__ = ("acks", "data", "entry_id", "future", "length", "payload_bytes", "write_set")

    def __init__(
        self,
        entry_id: int,
        data: bytes,
        payload_bytes: int,
        length: int,
        acks: AckSet,
        write_set: tuple[int, ...],
        future: asyncio.Future[int],
    ) -> None:
        self.entry_id = entry_id
        self.data = data
        self.payload_bytes = payload_bytes
        self.length = length
        self.acks = acks
        self.write_set = write_set
        self.future = future


class LedgerHandle:
    """The single writer of one ledger."""

    def __init__(
        self,
        context: ClientContext,
        metadata: LedgerMetadata,
        *,
        recovery: bool = False,
        last_add_confirmed: int = -1,
        length: int = 0,
    ) -> None:
        self._context = context
        self.metadata = metadata
        self.quorums = Quorums(metadata.ensemble_size, metadata.write_quorum, metadata.ack_quorum)
        self._recovery = recovery
        self.last_add_confirmed = last_add_confirmed
        self.last_add_pushed = last_add_confirmed
        self.length = length  # cumulative payload bytes pushed
        self.confirmed_length = length  # cumulative payload bytes confirmed
        self._pending: deque[PendingAddOp] = deque()
        self._pending_bytes = 0
        self._room = asyncio.Event()
        self._room.set()
        self._failed: dict[int, str] = {}  # ensemble index -> failed bookie
        self._changing: asyncio.Task[None] | None = None
        self._ensemble_changes = 0
        self._error: StorageError | None = None
        self._closed = False
        self.stats = {"adds": 0, "add_bytes": 0, "ensemble_changes": 0, "resends": 0}

    @property
    def ledger_id(self) -> int:
        return self.metadata.ledger_id

    @property
    def ensemble(self) -> tuple[str, ...]:
        return self.metadata.last_ensemble

    # --- adding ---------------------------------------------------------------------
    async def add(self, payload: bytes) -> int:
        """Append ``payload``; returns its entry id once it is confirmed (durable on Qa
        bookies and every earlier entry confirmed)."""
        return await (await self.add_async(payload))

    async def add_async(self, payload: bytes) -> asyncio.Future[int]:
        """Append ``payload`` without waiting for confirmation; waits only for room
        (``pending_adds_count_max`` / ``pending_adds_bytes_max``). Entry ids follow call
        order."""
        if len(payload) > limits.entry_payload_bytes_max:
            raise EntryTooLarge(
                f"payload of {len(payload)} bytes exceeds {limits.entry_payload_bytes_max}"
            )
        while not self._has_room(len(payload)):
            self._room.clear()
            await self._room.wait()
            self._check_writable()
        self._check_writable()
        entry_id = self.last_add_pushed + 1
        length = self.length + len(payload)
        data = entry_format.encode(
            self.ledger_id, entry_id, self.last_add_confirmed, length, payload
        )
        return self._push(entry_id, data, len(payload), length)

    def add_recovered(self, data: bytes, entry: entry_format.Entry) -> asyncio.Future[int]:
        """Re-write an entry found by recovery (its stored bytes, verbatim)."""
        invariant(self._recovery, "add_recovered on a writer handle")
        invariant(
            entry.entry_id == self.last_add_pushed + 1,
            f"recovered entry {entry.entry_id} out of order after {self.last_add_pushed}",
        )
        self._check_writable()
        return self._push(entry.entry_id, data, len(entry.payload), entry.length)

    def _has_room(self, payload_bytes: int) -> bool:
        if not self._pending:
            return True
        return (
            len(self._pending) < limits.pending_adds_count_max
            and self._pending_bytes + payload_bytes <= limits.pending_adds_bytes_max
        )

    def _check_writable(self) -> None:
        if self._error is not None:
            raise self._error
        if self._closed:
            raise LedgerClosed(f"ledger {self.ledger_id} is closed")

    def _push(
        self, entry_id: int, data: bytes, payload_bytes: int, length: int
    ) -> asyncio.Future[int]:
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        op = PendingAddOp(
            entry_id,
            data,
            payload_bytes,
            length,
            self.quorums.ack_set(),
            self.quorums.write_set(entry_id),
            future,
        )
        self.last_add_pushed = entry_id
        self.length = length
        self._pending.append(op)
        self._pending_bytes += payload_bytes
        self.stats["adds"] += 1
        self.stats["add_bytes"] += payload_bytes
        ensemble = self.metadata.last_ensemble
        request_id = self._context.clients.next_request_id()
        frame = bookie_protocol.encode(
            bookie_protocol.AddRequest(request_id, self.ledger_id, entry_id, self._recovery, data)
        )
        for index in op.write_set:
            if index not in self._failed:
                self._send(op, index, ensemble[index], request_id, frame)
        return future

    def _send(
        self,
        op: PendingAddOp,
        index: int,
        bookie: str,
        request_id: int | None = None,
        frame: bytes | None = None,
    ) -> None:
        if frame is None or request_id is None:  # a re-send after an ensemble change
            request_id = self._context.clients.next_request_id()
            frame = bookie_protocol.encode(
                bookie_protocol.AddRequest(
                    request_id, self.ledger_id, op.entry_id, self._recovery, op.data
                )
            )
        self._context.clients.get(bookie).send_frame(
            request_id, frame, functools.partial(self._on_add_response, op, index, bookie)
        )

    def _on_add_response(
        self,
        op: PendingAddOp,
        index: int,
        bookie: str,
        outcome: bookie_protocol.Response | BaseException,
    ) -> None:
        if self.metadata.last_ensemble[index] != bookie:
            return  # the bookie was replaced meanwhile: its answer no longer counts
        if isinstance(outcome, BaseException):
            # Even when the add already has Qa acks: with Qw > Qa a silent failure would
            # leave every later entry one copy short. Replace the bookie now.
            self._on_bookie_failed(index, bookie, str(outcome))
            return
        response = outcome
        status = response.status
        if status == bookie_protocol.Status.FENCED:
            self._fail_all(
                LedgerFenced(
                    f"ledger {self.ledger_id} was fenced (bookie {bookie}): a reader recovered it"
                )
            )
        elif status != bookie_protocol.Status.OK:
            self._on_bookie_failed(index, bookie, f"{status.name}: {response.error}")
        elif op.future.done() or index in self._failed:
            return  # already confirmed, or the replacement bookie will be asked
        elif op.acks.add(index):
            self._confirm_in_order()

    def _confirm_in_order(self) -> None:
        if self._changing is not None:
            return  # confirmations wait until the new segment is in the metadata
        pending = self._pending
        while pending and pending[0].acks.met:
            op = pending.popleft()
            self._pending_bytes -= op.payload_bytes
            invariant(
                op.entry_id == self.last_add_confirmed + 1,
                f"ledger {self.ledger_id}: confirming {op.entry_id} after "
                f"{self.last_add_confirmed}",
            )
            self.last_add_confirmed = op.entry_id
            self.confirmed_length = op.length
            if not op.future.done():
                op.future.set_result(op.entry_id)
        if not self._room.is_set():
            self._room.set()

    # --- failures -------------------------------------------------------------------
    def _fail_all(self, error: StorageError) -> None:
        if self._error is None:
            self._error = error
            log.warning(
                "ledger %d: failing %d pending adds: %s", self.ledger_id, len(self._pending), error
            )
        pending, self._pending = self._pending, deque()
        self._pending_bytes = 0
        for op in pending:
            if not op.future.done():
                op.future.set_exception(error)
                op.future.exception()  # retrieved here: the caller may have gone
        self._room.set()

    def _on_bookie_failed(self, index: int, bookie: str, reason: str) -> None:
        if self._error is not None or self._closed or index in self._failed:
            return
        log.warning(
            "ledger %d: bookie %s (index %d) failed: %s", self.ledger_id, bookie, index, reason
        )
        self._failed[index] = bookie
        if self._changing is None:
            self._changing = asyncio.get_running_loop().create_task(self._change_ensemble())

    async def _change_ensemble(self) -> None:
        try:
            while self._failed and self._error is None:
                self._ensemble_changes += 1
                if self._ensemble_changes > limits.ensemble_changes_count_max:
                    raise NotEnoughBookies(
                        f"ledger {self.ledger_id}: gave up after "
                        f"{limits.ensemble_changes_count_max} ensemble changes"
                    )
                failed = dict(self._failed)
                await self._replace_bookies(failed)
                for index in failed:
                    del self._failed[index]
        except StorageError as error:
            self._fail_all(error)
        finally:
            self._changing = None
        self._confirm_in_order()

    async def _replace_bookies(self, failed: dict[int, str]) -> None:
        first_entry = self.last_add_confirmed + 1
        expected_state = LedgerState.IN_RECOVERY if self._recovery else LedgerState.OPEN
        metadata = self.metadata
        for _ in range(limits.metadata_cas_retries_max):
            if metadata.state != expected_state:
                raise LedgerFenced(
                    f"ledger {self.ledger_id} is {metadata.state}: cannot change its ensemble"
                )
            try:
                ensemble = await self._context.placement.replace(
                    metadata.last_ensemble, failed.values(), exclude=self._all_failed()
                )
            except NotEnoughBookies:
                # A recovering reader may have fenced us (its fence makes adds time out
                # or fail too): report that rather than the missing spare bookie.
                current = await self._context.ledgers.get_ledger(self.ledger_id)
                if current.state != expected_state:
                    raise LedgerFenced(
                        f"ledger {self.ledger_id} is {current.state}: a reader recovered it"
                    ) from None
                raise
            proposal = metadata.with_segment(first_entry, tuple(ensemble))
            try:
                metadata = await self._context.ledgers.update_ledger(proposal)
                break
            except BadVersion:
                metadata = await self._context.ledgers.get_ledger(self.ledger_id)
                invariant(
                    metadata.last_segment_first_entry <= first_entry,
                    "someone else extended the ensembles of a ledger we write",
                )
        else:
            raise BadVersion(
                f"ledger {self.ledger_id}: ensemble change lost "
                f"{limits.metadata_cas_retries_max} CAS races"
            )
        old_ensemble = self.metadata.last_ensemble
        self.metadata = metadata
        self.stats["ensemble_changes"] += 1
        log.info(
            "ledger %d: new segment at entry %d: %s -> %s",
            self.ledger_id,
            first_entry,
            old_ensemble,
            metadata.last_ensemble,
        )
        new_ensemble = metadata.last_ensemble
        for op in self._pending:
            for index in failed:
                if index in op.write_set:
                    op.acks.remove(index)
                    self.stats["resends"] += 1
                    self._send(op, index, new_ensemble[index])

    def _all_failed(self) -> set[str]:
        return set(self._failed.values())

    # --- closing --------------------------------------------------------------------
    async def close(self) -> LedgerMetadata:
        """Wait for pending adds, then record the ledger CLOSED at LAC."""
        if self._closed:
            return self.metadata
        if self._pending:
            await asyncio.gather(*(op.future for op in list(self._pending)), return_exceptions=True)
        while self._changing is not None:
            await asyncio.shield(self._changing)
        self._closed = True
        if self._error is not None and isinstance(self._error, LedgerFenced):
            raise self._error
        metadata = self.metadata
        for _ in range(limits.metadata_cas_retries_max):
            if metadata.state == LedgerState.CLOSED:
                if metadata.last_entry_id != self.last_add_confirmed:
                    raise LedgerFenced(
                        f"ledger {self.ledger_id} was closed by recovery at entry "
                        f"{metadata.last_entry_id}, this writer confirmed "
                        f"{self.last_add_confirmed}"
                    )
                self.metadata = metadata
                return metadata
            expected = LedgerState.IN_RECOVERY if self._recovery else LedgerState.OPEN
            if metadata.state != expected:
                raise LedgerFenced(f"ledger {self.ledger_id} is being recovered")
            proposal = metadata.replace(
                state=LedgerState.CLOSED,
                last_entry_id=self.last_add_confirmed,
                length=self.confirmed_length,
            )
            try:
                self.metadata = await self._context.ledgers.update_ledger(proposal)
                return self.metadata
            except BadVersion:
                metadata = await self._context.ledgers.get_ledger(self.ledger_id)
        raise BadVersion(
            f"ledger {self.ledger_id}: close lost {limits.metadata_cas_retries_max} CAS races"
        )

    @property
    def pending_count(self) -> int:
        return len(self._pending)
