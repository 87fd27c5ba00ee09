"""A managed ledger: a topic partition's log, kept as an ordered list of ledgers.

The list lives in the metadata store (table ``managed_ledgers``, one row per log, CAS on
its ``version``); the entries live in the ledgers. One process owns a log at a time: the
instance that last opened it. Positions are (ledger id, entry id); ledger ids only grow,
so the list is in log order.

Opening (:meth:`ManagedLedger.open`) fences any previous owner: its list's last ledger
is recovered and a fresh ledger CAS'd onto the list (steps and example in
``opening.py``), then every cursor is recovered (``cursor.py``), which fences the
previous owner's cursors too.

Appending. ``append_async`` takes room first (``append_room.py``: first come first
served, fewer appends than a ledger handle admits), then hands the entry to the current
ledger's writer, which numbers entries in call order and confirms them in order, so
positions follow call order. Positions are answered by the list's index
(``ledger_index.py``).

Rollover, when the current ledger reaches ``rollover_entries_max`` entries or
``rollover_bytes_max`` bytes or is older than ``rollover_age_s_max``: appends queue up
(still ordered, still counted against room); the current ledger is closed once its
pending adds are confirmed; a new ledger is created; the list is CAS'd with the old
ledger's end and the new ledger; the queue is sent to the new ledger. If creation fails
the queued appends fail and the next append tries again; if the CAS fails another owner
has the log (fenced).

Trimming (:meth:`trim`) deletes a prefix of whole ledgers no cursor needs and retention
does not hold, never the last one (``retention.py`` decides which).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from georep import limits
from georep.domain.position import Position
from georep.invariant import InvariantViolation, invariant
from georep.storage.client.bookkeeper import BookKeeper
from georep.storage.client.ledger_handle import LedgerHandle
from georep.storage.client.read_handle import ReadHandle
from georep.storage.errors import (
    BadVersion,
    EntryTooLarge,
    InvalidArgument,
    LedgerFenced,
    ManagedLedgerClosed,
    ManagedLedgerError,
    ManagedLedgerFenced,
    NoSuchCursor,
    NoSuchEntry,
    NoSuchManagedLedger,
    StorageError,
)
from georep.storage.managed_ledger import retention
from georep.storage.managed_ledger.append_room import AppendRoom, PendingAppendOp
from georep.storage.managed_ledger.config import ManagedLedgerConfig
from georep.storage.managed_ledger.cursor import ManagedCursor
from georep.storage.managed_ledger.entry_cache import EntryCache
from georep.storage.managed_ledger.ledger_index import LedgerIndex
from georep.storage.managed_ledger.ledger_reads import LedgerReads
from georep.storage.managed_ledger.opening import (
    CURSOR_KEY,
    NAME_KEY,
    ROLE_KEY,
    Clock,
    check_name,
    create_ledger,
    delete_quietly,
    take_ownership,
)
from georep.storage.meta.managed_ledgers import (
    LedgerInfo,
    ManagedCursorInfo,
    ManagedLedgerInfo,
    ManagedLedgerRepository,
)

if TYPE_CHECKING:
    from georep.storage.meta.ledger_metadata import LedgerMetadata

log = logging.getLogger(__name__)

StartAt = Literal["earliest", "latest"] | Position


class _RolloverAborted(Exception):
    """Internal: the current ledger could not be ended; the rollover stops quietly."""


class ManagedLedger:
    """Create with :meth:`ManagedLedgerFactory.open`, not directly."""

    def __init__(
        self,
        name: str,
        info: ManagedLedgerInfo,
        writer: LedgerHandle,
        config: ManagedLedgerConfig,
        *,
        bookkeeper: BookKeeper,
        store: ManagedLedgerRepository,
        clock: Clock,
        on_closed: Callable[[ManagedLedger], None],
        cache: EntryCache | None = None,
    ) -> None:
        self.name = name
        self.config = config
        self.cursors: dict[str, ManagedCursor] = {}
        #: Told the name of every cursor whose state changes, is created or deleted
        #: (the broker's change feed, ``broker/change_feed.py``).
        self.cursor_listener: Callable[[str], None] | None = None
        self._bk = bookkeeper
        self._store = store
        self._clock = clock
        self._on_closed = on_closed
        self._info = info
        invariant(
            bool(info.ledgers) and info.ledgers[-1].ledger_id == writer.ledger_id,
            f"managed ledger {name}: the writer's ledger must end the list",
        )
        self._ledgers: list[LedgerInfo] = list(info.ledgers)
        self._index = LedgerIndex(self._ledgers)
        self._writer: LedgerHandle | None = writer
        self._writer_broken = False
        self._last_confirmed: Position | None = self._index.last_entry()
        self._queued: collections.deque[PendingAppendOp] = collections.deque()
        self._rollover: asyncio.Task[None] | None = None
        self._metadata_lock = asyncio.Lock()  # one CAS of our row at a time
        self._cursor_lock = asyncio.Lock()
        self._room = AppendRoom(lambda: self._error)
        self._entry_waiter: asyncio.Future[None] | None = None
        self._reads = LedgerReads(bookkeeper)
        self._tail = (cache or EntryCache()).tail()  # the entries confirmed last
        self._state: Literal["open", "fenced", "closed"] = "open"
        self._error: ManagedLedgerError | None = None
        self._warned_ledgers_max = False
        self._stats: collections.Counter[str] = collections.Counter()

    # --- opening --------------------------------------------------------------------
    @classmethod
    async def open(
        cls,
        name: str,
        config: ManagedLedgerConfig,
        *,
        bookkeeper: BookKeeper,
        store: ManagedLedgerRepository,
        clock: Clock = time.time,
        on_closed: Callable[[ManagedLedger], None] = lambda _ml: None,
        cache: EntryCache | None = None,
    ) -> ManagedLedger:
        """Open ``name`` as its new owner (``opening.py``), then recover its cursors."""
        info, writer = await take_ownership(
            name, config, bookkeeper=bookkeeper, store=store, clock=clock
        )
        managed_ledger = cls(
            name,
            info,
            writer,
            config,
            bookkeeper=bookkeeper,
            store=store,
            clock=clock,
            on_closed=on_closed,
            cache=cache,
        )
        try:
            await managed_ledger._recover_cursors()
        except BaseException:
            await managed_ledger.close()
            raise
        log.info(
            "opened managed ledger %s: ledgers %s, last confirmed %s, cursors %s",
            name,
            managed_ledger._index.ids,
            managed_ledger._last_confirmed,
            sorted(managed_ledger.cursors),
        )
        return managed_ledger

    async def _recover_cursors(self) -> None:
        infos = await self._store.list_managed_cursors(self.name)
        gate = asyncio.Semaphore(limits.cursor_recoveries_in_flight_max)

        async def recover(info: Any) -> ManagedCursor:
            async with gate:
                return await ManagedCursor.recover(self, info)

        for cursor in await asyncio.gather(*(recover(info) for info in infos)):
            self.cursors[cursor.name] = cursor

    # --- positions ------------------------------------------------------------------
    @property
    def last_confirmed(self) -> Position | None:
        """The last durable entry; None while the log holds none (never written, or
        every entry trimmed and the log reopened)."""
        return self._last_confirmed

    # The answers are the index's (``ledger_index.py``, where each is explained);
    # ``is_entry``: whether ``position`` is a confirmed entry still stored.
    @property
    def first_position(self) -> Position | None:
        return self._index.first_position()

    def next_position(self, position: Position) -> Position:
        return self._index.next_position(position)

    def position_at_or_after(self, position: Position) -> Position:
        return self._index.position_at_or_after(position)

    def entry_at_or_before(self, position: Position) -> Position | None:
        return self._index.entry_at_or_before(position)

    def entries_after(self, position: Position | None) -> int:
        return self._index.entries_after(position)

    def entries_between(self, after: Position, before: Position) -> int:
        return self._index.entries_between(after, before)

    def entries_in(self, low: Position, high: Position) -> int:
        return self._index.entries_in(low, high)

    def is_entry(self, position: Position) -> bool:
        return self._index.entries_in(position, position) == 1

    @property
    def tail_position(self) -> Position:
        return self._index.tail()

    # --- appending ------------------------------------------------------------------
    async def append(self, data: bytes) -> Position:
        """Append ``data``; returns its position once it is durable (confirmed)."""
        return await (await self.append_async(data))

    async def append_async(self, data: bytes) -> asyncio.Future[Position]:
        """Append ``data`` without waiting for it to be durable: waits only for room.
        Positions follow call order. The future fails with ManagedLedgerFenced when
        another owner took the log, or with the storage error that lost the entry."""
        if not isinstance(data, bytes):
            raise InvalidArgument(f"append takes bytes, got {type(data).__name__}")
        if len(data) > limits.entry_payload_bytes_max:
            raise EntryTooLarge(
                f"entry of {len(data)} bytes exceeds {limits.entry_payload_bytes_max}"
            )
        self._check_writable()
        await self._room.reserve(len(data))
        try:
            self._check_writable()
        except ManagedLedgerError:
            self._room.release(len(data))
            raise
        op = PendingAppendOp(data, asyncio.get_running_loop().create_future())
        self._stats["appends"] += 1
        self._stats["append_bytes"] += len(data)
        if self._writer is None or self._writer_broken or self._rollover is not None:
            self._queued.append(op)
            self._start_rollover()
        elif self._rollover_due():
            self._queued.append(op)
            self._start_rollover()
        else:
            await self._send(op)
        return op.future

    async def _send(self, op: PendingAppendOp) -> None:
        writer = self._writer
        if writer is None:
            raise InvariantViolation("send without a writer")
        # Our room is smaller than the handle's (limits), so this never waits for room:
        # no other append can slip in between and positions follow call order.
        invariant(writer.pending_count < limits.pending_adds_count_max, "handle full")
        try:
            entry_future = await writer.add_async(op.data)
        except StorageError as error:
            self._on_writer_error(writer, error)
            if self._state == "open":
                self._queued.appendleft(op)  # first in line for the next ledger
                self._start_rollover()
            else:
                self._fail_op(op, self._error or error)
            return
        ledger_id = writer.ledger_id
        entry_future.add_done_callback(lambda f: self._on_added(op, ledger_id, f))

    def _on_added(self, op: PendingAppendOp, ledger_id: int, future: asyncio.Future[int]) -> None:
        error = None if future.cancelled() else future.exception()
        if future.cancelled() or error is not None:
            writer = self._writer
            if writer is not None and writer.ledger_id == ledger_id:
                self._on_writer_error(writer, error or StorageError("add cancelled"))
            if isinstance(error, LedgerFenced):
                error = self._error or ManagedLedgerFenced(f"managed ledger {self.name}: {error}")
            self._fail_op(op, error)
            return
        entry_id = future.result()
        tail = self._index.tail()
        invariant(
            tail == (ledger_id, entry_id),
            f"managed ledger {self.name}: confirmed {ledger_id}:{entry_id} out of order "
            f"(tail {tail})",
        )
        self._index.confirmed(len(op.data))
        position = Position(ledger_id, entry_id)
        self._last_confirmed = position
        self._tail.confirmed(ledger_id, entry_id, op.data)
        self._room.release(len(op.data))
        if not op.future.done():
            op.future.set_result(position)
        self._notify_entries()

    def _fail_op(self, op: PendingAppendOp, error: BaseException | None) -> None:
        self._room.release(len(op.data))
        if not op.future.done():
            op.future.set_exception(error or StorageError("append failed"))

    def _on_writer_error(self, writer: LedgerHandle, error: BaseException) -> None:
        if isinstance(error, LedgerFenced):
            self._fence(f"ledger {writer.ledger_id} was fenced: {error}")
        elif not self._writer_broken:
            log.warning(
                "managed ledger %s: ledger %d failed: %s", self.name, writer.ledger_id, error
            )
            self._writer_broken = True

    def _rollover_due(self) -> bool:
        writer = self._writer
        if writer is None:
            return True
        if len(self._index.ids) >= limits.managed_ledger_ledgers_count_max:
            if not self._warned_ledgers_max:
                self._warned_ledgers_max = True
                log.warning(
                    "managed ledger %s lists %d ledgers: no rollover until trimmed",
                    self.name,
                    len(self._index.ids),
                )
            return False
        self._warned_ledgers_max = False
        pushed = writer.last_add_pushed + 1
        if pushed == 0:
            return False
        config = self.config
        return (
            pushed >= config.rollover_entries_max
            or writer.length >= config.rollover_bytes_max
            or self._clock() - self._ledgers[-1].created_at >= config.rollover_age_s_max
        )

    def _start_rollover(self) -> asyncio.Task[None]:
        if self._rollover is None:
            self._rollover = asyncio.get_running_loop().create_task(self._roll_over())
        return self._rollover

    async def _roll_over(self) -> None:
        """Close the current ledger, start a new one, CAS the list, send the queue; again
        while the queue alone fills the new ledger up."""
        try:
            while self._state == "open":
                old = self._writer
                if old is not None and old.ledger_id == self._index.ids[-1]:
                    end = await self._end_ledger(old)
                    if end is None:
                        return  # fenced
                    self._writer = None
                    self._record_end(old.ledger_id, end)
                try:
                    writer = await create_ledger(
                        self._bk, self.config, {ROLE_KEY: "log", NAME_KEY: self.name}
                    )
                except StorageError as error:
                    self._fail_queued(error)
                    return
                if not await self._install(writer):
                    return
                self._stats["rollovers"] += 1
                while (
                    self._queued
                    and self._state == "open"
                    and not self._writer_broken
                    and not self._rollover_due()
                ):
                    await self._send(self._queued.popleft())
                if not self._queued:
                    return
        except _RolloverAborted:
            return
        finally:
            self._rollover = None
            if self._queued and not self._is_open():
                self._fail_queued(self._error or ManagedLedgerClosed(self.name))

    def _record_end(self, ledger_id: int, end: LedgerMetadata) -> None:
        """The current ledger is closed at ``end``: record its final size."""
        invariant(self._index.ids[-1] == ledger_id, "ending a ledger that is not the current one")
        self._ledgers[-1] = LedgerInfo(
            ledger_id=ledger_id,
            entries=end.last_entry_id + 1,
            size_bytes=end.length,
            created_at=self._ledgers[-1].created_at,
            closed_at=self._clock(),
        )
        self._index.rebuild(self._ledgers)
        if end.last_entry_id >= 0:
            last = Position(ledger_id, end.last_entry_id)
            if self._last_confirmed is None or last > self._last_confirmed:
                self._last_confirmed = last  # recovery kept an add we saw fail
                self._notify_entries()

    async def _end_ledger(self, writer: LedgerHandle) -> LedgerMetadata | None:
        """Close ``writer`` once its pending adds are done; returns the CLOSED metadata,
        or None when another owner fenced it. A writer that cannot close normally (it
        failed) is recovered like a dead owner's ledger; if that fails too the rollover
        is aborted (the queued appends fail) and the next append tries again."""
        try:
            metadata = await writer.close()
            if metadata.is_closed:
                return metadata
        except LedgerFenced as error:
            self._fence(f"ledger {writer.ledger_id} was fenced: {error}")
            return None
        except StorageError as error:
            log.warning(
                "managed ledger %s: closing ledger %d: %s", self.name, writer.ledger_id, error
            )
        try:
            return await self._bk.recover_ledger(writer.ledger_id)
        except StorageError as error:
            self._writer_broken = True
            self._fail_queued(error)
            raise _RolloverAborted from error

    async def _install(self, writer: LedgerHandle) -> bool:
        """CAS the list with ``writer``'s ledger appended (and an empty last ledger
        dropped); True when it is now the current ledger."""
        async with self._metadata_lock:
            ledgers = list(self._ledgers)
            dropped = []
            if ledgers and ledgers[-1].entries == 0 and ledgers[-1].closed_at is not None:
                dropped.append(ledgers.pop().ledger_id)
            ledgers.append(LedgerInfo(writer.ledger_id, created_at=self._clock()))
            try:
                info = await self._cas(ledgers)
            except StorageError as error:
                await delete_quietly(self._bk, [writer.ledger_id])
                self._fail_queued(self._error or error)
                return False
            self._info = info
            self._ledgers = list(info.ledgers)
            self._index.rebuild(self._ledgers)
            self._writer = writer
            self._writer_broken = False
        await delete_quietly(self._bk, dropped)
        return True

    async def _cas(self, ledgers: list[LedgerInfo]) -> ManagedLedgerInfo:
        try:
            return await self._store.update_managed_ledger(
                self._info.replace(ledgers=tuple(ledgers))
            )
        except (BadVersion, NoSuchManagedLedger) as error:
            self._fence(f"its list changed under us: {error}")
            raise self._failure() from None

    def _fail_queued(self, error: BaseException) -> None:
        queued, self._queued = self._queued, collections.deque()
        for op in queued:
            self._fail_op(op, error)

    # --- reading --------------------------------------------------------------------
    async def read(self, start: Position, count_max: int) -> list[tuple[Position, bytes]]:
        """Up to ``count_max`` entries >= ``start``, in order, across ledgers, up to the
        last confirmed entry (fewer, or none, at the end of the log)."""
        if not 1 <= count_max <= limits.managed_ledger_read_entries_max:
            raise InvalidArgument(
                f"count_max must be 1..{limits.managed_ledger_read_entries_max}, got {count_max}"
            )
        self._check_readable()
        plan = self._index.read_plan(start, count_max)  # decided before any await
        result: list[tuple[Position, bytes]] = []
        for ledger_id, first_entry, last_entry in plan:
            kept = self._tail.get(ledger_id, first_entry, last_entry)
            if kept is not None:
                result += [(Position(ledger_id, first_entry + i), p) for i, p in enumerate(kept)]
                continue
            entries = await self._reads.read(ledger_id, first_entry, last_entry, self._writer)
            result += [(Position(ledger_id, e.entry_id), e.payload) for e in entries]
        self._stats["reads"] += 1
        self._stats["read_entries"] += len(result)
        return result

    async def read_entry(self, position: Position) -> bytes:
        """The payload of the entry at ``position``; NoSuchEntry when the log does not
        hold it (never written, not yet confirmed, or trimmed)."""
        if not self.is_entry(position):
            raise NoSuchEntry(f"managed ledger {self.name} holds no entry {position}")
        ((_, data),) = await self.read(position, 1)
        return data

    async def wait_for_entries_after(self, position: Position | None) -> None:
        """Return once an entry after ``position`` (any entry, for None) is confirmed.
        Raises ManagedLedgerClosed / ManagedLedgerFenced when the log closes meanwhile,
        so that a tailing dispatcher never waits forever."""
        while True:
            self._check_readable()
            if self._state == "fenced":
                raise self._failure()
            last = self._last_confirmed
            if last is not None and (position is None or last > position):
                return
            if self._entry_waiter is None:
                self._entry_waiter = asyncio.get_running_loop().create_future()
            await asyncio.shield(self._entry_waiter)  # one waiter's cancel is its own

    def _notify_entries(self) -> None:
        waiter, self._entry_waiter = self._entry_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # --- cursors --------------------------------------------------------------------
    async def open_cursor(
        self, name: str, *, start: StartAt = "latest", durable: bool = True
    ) -> ManagedCursor:
        """The cursor ``name``; created when absent, with its mark-delete position just
        before ``start`` ("earliest": the first stored entry; "latest": after the last
        confirmed entry; a Position: that entry, clamped to the log). An existing cursor
        is returned as restored, whatever ``start`` says. ``durable=False``: held in
        memory only (``ManagedCursor.non_durable``), for a reader."""
        self._check_writable()
        check_name("cursor name", name, limits.cursor_name_chars_max)
        if name in self.cursors:
            return self.cursors[name]
        if start == "earliest":
            position = self.position_at_or_after(Position.EARLIEST)
        elif start == "latest":
            position = self._index.tail()
        elif isinstance(start, Position):
            position = self.position_at_or_after(start)
        else:
            raise InvalidArgument(f"start must be 'earliest', 'latest' or a Position: {start!r}")
        async with self._cursor_lock:
            if name in self.cursors:
                return self.cursors[name]
            if len(self.cursors) >= limits.managed_ledger_cursors_count_max:
                raise InvalidArgument(
                    f"managed ledger {self.name} has {len(self.cursors)} cursors (the maximum)"
                )
            self._check_writable()
            if durable:
                cursor = await ManagedCursor.create(self, name, position.predecessor())
            else:
                cursor = ManagedCursor.non_durable(self, name, position.predecessor())
            self.cursors[name] = cursor
            self.cursor_changed(name)
            return cursor

    async def delete_cursor(self, name: str) -> None:
        """Delete cursor ``name`` and its persisted state; NoSuchCursor when absent."""
        self._check_writable()
        cursor = self.cursors.pop(name, None)
        if cursor is None:
            raise NoSuchCursor(f"managed ledger {self.name} has no cursor {name!r}")
        self.cursor_changed(name)
        ledger_id = await cursor.close(flush=False)
        if not cursor.durable:
            return  # nothing of it was stored
        await self._store.delete_managed_cursor(self.name, name)
        if ledger_id is not None:
            await delete_quietly(self._bk, [ledger_id])

    def cursor_changed(self, name: str) -> None:
        if self.cursor_listener is not None:
            self.cursor_listener(name)

    # --- the port a cursor persists through (cursor_ledger.CursorStorage) -------------
    async def create_cursor_ledger(self, cursor_name: str) -> LedgerHandle:
        """A new ledger for ``cursor_name``'s states, tagged as the cursor's."""
        custom = {ROLE_KEY: "cursor", NAME_KEY: self.name, CURSOR_KEY: cursor_name}
        return await create_ledger(self._bk, self.config, custom)

    async def open_cursor_ledger(self, ledger_id: int) -> ReadHandle:
        """A cursor's previous ledger, fenced and recovered (NoSuchLedger if gone)."""
        return await self._bk.open_ledger(ledger_id, recovery=True)

    async def delete_cursor_ledgers(self, ledger_ids: list[int]) -> None:
        """Delete a cursor's ledgers that nothing points at any more (quietly: one that
        stays is garbage the auditor may report, not lost data)."""
        await delete_quietly(self._bk, ledger_ids)

    async def create_cursor_row(
        self, name: str, *, cursor_ledger_id: int, mark_delete: Position
    ) -> ManagedCursorInfo:
        """The cursor's row in the metadata store (BadVersion, NoSuchManagedLedger when
        another owner got there first)."""
        return await self._store.create_managed_cursor(
            self.name,
            name,
            cursor_ledger_id=cursor_ledger_id,
            mark_delete=mark_delete,
            properties={},
        )

    async def update_cursor_row(self, info: ManagedCursorInfo) -> ManagedCursorInfo:
        """CAS the cursor's row to ``info`` (BadVersion, NoSuchCursor when it changed)."""
        return await self._store.update_managed_cursor(info)

    # --- trimming -------------------------------------------------------------------
    async def trim(self) -> list[int]:
        """Delete the ledgers no cursor needs and retention does not hold (never the
        last one); returns their ids. First rolls the current ledger over when it is due
        (full, or older than ``rollover_age_s_max``), so that an idle log's data can go."""
        self._check_writable()
        if self._writer is not None and self._rollover is None and self._rollover_due():
            await asyncio.shield(self._start_rollover())
        async with self._metadata_lock:
            self._check_writable()
            slowest = min((c.mark_delete_position for c in self.cursors.values()), default=None)
            count = retention.trimmable_count(
                self._index, self._ledgers, slowest, self.config, self._clock()
            )
            if count == 0:
                return []
            deleted = self._index.ids[:count]
            self._info = await self._cas(self._ledgers[count:])
            self._ledgers = list(self._info.ledgers)
            self._index.rebuild(self._ledgers)  # the current ledger keeps its live counts
        for ledger_id in deleted:
            self._reads.forget(ledger_id)
            self._tail.forget(ledger_id)
        await delete_quietly(self._bk, deleted)
        self._stats["trimmed_ledgers"] += len(deleted)
        log.info("managed ledger %s: trimmed ledgers %s", self.name, deleted)
        return deleted

    # --- state, closing -------------------------------------------------------------
    def _check_writable(self) -> None:
        if self._error is not None:
            raise self._error

    def _check_readable(self) -> None:
        if self._state == "closed":
            raise self._failure()

    def _fence(self, reason: str) -> None:
        if self._state != "open":
            return
        log.warning("managed ledger %s fenced: %s", self.name, reason)
        self._state = "fenced"
        self._error = ManagedLedgerFenced(f"managed ledger {self.name}: {reason}")
        self._fail_queued(self._error)
        self._room.grant()
        self._notify_entries()
        for cursor in self.cursors.values():
            cursor.fence(self._error)
        self._tail.clear()
        self._on_closed(self)

    @property
    def is_fenced(self) -> bool:
        return self._state == "fenced"

    def _failure(self) -> ManagedLedgerError:
        """The error a fenced or closed log fails with (set when it leaves "open")."""
        if self._error is None:
            raise InvariantViolation(f"managed ledger {self.name}: {self._state}, no error")
        return self._error

    def _is_open(self) -> bool:
        """Read afresh: an await may have fenced or closed the log since a check."""
        return self._state == "open"

    async def close(self) -> None:
        """Stop taking appends, let those admitted finish, close the current ledger
        and the cursors (flushing their state). Idempotent."""
        if self._state == "closed":
            return
        was_open = self._state == "open"
        self._state = "closed"
        self._error = ManagedLedgerClosed(f"managed ledger {self.name} is closed")
        self._room.grant()
        if self._rollover is not None:
            await asyncio.gather(self._rollover, return_exceptions=True)
        self._fail_queued(self._error)
        writer, self._writer = self._writer, None
        if writer is not None and was_open:
            try:
                await writer.close()
            except StorageError as error:
                log.info(
                    "managed ledger %s: closing ledger %d: %s", self.name, writer.ledger_id, error
                )
        for cursor in list(self.cursors.values()):
            await cursor.close(flush=was_open)
        self._reads.clear()
        self._tail.clear()
        self._notify_entries()
        self._on_closed(self)

    def stats(self) -> dict[str, Any]:
        """Sizes, counters, and per cursor its positions and backlog."""
        return {
            "name": self.name,
            "state": self._state,
            "entries": self._index.total(),
            "bytes": self._index.total_bytes(),
            "ledgers": len(self._index.ids),
            "ledger_ids": list(self._index.ids),
            "current_ledger_id": self._writer.ledger_id if self._writer else None,
            "first_position": _text(self.first_position),
            "last_confirmed": _text(self._last_confirmed),
            "pending_appends": self._room.pending_count,
            "pending_append_bytes": self._room.pending_bytes,
            "appends": self._stats["appends"],
            "append_bytes": self._stats["append_bytes"],
            "reads": self._stats["reads"],
            "read_entries": self._stats["read_entries"],
            "rollovers": self._stats["rollovers"],
            "trimmed_ledgers": self._stats["trimmed_ledgers"],
            "cursors": {name: cursor.stats() for name, cursor in sorted(self.cursors.items())},
        }

    def __repr__(self) -> str:
        ledgers, last = self._index.ids, self._last_confirmed
        return f"ManagedLedger({self.name!r}, ledgers={ledgers}, last={last})"


# --- helpers ---------------------------------------------------------------------------
def _text(position: Position | None) -> str | None:
    return None if position is None else str(position)
