"""A cursor: one subscription's acknowledgements and read position on a managed ledger.

State: the mark-delete position (MDP; everything <= it is acknowledged), the
individually deleted ranges above it, the partially acknowledged batch entries (entry ->
bits of its members still unacknowledged), and string properties (see ``ack_state.py``).
``read_position`` is where dispatch reads next; it is not persisted: a restored cursor
reads again from just after its MDP, skipping acknowledged ranges.

Persistence: every persisted state is one entry of a ledger of the cursor's own
(``cursor_ledger.py``: why a ledger, how a new owner fences the old one, rollover).

Durability: ``mark_delete``, ``delete``, ``delete_ranges``, ``delete_batch_members``,
``reset`` and ``set_properties`` change the state in memory at once (dispatch, the
change feed and every reader of the cursor see the change when the call returns) and
hand back a :class:`PendingChange`: awaited, it returns only when a persisted state
that includes the change is durable; ignored, the cursor persists the change on its
own. Changes are numbered; one write at a time carries the newest state and releases
every waiter whose change it includes, so a burst of acknowledgements costs one write
per round trip, not one each (``cursor_persist_interval_ms`` can wait to gather more).
A failed write is tried again, every ``limits.cursor_write_retry_s``, up to
``limits.cursor_write_retries_max`` attempts (the ledger rolls over on the way); then
it is given up and its waiters get the error: the change stays in memory, the next
write carries it, and a crash before that delivers its entries again (at-least-once:
nothing unacknowledged is lost). A fenced or closed cursor gives up at once. After
kill -9 the cursor is restored exactly as last persisted, so every change whose
awaiting returned is there.

The bound: each persisted state holds the lowest ``cursor_ranges_persisted_max`` ranges
(config, at most ``limits.cursor_ranges_persisted_max``). Acknowledgements in ranges
above those are kept in memory only: they return, dispatch skips them, but a crash
forgets them and they are delivered again (at-least-once, as in Pulsar). ``stats()``
counts them as ``ranges_unpersisted``. In memory a cursor keeps at most
``limits.cursor_ranges_count_max`` ranges; past that the highest range is forgotten at
once (also redelivered). Likewise each persisted state holds the lowest
``cursor_batch_entries_persisted_max`` partially acknowledged batch entries (config, at
most the limit of that name) within ``limits.cursor_batch_bytes_persisted_max`` bytes;
the partial acknowledgements of higher entries are in memory only, and after a crash
those batches are delivered whole again (``batch_entries_unpersisted``). In memory at
most ``limits.cursor_batch_entries_count_max`` entries are kept; a partial
acknowledgement of one more is dropped (``batch_entries_dropped``). Nothing
unacknowledged is ever treated as acknowledged.
"""

from __future__ import annotations

import asyncio
import logging
import types
from collections.abc import Generator, Iterable, Mapping
from typing import Any, Literal, Protocol

from georep import limits
from georep.domain.position import Position
from georep.invariant import present
from georep.runtime.cause_log import CauseLog
from georep.storage.errors import (
    InvalidArgument,
    ManagedLedgerClosed,
    ManagedLedgerError,
    ManagedLedgerFenced,
    NoSuchCursor,
    StorageError,
)
from georep.storage.managed_ledger import cursor_state
from georep.storage.managed_ledger.ack_state import AckState, LogShape
from georep.storage.managed_ledger.config import ManagedLedgerConfig
from georep.storage.managed_ledger.cursor_ledger import CursorLedger, CursorStorage
from georep.storage.managed_ledger.cursor_state import CursorState
from georep.storage.managed_ledger.range_set import RangeSet
from georep.storage.meta.managed_ledgers import ManagedCursorInfo

log = logging.getLogger(__name__)
_failures = CauseLog(log)  # persist failures: one line per cause, not one per cursor


class CursorLog(CursorStorage, LogShape, Protocol):
    """The managed ledger as its cursors see it: where its entries lie, its entries, its
    settings, the change feed and the storage port. ``ManagedLedger`` implements it and
    owns its cursors; naming only this, ``cursor.py`` never imports ``managed_ledger.py``,
    so the two depend one way (the log on its cursors)."""

    @property
    def config(self) -> ManagedLedgerConfig: ...

    @property
    def last_confirmed(self) -> Position | None: ...

    @property
    def tail_position(self) -> Position: ...

    def next_position(self, position: Position) -> Position: ...

    def position_at_or_after(self, position: Position) -> Position: ...

    def entries_after(self, position: Position | None) -> int: ...

    def entries_in(self, low: Position, high: Position) -> int: ...

    def is_entry(self, position: Position) -> bool: ...

    async def read(self, start: Position, count_max: int) -> list[tuple[Position, bytes]]: ...

    def cursor_changed(self, name: str) -> None: ...


#: Write errors a retry cannot cure: the cursor is closed, fenced or gone, or its state
#: cannot be written.
_PERMANENT = (ManagedLedgerClosed, ManagedLedgerFenced, NoSuchCursor, InvalidArgument)


class PendingChange:
    """One change of a cursor's state, in effect in memory, on its way to a persisted
    state. ``await`` it to return once a durable state holds it (raising the error of
    the write that gave up, or of the cursor's fencing or closing); leave it, and the
    cursor persists it all the same. Example: ``cursor.delete([p])`` alone acknowledges
    ``p`` now (dispatch skips it); ``await cursor.delete([p])`` also waits until a crash
    can no longer forget it."""

    __slots__ = ("_cursor", "_generation")

    def __init__(self, cursor: ManagedCursor, generation: int) -> None:
        self._cursor = cursor
        self._generation = generation

    def __await__(self) -> Generator[Any, None, None]:
        return self._cursor._wait_durable(self._generation).__await__()


class ManagedCursor:
    """Create with :meth:`ManagedLedger.open_cursor`, not directly."""

    def __init__(
        self,
        managed_ledger: CursorLog,
        name: str,
        state: CursorState,
        ledger: CursorLedger | None,
    ) -> None:
        self.name = name
        self._ml = managed_ledger
        self._acks = AckState(state.mark_delete, RangeSet.of(list(state.ranges)), state.batches)
        self._properties: dict[str, str] = dict(state.properties)
        self.read_position = managed_ledger.next_position(state.mark_delete)
        #: Where its states are written (None: held in memory only).
        self._ledger = ledger
        self._generation = 0  # numbers every change of the state
        self._durable_generation = 0  # the newest change a durable state includes
        #: the newest change persisted or given up: the loop has nothing older to write
        self._settled_generation = 0
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._persist_task: asyncio.Task[None] | None = None
        self._read_lock = asyncio.Lock()
        self._state: Literal["open", "fenced", "closed"] = "open"
        self._error: ManagedLedgerError | None = None
        self._persisted = state
        self._stats = {"persists": 0, "persist_failures": 0}
        #: False for a reader's cursor held in memory only (:meth:`non_durable`).
        self.durable = True

    # --- creating and restoring -----------------------------------------------------
    @classmethod
    async def create(
        cls, managed_ledger: CursorLog, name: str, mark_delete: Position
    ) -> ManagedCursor:
        """A new cursor at ``mark_delete``, durable when this returns."""
        state = CursorState(mark_delete)
        ledger = await CursorLedger.create(managed_ledger, name, state)
        log.info(
            "managed ledger %s: cursor %r created at %s", managed_ledger.name, name, mark_delete
        )
        return cls(managed_ledger, name, state, ledger)

    @classmethod
    def non_durable(
        cls, managed_ledger: CursorLog, name: str, mark_delete: Position
    ) -> ManagedCursor:
        """A cursor held in memory only (a reader's, as Pulsar's non-durable cursors):
        no ledger, no row; every change is "durable" at once and gone with the process.
        A reader needs nothing persisted, and a gateway's thousands of sync readers
        would otherwise cost a ledger and a metadata row each, created and deleted."""
        cursor = cls(managed_ledger, name, CursorState(mark_delete), None)
        cursor.durable = False
        return cursor

    @classmethod
    async def recover(cls, managed_ledger: CursorLog, info: ManagedCursorInfo) -> ManagedCursor:
        """Restore the cursor of ``info`` as last persisted, fencing its previous owner
        (``cursor_ledger.py``)."""
        ledger, state = await CursorLedger.recover(managed_ledger, info)
        return cls(managed_ledger, info.name, state, ledger)

    # --- acknowledgement state ------------------------------------------------------
    @property
    def mark_delete_position(self) -> Position:
        return self._acks.mark_delete_position

    @property
    def individually_deleted(self) -> RangeSet:
        """The acknowledged ranges above the MDP. Read it; change it only through the
        methods, which persist."""
        return self._acks.individually_deleted

    @property
    def properties(self) -> Mapping[str, str]:
        """A read-only view; change with :meth:`set_properties` or ``mark_delete(...,
        properties=...)``, which persist."""
        return types.MappingProxyType(self._properties)

    def is_acknowledged(self, position: Position) -> bool:
        return self._acks.is_acknowledged(position)

    def batch_bits(self, position: Position) -> int | None:
        """Bits of the members of the batch at ``position`` still unacknowledged (member
        i is bit i), or None when none of its members is acknowledged on its own."""
        return self._acks.batch_bits(position)

    @property
    def batches(self) -> list[tuple[Position, int]]:
        """Every partially acknowledged entry with its bits (as :meth:`batch_bits`),
        lowest first."""
        return self._acks.batches()

    @property
    def backlog(self) -> int:
        """Entries after the MDP not individually deleted."""
        acknowledged = sum(
            self._ml.entries_in(low, high) for low, high in self.individually_deleted
        )
        return self._ml.entries_after(self.mark_delete_position) - acknowledged

    def mark_delete(
        self, position: Position, *, properties: Mapping[str, str] | None = None
    ) -> PendingChange:
        """Acknowledge everything <= ``position`` (no-op for an older one: the MDP never
        moves back); with ``properties``, replace the properties in the same persisted
        state. In effect at once; durable once awaited."""
        self._check_open()
        self._check_in_log(position)
        if properties is not None:  # InvalidArgument before anything changes
            cursor_state.encode_properties(properties)
        changed = self._acks.mark_delete(position, self._ml)
        if properties is not None:
            self._properties = dict(properties)
            changed = True
        if changed:
            self._changed()
        return self._pending()

    def delete(self, positions: Iterable[Position]) -> PendingChange:
        """Acknowledge each position individually; the MDP advances over the
        acknowledged prefix. Every position above the MDP must be an entry of the log
        (InvalidArgument, nothing applied, otherwise). In effect at once; durable once awaited."""
        self._check_open()
        positions = list(positions)
        for position in positions:
            if not isinstance(position, Position):
                raise InvalidArgument(f"not a Position: {position!r}")
            if position > self.mark_delete_position and not self._ml.is_entry(position):
                raise InvalidArgument(f"{position} is not an entry of {self._ml.name}")
        if self._acks.acknowledge(positions, self._ml):
            self._changed()
        return self._pending()

    def delete_ranges(self, ranges: Iterable[tuple[Position, Position]]) -> PendingChange:
        """Acknowledge every entry inside each closed range ``(low, high)`` (a range may
        span ledgers; its ends need not be entries), however many entries it holds, at
        the cost of one range each. ``high`` must lie before the next append (the tail):
        a range must never cover entries still to come (InvalidArgument, nothing
        applied, otherwise). The MDP advances over the acknowledged prefix. In effect at
        once; durable once awaited."""
        self._check_open()
        ranges = list(ranges)
        for low, high in ranges:
            if not (isinstance(low, Position) and isinstance(high, Position)):
                raise InvalidArgument(f"not a range of Positions: ({low!r}, {high!r})")
            if not (low.is_entry_id and high.is_entry_id and low <= high):
                raise InvalidArgument(f"bad range [{low}, {high}]")
            self._check_in_log(high)
        changed = False
        for low, high in ranges:
            changed = self._acks.acknowledge_range(low, high, self._ml) or changed
        if changed:
            self._changed()
        return self._pending()

    def delete_batch_members(self, acks: Mapping[Position, int]) -> PendingChange:
        """Acknowledge members of batch entries: ``acks`` maps an entry to the bits of
        its members still unacknowledged as the acknowledger sees them (a client's
        ``ack_set``); they are ANDed with what is known, and an entry with no bit left
        is deleted whole. Entries must be entries of the log (InvalidArgument, nothing
        applied, otherwise); acknowledged ones are ignored. In effect at once; durable once
        awaited."""
        self._check_open()
        acks = dict(acks)
        for position, bits in acks.items():
            if not isinstance(position, Position):
                raise InvalidArgument(f"not a Position: {position!r}")
            if not isinstance(bits, int) or isinstance(bits, bool) or bits < 0:
                raise InvalidArgument(f"batch bits of {position} must be an int >= 0: {bits!r}")
            if position > self.mark_delete_position and not self._ml.is_entry(position):
                raise InvalidArgument(f"{position} is not an entry of {self._ml.name}")
        changed = False
        for position, bits in sorted(acks.items()):
            changed = self._acks.acknowledge_members(position, bits, self._ml) or changed
        if changed:
            self._changed()
        return self._pending()

    def reset(self, position: Position) -> PendingChange:
        """Admin reset: acknowledged = everything before ``position`` (clamped to the
        log), ranges cleared, read from ``position``. May move the MDP back. In
        effect at once; durable once awaited."""
        self._check_open()
        if not isinstance(position, Position):
            raise InvalidArgument(f"not a Position: {position!r}")
        start = self._ml.position_at_or_after(position)
        self._acks.reset(start)
        self.read_position = start
        self._changed()
        return self._pending()

    def set_properties(self, properties: Mapping[str, str]) -> PendingChange:
        """Replace the properties; in effect at once, durable once awaited."""
        self._check_open()
        cursor_state.encode_properties(properties)  # InvalidArgument before any change
        self._properties = dict(properties)
        self._changed()
        return self._pending()

    def _check_in_log(self, position: Position) -> None:
        if not isinstance(position, Position):
            raise InvalidArgument(f"not a Position: {position!r}")
        if position >= self._ml.tail_position:
            raise InvalidArgument(
                f"{position} is past the last entry of {self._ml.name} ({self._ml.last_confirmed})"
            )

    def _changed(self) -> None:
        self._generation += 1
        if self.durable:
            self._start_persisting()
        else:  # nothing to write: "durable" at once
            self._durable_generation = self._settled_generation = self._generation
        self._ml.cursor_changed(self.name)
        next_unread = self._ml.next_position(self.mark_delete_position)
        if self.read_position < next_unread:
            self.read_position = next_unread

    # --- reading --------------------------------------------------------------------
    async def read_entries(self, count_max: int) -> list[tuple[Position, bytes]]:
        """Up to ``count_max`` unacknowledged entries from ``read_position`` on, in
        order, skipping acknowledged ones; advances ``read_position`` past what it
        returns. Empty when caught up (see ``ManagedLedger.wait_for_entries_after``)."""
        if not 1 <= count_max <= limits.managed_ledger_read_entries_max:
            raise InvalidArgument(
                f"count_max must be 1..{limits.managed_ledger_read_entries_max}, got {count_max}"
            )
        async with self._read_lock:
            self._check_open()
            result: list[tuple[Position, bytes]] = []
            while len(result) < count_max:
                start = self._skip_acknowledged(self.read_position)
                self.read_position = start
                wanted = count_max - len(result)
                entries = await self._ml.read(start, wanted)
                if not entries:
                    break
                result += [(p, data) for p, data in entries if not self.is_acknowledged(p)]
                self.read_position = max(self.read_position, self._ml.next_position(entries[-1][0]))
                if len(entries) < wanted:
                    break  # the end of the log
            return result

    def _skip_acknowledged(self, position: Position) -> Position:
        ml = self._ml
        position = max(position, ml.next_position(self.mark_delete_position))
        while (covering := self.individually_deleted.range_of(position)) is not None:
            position = ml.next_position(covering[1])
        return position

    def rewind(self) -> None:
        """Read again from the first unacknowledged entry (redelivery)."""
        self.read_position = self._ml.next_position(self.mark_delete_position)

    def seek(self, position: Position) -> None:
        """Read next from ``position`` (never before the first unacknowledged entry)."""
        if not isinstance(position, Position):
            raise InvalidArgument(f"not a Position: {position!r}")
        self.read_position = max(position, self._ml.next_position(self.mark_delete_position))

    # --- persisting -----------------------------------------------------------------
    def _pending(self) -> PendingChange:
        """The change just made (or none: then the newest before it), to be awaited."""
        return PendingChange(self, self._generation)

    async def flush(self) -> None:
        """Return once every change made so far is durable; raises as awaiting the
        newest :class:`PendingChange` would."""
        await self._wait_durable(self._generation)

    async def _wait_durable(self, generation: int) -> None:
        if generation <= self._durable_generation:
            return
        self._check_open()
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((generation, future))
        self._start_persisting()
        await future

    def _start_persisting(self) -> None:
        if self._persist_task is None and self._state == "open":
            self._persist_task = asyncio.get_running_loop().create_task(self._persist_loop())

    async def _persist_loop(self) -> None:
        """Write the newest state while a change is neither persisted nor given up, or
        someone waits; each write is tried up to ``limits.cursor_write_retries_max``
        times (see the module docstring)."""
        interval_s = self._ml.config.cursor_persist_interval_ms / 1000
        attempts = 0
        try:
            while self._state == "open" and (
                self._waiters or self._generation > self._settled_generation
            ):
                if interval_s > 0:
                    await asyncio.sleep(interval_s)
                generation = self._generation
                state = self._snapshot()
                try:
                    await self._write(state)
                except StorageError as error:
                    self._stats["persist_failures"] += 1
                    attempts += 1
                    if self._retries(error, attempts):
                        await asyncio.sleep(limits.cursor_write_retry_s)
                        continue
                    attempts = 0
                    self._settled_generation = max(self._settled_generation, generation)
                    self._release_waiters(generation, error)
                    continue
                attempts = 0
                self._durable_generation = generation
                self._settled_generation = max(self._settled_generation, generation)
                self._persisted = state
                self._stats["persists"] += 1
                self._release_waiters(generation, None)
        finally:
            self._persist_task = None
            if self._waiters and self._state != "open":
                self._release_waiters(self._generation, self._error)

    def _retries(self, error: StorageError, attempts: int) -> bool:
        """Whether the failed write is tried again (said once per cause and window:
        when the bookies go, every cursor fails alike)."""
        cause = type(error).__name__
        subject = f"cursor {self.name!r}"
        if self._state != "open" or isinstance(error, _PERMANENT):
            _failures.say(
                logging.WARNING, ("not persisted", cause), subject,
                "state not persisted: %s", error,
            )  # fmt: skip
            return False
        if attempts < limits.cursor_write_retries_max:
            _failures.say(
                logging.WARNING, ("retrying", cause), subject,
                "persisting its state failed, retrying every %g s up to %d attempts: %s",
                limits.cursor_write_retry_s, limits.cursor_write_retries_max, error,
            )  # fmt: skip
            return True
        _failures.say(
            logging.ERROR, ("gave up", cause), subject,
            "gave up persisting its state after %d attempts (%s); what it holds beyond"
            " the last persisted state is delivered again after a restart",
            attempts, error,
        )  # fmt: skip
        return False

    def _release_waiters(self, generation: int, error: BaseException | None) -> None:
        waiting = []
        for waiter_generation, future in self._waiters:
            if waiter_generation > generation:
                waiting.append((waiter_generation, future))
            elif not future.done():
                if error is None:
                    future.set_result(None)
                else:
                    future.set_exception(error)
        self._waiters = waiting

    def _snapshot(self) -> CursorState:
        config = self._ml.config
        return CursorState(
            self.mark_delete_position,
            tuple(self.individually_deleted.ranges(config.cursor_ranges_persisted_max)),
            dict(self._properties),
            tuple(self._persisted_batches()),
        )

    def _persisted_batches(self) -> list[tuple[Position, int]]:
        """The lowest batch entries one persisted state holds (count and bytes bounds)."""
        count_max = self._ml.config.cursor_batch_entries_persisted_max
        room = limits.cursor_batch_bytes_persisted_max
        chosen: list[tuple[Position, int]] = []
        for position, bits in self._acks.batches():
            size = cursor_state.batch_bytes(bits)
            if len(chosen) >= count_max or size > room:
                break
            room -= size
            chosen.append((position, bits))
        return chosen

    async def _write(self, state: CursorState) -> None:
        ledger = present(self._ledger, "a durable cursor has its ledger")
        try:
            await ledger.write(state, self._ml.config)
        except ManagedLedgerFenced as error:
            self.fence(error)
            raise present(self._error, "a fenced cursor holds its error") from None

    # --- state, closing -------------------------------------------------------------
    def _check_open(self) -> None:
        if self._error is not None:
            raise self._error

    def fence(self, error: ManagedLedgerError) -> None:
        """Another owner has this cursor: fail what waits, refuse what comes."""
        if self._state != "open":
            return
        self._state = "fenced"
        self._error = error
        self._release_waiters(self._generation, error)

    async def close(self, *, flush: bool = True) -> int | None:
        """Persist what is pending (with ``flush``), close the cursor's ledger; returns
        its id. Idempotent."""
        if self._state == "open" and flush and self._generation > self._durable_generation:
            try:
                await self.flush()
            except StorageError as error:
                _failures.say(
                    logging.WARNING, ("close", type(error).__name__), f"cursor {self.name!r}",
                    "last persist before close failed: %s", error,
                )  # fmt: skip
        if self._state == "open":
            self._error = ManagedLedgerClosed(f"cursor {self.name!r} is closed")
        self._state = "closed" if self._state == "open" else self._state
        self._release_waiters(self._generation, self._error or ManagedLedgerClosed(self.name))
        if self._persist_task is not None:
            await asyncio.gather(self._persist_task, return_exceptions=True)
        if self._ledger is None:
            return None
        return await self._ledger.close()

    def stats(self) -> dict[str, Any]:
        ranges = len(self.individually_deleted)
        persisted_max = self._ml.config.cursor_ranges_persisted_max
        batches_persisted = len(self._persisted_batches())
        return {
            "state": self._state,
            "mark_delete_position": str(self.mark_delete_position),
            "read_position": str(self.read_position),
            "backlog": self.backlog,
            "individually_deleted_ranges": ranges,
            "ranges_persisted": min(ranges, persisted_max),
            "ranges_unpersisted": max(0, ranges - persisted_max),
            "ranges_dropped": self.individually_deleted.dropped_ranges,
            "batch_entries": self._acks.batch_entries,
            "batch_entries_persisted": batches_persisted,
            "batch_entries_unpersisted": self._acks.batch_entries - batches_persisted,
            "batch_entries_dropped": self._acks.batch_entries_dropped,
            "persisted_mark_delete_position": str(self._persisted.mark_delete),
            "cursor_ledger_id": self._ledger.ledger_id if self._ledger else None,
            **self._stats,
            "ledger_switches": self._ledger.switches if self._ledger else 0,
        }

    def __repr__(self) -> str:
        return (
            f"ManagedCursor({self.name!r}, mdp={self.mark_delete_position}, "
            f"ranges={len(self.individually_deleted)}, read={self.read_position})"
        )
