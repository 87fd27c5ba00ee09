"""A managed ledger: a topic partition's log, kept as an ordered list of ledgers.

The list lives in the metadata store (table ``managed_ledgers``, one row per log, CAS on
its ``version``); the entries live in the ledgers. One process owns a log at a time: the
instance that last opened it. Positions are (ledger id, entry id); ledger ids only grow,
so the list is in log order.

Opening (:meth:`ManagedLedger.open`), which fences any previous owner:

1. read the row (create it when absent);
2. recover the last ledger of the list (``BookKeeper.recover_ledger``: fence and close).
   A previous owner still writing gets ``LedgerFenced`` on its next add and turns it into
   :class:`ManagedLedgerFenced`; every entry it had confirmed is inside the recovered end;
3. drop that ledger from the list if it is empty, record its end otherwise;
4. create a fresh ledger and CAS the list with it appended. When the CAS fails the list
   changed meanwhile: the previous owner rolled over (it closed the ledger of step 2
   before we fenced it and listed a new one), or a concurrent opener got in first. Read
   the list again and go back to step 2 for its new last ledger, which fences that
   writer too, at most ``limits.metadata_cas_retries_max`` times (then
   ManagedLedgerFenced). The last opener wins and every earlier one is fenced on its
   next add: never two owners;
5. recover every cursor (see ``cursor.py``), which fences the previous owner's cursors.

Example: owner A writes ledger 12 of list [7, 12]. B opens: recovers 12 (A's adds now
fail), creates 15, CAS [7, 12, 15]. A's confirmed entries are all in 12, B's go to 15:
the log reads 7..., 12..., 15... with nothing interleaved.

Appending. ``append_async`` takes room first (``managed_ledger_pending_appends_*``,
first come first served), then hands the entry to the current ledger's writer, which
numbers entries in call order and confirms them in order. Because this class admits
fewer appends than a ledger handle would, the handle never makes an admitted append wait,
so positions follow call order.

Rollover, when the current ledger reaches ``rollover_entries_max`` entries or
``rollover_bytes_max`` bytes or is older than ``rollover_age_s_max``: appends queue up
(still ordered, still counted against room); the current ledger is closed once its
pending adds are confirmed; a new ledger is created; the list is CAS'd with the old
ledger's end and the new ledger; the queue is sent to the new ledger. If creation fails
the queued appends fail and the next append tries again; if the CAS fails another owner
has the log (fenced).

Trimming (:meth:`trim`) deletes a prefix of whole ledgers: each fully below every
cursor's mark-delete position (with no cursor, vacuously true), not held by retention
(see ``config.py``), and never the last ledger of the list.
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from georep import limits
from georep.invariant import InvariantViolation, invariant
from georep.position import Position
from georep.storage.client.bookkeeper import BookKeeper
from georep.storage.client.ledger_handle import LedgerHandle
from georep.storage.client.read_handle import ReadHandle
from georep.storage.errors import (
    BadVersion,
    BookieUnavailable,
    EntryTooLarge,
    InvalidArgument,
    LedgerFenced,
    ManagedLedgerClosed,
    ManagedLedgerError,
    ManagedLedgerFenced,
    NoSuchCursor,
    NoSuchEntry,
    NoSuchLedger,
    NoSuchManagedLedger,
    StorageError,
)
from georep.storage.managed_ledger.config import ManagedLedgerConfig
from georep.storage.managed_ledger.cursor import ManagedCursor
from georep.storage.meta.managed_ledgers import (
    LedgerInfo,
    ManagedCursorInfo,
    ManagedLedgerInfo,
    ManagedLedgerRepository,
)

if TYPE_CHECKING:
    from georep.storage.meta.ledger_metadata import LedgerMetadata

log = logging.getLogger(__name__)

Clock = Callable[[], float]
StartAt = Literal["earliest", "latest"] | Position

#: Custom metadata on every ledger a managed ledger creates, so that stray ones can be
#: traced to their log.
ROLE_KEY = "georep.role"
NAME_KEY = "georep.managed-ledger"
CURSOR_KEY = "georep.cursor"


class _RolloverAborted(Exception):
    """Internal: the current ledger could not be ended; the rollover stops quietly."""


class PendingAppendOp:
    """One admitted append: its bytes, and the future its caller holds."""

    __slots__ = ("data", "future")

    def __init__(self, data: bytes, future: asyncio.Future[Position]) -> None:
        self.data = data
        self.future = future


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
        # Index of the list for position arithmetic: ids, entries, bytes, entries before.
        # The last ledger's entries and bytes count live as its appends are confirmed.
        self._ids: list[int] = []
        self._counts: list[int] = []
        self._sizes: list[int] = []
        self._bases: list[int] = []
        self._rebuild_index()
        self._writer: LedgerHandle | None = writer
        self._writer_broken = False
        self._last_confirmed: Position | None = self._last_entry_listed()
        self._queued: collections.deque[PendingAppendOp] = collections.deque()
        self._rollover: asyncio.Task[None] | None = None
        self._metadata_lock = asyncio.Lock()  # one CAS of our row at a time
        self._cursor_lock = asyncio.Lock()
        self._pending_count = 0
        self._pending_bytes = 0
        self._room_waiters: collections.deque[tuple[int, asyncio.Future[None]]] = (
            collections.deque()
        )
        self._entry_waiter: asyncio.Future[None] | None = None
        self._read_handles: collections.OrderedDict[int, ReadHandle] = collections.OrderedDict()
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
    ) -> ManagedLedger:
        """Open ``name`` as its new owner (steps 1-5 of the module docstring)."""
        check_name("managed ledger name", name, limits.managed_ledger_name_chars_max)
        info = await _get_or_create(store, name)
        writer: LedgerHandle | None = None
        for _attempt in range(limits.metadata_cas_retries_max):
            ledgers, dropped = await _end_last_ledger(bookkeeper, info, clock)
            if writer is None or (ledgers and ledgers[-1].ledger_id > writer.ledger_id):
                # ids must grow along the list: a writer older than a ledger the previous
                # owner listed meanwhile is replaced
                if writer is not None:
                    await _delete_quietly(bookkeeper, [writer.ledger_id])
                writer = await _create_ledger(bookkeeper, config, {ROLE_KEY: "log", NAME_KEY: name})
            ledgers.append(LedgerInfo(writer.ledger_id, created_at=clock()))
            try:
                info = await store.update_managed_ledger(info.replace(ledgers=tuple(ledgers)))
                break
            except BadVersion:
                # The list changed since we read it: the previous owner rolled over to a
                # ledger we have not fenced, or another opener got in first. Read it
                # again and fence its new last ledger too (step 4).
                try:
                    info = await store.get_managed_ledger(name)
                except NoSuchManagedLedger as error:
                    await _delete_quietly(bookkeeper, [writer.ledger_id])
                    raise ManagedLedgerFenced(f"managed ledger {name}: {error}") from None
            except NoSuchManagedLedger as error:
                await _delete_quietly(bookkeeper, [writer.ledger_id])
                raise ManagedLedgerFenced(
                    f"managed ledger {name} was deleted while opening ({error})"
                ) from None
        else:
            if writer is not None:
                await _delete_quietly(bookkeeper, [writer.ledger_id])
            raise ManagedLedgerFenced(
                f"managed ledger {name}: its list kept changing while opening "
                f"({limits.metadata_cas_retries_max} attempts)"
            )
        await _delete_quietly(bookkeeper, dropped)
        managed_ledger = cls(
            name,
            info,
            writer,
            config,
            bookkeeper=bookkeeper,
            store=store,
            clock=clock,
            on_closed=on_closed,
        )
        try:
            await managed_ledger._recover_cursors()
        except BaseException:
            await managed_ledger.close()
            raise
        log.info(
            "opened managed ledger %s: ledgers %s, last confirmed %s, cursors %s",
            name,
            managed_ledger._ids,
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

    @property
    def first_position(self) -> Position | None:
        """The first entry still stored; None when there is none."""
        return self._position_at(0) if self._total() > 0 else None

    def next_position(self, position: Position) -> Position:
        """The first entry after ``position``; past the last entry, the position the
        next append would get in the last ledger (every later entry is greater)."""
        rank = self._rank(position)
        if rank < self._total():
            return self._position_at(rank)
        return max(self._tail(), _next_in_ledger(position))

    def position_at_or_after(self, position: Position) -> Position:
        """The first entry >= ``position``; past the last entry, the tail (see
        :meth:`next_position`)."""
        rank = self._rank(position.predecessor())
        if rank < self._total():
            return self._position_at(rank)
        return self._tail()

    def entry_at_or_before(self, position: Position) -> Position | None:
        """The last stored entry <= ``position``; None when there is none."""
        rank = self._rank(position)
        return self._position_at(rank - 1) if rank > 0 else None

    def entries_after(self, position: Position | None) -> int:
        """Entries stored after ``position`` (all of them for None), up to the last
        confirmed one: the backlog of a mark-delete position."""
        return self._total() - (0 if position is None else self._rank(position))

    def entries_between(self, after: Position, before: Position) -> int:
        """Entries p with ``after < p < before``."""
        return max(0, self._rank(before.predecessor()) - self._rank(after))

    def entries_in(self, low: Position, high: Position) -> int:
        """Entries p with ``low <= p <= high``."""
        return max(0, self._rank(high) - self._rank(low.predecessor()))

    def is_entry(self, position: Position) -> bool:
        """Whether ``position`` is a confirmed entry still stored."""
        return self.entries_in(position, position) == 1

    @property
    def tail_position(self) -> Position:
        """The position the next append would get in the last ledger: after every stored
        entry, and <= every entry still to come."""
        return self._tail()

    def _rank(self, position: Position) -> int:
        """How many stored entries are <= ``position``."""
        index = bisect.bisect_right(self._ids, position.ledger_id) - 1
        if index < 0:
            return 0
        if self._ids[index] == position.ledger_id:
            return self._bases[index] + min(max(position.entry_id + 1, 0), self._counts[index])
        return self._bases[index] + self._counts[index]

    def _position_at(self, ordinal: int) -> Position:
        """The entry with ``ordinal`` entries before it (0 <= ordinal < total)."""
        invariant(0 <= ordinal < self._total(), f"ordinal {ordinal} out of range")
        index = bisect.bisect_right(self._bases, ordinal) - 1
        return Position(self._ids[index], ordinal - self._bases[index])

    def _total(self) -> int:
        return self._bases[-1] + self._counts[-1] if self._ids else 0

    def _tail(self) -> Position:
        return Position(self._ids[-1], self._counts[-1])

    def _rebuild_index(self) -> None:
        live_entries = self._counts[-1] if self._counts else 0
        live_bytes = self._sizes[-1] if self._sizes else 0
        last_id = self._ids[-1] if self._ids else None
        self._ids = [info.ledger_id for info in self._ledgers]
        self._counts = [info.entries for info in self._ledgers]
        self._sizes = [info.size_bytes for info in self._ledgers]
        if self._ids and self._ids[-1] == last_id and self._ledgers[-1].closed_at is None:
            self._counts[-1], self._sizes[-1] = live_entries, live_bytes  # still written
        self._bases = []
        running = 0
        for count in self._counts:
            self._bases.append(running)
            running += count

    def _last_entry_listed(self) -> Position | None:
        for ledger_id, count in zip(reversed(self._ids), reversed(self._counts), strict=True):
            if count > 0:
                return Position(ledger_id, count - 1)
        return None

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
        await self._reserve(len(data))
        try:
            self._check_writable()
        except ManagedLedgerError:
            self._release(len(data))
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
        invariant(
            self._ids[-1] == ledger_id and entry_id == self._counts[-1],
            f"managed ledger {self.name}: confirmed {ledger_id}:{entry_id} out of order "
            f"(tail {self._tail()})",
        )
        self._counts[-1] += 1
        self._sizes[-1] += len(op.data)
        position = Position(ledger_id, entry_id)
        self._last_confirmed = position
        self._release(len(op.data))
        if not op.future.done():
            op.future.set_result(position)
        self._notify_entries()

    def _fail_op(self, op: PendingAppendOp, error: BaseException | None) -> None:
        self._release(len(op.data))
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
        if len(self._ids) >= limits.managed_ledger_ledgers_count_max:
            if not self._warned_ledgers_max:
                self._warned_ledgers_max = True
                log.warning(
                    "managed ledger %s lists %d ledgers: no rollover until trimmed",
                    self.name,
                    len(self._ids),
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
                if old is not None and old.ledger_id == self._ids[-1]:
                    end = await self._end_ledger(old)
                    if end is None:
                        return  # fenced
                    self._writer = None
                    self._record_end(old.ledger_id, end)
                try:
                    writer = await _create_ledger(
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
        invariant(self._ids[-1] == ledger_id, "ending a ledger that is not the current one")
        self._ledgers[-1] = LedgerInfo(
            ledger_id=ledger_id,
            entries=end.last_entry_id + 1,
            size_bytes=end.length,
            created_at=self._ledgers[-1].created_at,
            closed_at=self._clock(),
        )
        self._rebuild_index()
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
                await _delete_quietly(self._bk, [writer.ledger_id])
                self._fail_queued(self._error or error)
                return False
            self._info = info
            self._ledgers = list(info.ledgers)
            self._rebuild_index()
            self._writer = writer
            self._writer_broken = False
        await _delete_quietly(self._bk, dropped)
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

    # --- room (backpressure) --------------------------------------------------------
    def _has_room(self, size: int) -> bool:
        return self._pending_count == 0 or (
            self._pending_count < limits.managed_ledger_pending_appends_count_max
            and self._pending_bytes + size <= limits.managed_ledger_pending_appends_bytes_max
        )

    async def _reserve(self, size: int) -> None:
        """Take room for one append of ``size`` bytes, first come first served."""
        if not self._room_waiters and self._has_room(size):
            self._pending_count += 1
            self._pending_bytes += size
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._room_waiters.append((size, future))
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled() and future.exception() is None:
                self._release(size)  # room was granted, then we were cancelled
            raise

    def _release(self, size: int) -> None:
        self._pending_count -= 1
        self._pending_bytes -= size
        invariant(self._pending_count >= 0 and self._pending_bytes >= 0, "room underflow")
        self._grant_room()

    def _grant_room(self) -> None:
        waiters = self._room_waiters
        while waiters:
            size, future = waiters[0]
            if future.done():  # cancelled while waiting
                waiters.popleft()
                continue
            if self._error is not None:
                waiters.popleft()
                future.set_exception(self._error)
                continue
            if not self._has_room(size):
                return
            waiters.popleft()
            self._pending_count += 1
            self._pending_bytes += size
            future.set_result(None)

    # --- reading --------------------------------------------------------------------
    async def read(self, start: Position, count_max: int) -> list[tuple[Position, bytes]]:
        """Up to ``count_max`` entries >= ``start``, in order, across ledgers, up to the
        last confirmed entry (fewer, or none, at the end of the log)."""
        if not 1 <= count_max <= limits.managed_ledger_read_entries_max:
            raise InvalidArgument(
                f"count_max must be 1..{limits.managed_ledger_read_entries_max}, got {count_max}"
            )
        self._check_readable()
        first = self._rank(start.predecessor())
        end = min(self._total(), first + count_max)
        plan = []  # (ledger id, first entry, last entry), decided before any await
        ordinal = first
        while ordinal < end:
            index = bisect.bisect_right(self._bases, ordinal) - 1
            base = self._bases[index]
            last = min(base + self._counts[index], end) - 1
            plan.append((self._ids[index], ordinal - base, last - base))
            ordinal = last + 1
        result: list[tuple[Position, bytes]] = []
        for ledger_id, first_entry, last_entry in plan:
            entries = await self._read_ledger(ledger_id, first_entry, last_entry)
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

    async def _read_ledger(self, ledger_id: int, first: int, last: int) -> list[Any]:
        writer = self._writer
        if writer is not None and writer.ledger_id == ledger_id:
            current = ReadHandle(self._bk, writer.metadata, writer.last_add_confirmed)
            return await current.read(first, last)
        cached = self._read_handles.get(ledger_id)
        if cached is not None:
            self._read_handles.move_to_end(ledger_id)
            try:
                return await cached.read(first, last)
            except (BookieUnavailable, NoSuchEntry) as error:
                # Auto-recovery may have moved the ledger's fragments: fresh metadata.
                log.info("ledger %d: read failed (%s); reopening", ledger_id, error)
                self._read_handles.pop(ledger_id, None)
        handle = await self._bk.open_ledger(ledger_id, recovery=False)
        self._read_handles[ledger_id] = handle
        while len(self._read_handles) > limits.managed_ledger_read_handles_cached_max:
            self._read_handles.popitem(last=False)
        return await handle.read(first, last)

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
            position = self._tail()
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
            await _delete_quietly(self._bk, [ledger_id])

    def cursor_changed(self, name: str) -> None:
        if self.cursor_listener is not None:
            self.cursor_listener(name)

    # --- the port a cursor persists through (cursor.CursorStorage) --------------------
    async def create_cursor_ledger(self, cursor_name: str) -> LedgerHandle:
        """A new ledger for ``cursor_name``'s states, tagged as the cursor's."""
        custom = {ROLE_KEY: "cursor", NAME_KEY: self.name, CURSOR_KEY: cursor_name}
        return await _create_ledger(self._bk, self.config, custom)

    async def open_cursor_ledger(self, ledger_id: int) -> ReadHandle:
        """A cursor's previous ledger, fenced and recovered (NoSuchLedger if gone)."""
        return await self._bk.open_ledger(ledger_id, recovery=True)

    async def delete_cursor_ledgers(self, ledger_ids: list[int]) -> None:
        """Delete a cursor's ledgers that nothing points at any more (quietly: one that
        stays is garbage the auditor may report, not lost data)."""
        await _delete_quietly(self._bk, ledger_ids)

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
            count = self._trimmable_count()
            if count == 0:
                return []
            deleted = self._ids[:count]
            self._info = await self._cas(self._ledgers[count:])
            self._ledgers = list(self._info.ledgers)
            self._rebuild_index()  # the current ledger keeps its live counts
        for ledger_id in deleted:
            self._read_handles.pop(ledger_id, None)
        await _delete_quietly(self._bk, deleted)
        self._stats["trimmed_ledgers"] += len(deleted)
        log.info("managed ledger %s: trimmed ledgers %s", self.name, deleted)
        return deleted

    def _trimmable_count(self) -> int:
        slowest = min((c.mark_delete_position for c in self.cursors.values()), default=None)
        now = self._clock()
        remaining_bytes = sum(self._sizes)
        count = 0
        for index in range(len(self._ids) - 1):  # never the last ledger
            entries = self._counts[index]
            if entries > 0:
                if slowest is not None and Position(self._ids[index], entries - 1) > slowest:
                    break  # a cursor still needs it
                if self._retained(self._ledgers[index], remaining_bytes, now):
                    break
            remaining_bytes -= self._sizes[index]
            count += 1
        return count

    def _retained(self, ledger: LedgerInfo, remaining_bytes: int, now: float) -> bool:
        """Whether retention keeps this acknowledged ledger (see ``config.py``);
        ``remaining_bytes`` counts it and every newer ledger."""
        config = self.config
        if not config.has_retention:
            return False
        closed_at = ledger.closed_at if ledger.closed_at is not None else ledger.created_at
        young = config.retention_s is None or now - closed_at < config.retention_s
        small = config.retention_bytes is None or remaining_bytes <= config.retention_bytes
        return young and small

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
        self._grant_room()
        self._notify_entries()
        for cursor in self.cursors.values():
            cursor.fence(self._error)
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
        self._grant_room()
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
        self._read_handles.clear()
        self._notify_entries()
        self._on_closed(self)

    def stats(self) -> dict[str, Any]:
        """Sizes, counters, and per cursor its positions and backlog."""
        return {
            "name": self.name,
            "state": self._state,
            "entries": self._total(),
            "bytes": sum(self._sizes),
            "ledgers": len(self._ids),
            "ledger_ids": list(self._ids),
            "current_ledger_id": self._writer.ledger_id if self._writer else None,
            "first_position": _text(self.first_position),
            "last_confirmed": _text(self._last_confirmed),
            "pending_appends": self._pending_count,
            "pending_append_bytes": self._pending_bytes,
            "appends": self._stats["appends"],
            "append_bytes": self._stats["append_bytes"],
            "reads": self._stats["reads"],
            "read_entries": self._stats["read_entries"],
            "rollovers": self._stats["rollovers"],
            "trimmed_ledgers": self._stats["trimmed_ledgers"],
            "cursors": {name: cursor.stats() for name, cursor in sorted(self.cursors.items())},
        }

    def __repr__(self) -> str:
        return f"ManagedLedger({self.name!r}, ledgers={self._ids}, last={self._last_confirmed})"


# --- helpers ---------------------------------------------------------------------------
def check_name(what: str, name: object, chars_max: int) -> str:
    if not isinstance(name, str) or not 0 < len(name) <= chars_max:
        raise InvalidArgument(f"{what} must be 1..{chars_max} characters, got {name!r}")
    return name


def _text(position: Position | None) -> str | None:
    return None if position is None else str(position)


def _next_in_ledger(position: Position) -> Position:
    if position.entry_id >= Position.LATEST.entry_id:
        return position
    return position.next_in_ledger()


async def _get_or_create(store: ManagedLedgerRepository, name: str) -> ManagedLedgerInfo:
    try:
        return await store.get_managed_ledger(name)
    except NoSuchManagedLedger:
        pass
    try:
        return await store.create_managed_ledger(name)
    except BadVersion:  # created meanwhile by a concurrent opener
        return await store.get_managed_ledger(name)


async def _end_last_ledger(
    bookkeeper: BookKeeper, info: ManagedLedgerInfo, clock: Clock
) -> tuple[list[LedgerInfo], list[int]]:
    """Steps 2-3 of opening: the list of ``info`` with its last ledger recovered (fenced
    and closed) and its end recorded, or dropped when empty; and the dropped ids."""
    ledgers = list(info.ledgers)
    if not ledgers:
        return ledgers, []
    last = ledgers[-1]
    metadata = await _recover(bookkeeper, last.ledger_id)
    if metadata is None or metadata.last_entry_id < 0:
        return ledgers[:-1], [last.ledger_id]
    ledgers[-1] = LedgerInfo(
        ledger_id=last.ledger_id,
        entries=metadata.last_entry_id + 1,
        size_bytes=metadata.length,
        created_at=last.created_at,
        closed_at=last.closed_at if last.closed_at is not None else clock(),
    )
    return ledgers, []


async def _recover(bookkeeper: BookKeeper, ledger_id: int) -> LedgerMetadata | None:
    """Fence and close ``ledger_id``; None when it no longer exists."""
    try:
        return await bookkeeper.recover_ledger(ledger_id)
    except NoSuchLedger:
        log.error("ledger %d is listed but does not exist; dropping it from the list", ledger_id)
        return None


async def _create_ledger(
    bookkeeper: BookKeeper, config: ManagedLedgerConfig, custom: dict[str, str]
) -> LedgerHandle:
    return await bookkeeper.create_ledger(
        ensemble_size=config.ensemble_size,
        write_quorum=config.write_quorum,
        ack_quorum=config.ack_quorum,
        custom=custom,
    )


async def _delete_quietly(bookkeeper: BookKeeper, ledger_ids: list[int]) -> None:
    """Delete ledgers nothing refers to any more; a failure only leaks them."""
    for ledger_id in ledger_ids:
        try:
            await bookkeeper.delete_ledger(ledger_id)
        except StorageError as error:
            log.warning("could not delete unreferenced ledger %d: %s", ledger_id, error)
