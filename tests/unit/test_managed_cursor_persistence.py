"""The managed cursor as the one owner of acknowledgement state, over an in-memory log
and cursor ledger: a change is in effect when the call returns (the change feed is told
then), ranges are taken as ranges, a burst costs few writes, and a failed write is
retried by the cursor (``limits.cursor_write_retries_max``) before its waiters get the
error; a fenced cursor gives up at once."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from georep import limits
from georep.domain.position import Position
from georep.storage.errors import BookieUnavailable, LedgerFenced, ManagedLedgerFenced
from georep.storage.managed_ledger.config import ManagedLedgerConfig
from georep.storage.managed_ledger.cursor import ManagedCursor
from georep.storage.meta.managed_ledgers import ManagedCursorInfo

P = Position


class FakeLedger:
    """A cursor ledger: ``add`` fails while the log's ``failures`` lasts."""

    def __init__(self, log: FakeLog, ledger_id: int) -> None:
        self.log = log
        self.ledger_id = ledger_id
        self.entries: list[bytes] = []

    async def add(self, data: bytes) -> None:
        await asyncio.sleep(0)
        if self.log.fenced:
            raise LedgerFenced(f"ledger {self.ledger_id}")
        if self.log.failures:
            self.log.failures -= 1
            raise BookieUnavailable("down")
        self.entries.append(data)
        self.log.writes += 1

    async def close(self) -> None:
        pass


class FakeLog:
    """Ledger 4 of ``count`` entries, and the storage port a cursor persists through."""

    name = "t"

    def __init__(self, count: int) -> None:
        self.count = count
        self.config = ManagedLedgerConfig()
        self.failures = 0
        self.fenced = False
        self.writes = 0
        self.changed: list[str] = []
        self._next_ledger_id = 100

    # --- the log's shape ---
    @property
    def last_confirmed(self) -> Position:
        return P(4, self.count - 1)

    @property
    def tail_position(self) -> Position:
        return P(4, self.count)

    def _rank(self, position: Position) -> int:
        if position.ledger_id < 4:
            return 0
        if position.ledger_id > 4:
            return self.count
        return min(max(position.entry_id + 1, 0), self.count)

    def next_position(self, position: Position) -> Position:
        rank = self._rank(position)
        return P(4, rank) if rank < self.count else max(self.tail_position, position)

    def position_at_or_after(self, position: Position) -> Position:
        return self.next_position(position.predecessor())

    def entries_after(self, position: Position | None) -> int:
        return self.count - (0 if position is None else self._rank(position))

    def entries_between(self, after: Position, before: Position) -> int:
        return max(0, self._rank(before.predecessor()) - self._rank(after))

    def entries_in(self, low: Position, high: Position) -> int:
        return max(0, self._rank(high) - self._rank(low.predecessor()))

    def is_entry(self, position: Position) -> bool:
        return self.entries_in(position, position) == 1

    async def read(self, start: Position, count_max: int) -> list[tuple[Position, bytes]]:
        return []

    def cursor_changed(self, name: str) -> None:
        self.changed.append(name)

    # --- the storage port ---
    async def create_cursor_ledger(self, cursor_name: str) -> FakeLedger:
        self._next_ledger_id += 1
        return FakeLedger(self, self._next_ledger_id)

    async def open_cursor_ledger(self, ledger_id: int) -> FakeLedger:
        raise AssertionError("not restored here")

    async def delete_cursor_ledgers(self, ledger_ids: list[int]) -> None:
        pass

    async def create_cursor_row(
        self, name: str, *, cursor_ledger_id: int, mark_delete: Position
    ) -> ManagedCursorInfo:
        return ManagedCursorInfo(self.name, name, cursor_ledger_id, mark_delete, {}, 0.0, 1)

    async def update_cursor_row(self, info: ManagedCursorInfo) -> ManagedCursorInfo:
        return dataclasses.replace(info, version=info.version + 1)


async def new_cursor(count: int = 10) -> tuple[FakeLog, ManagedCursor]:
    log = FakeLog(count)
    cursor = await ManagedCursor.create(log, "s", P(4, -1))  # type: ignore[arg-type]
    log.writes = 0
    return log, cursor


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "cursor_write_retry_s", 0.0)


async def test_a_change_is_in_effect_at_once_and_persisted_without_being_awaited() -> None:
    log, cursor = await new_cursor()
    cursor.delete_ranges([(P(4, 2), P(4, 3)), (P(4, 6), P(4, 7))])
    assert log.changed == ["s"]  # the change feed is told when the call returns
    assert cursor.is_acknowledged(P(4, 2)) and cursor.is_acknowledged(P(4, 7))
    assert not cursor.is_acknowledged(P(4, 4))
    assert cursor.individually_deleted.ranges() == [(P(4, 2), P(4, 3)), (P(4, 6), P(4, 7))]
    await cursor.flush()
    assert log.writes == 1 and cursor.stats()["persisted_mark_delete_position"] == "4:-1"


async def test_a_mark_delete_drops_the_ranges_and_batches_below_it() -> None:
    _, cursor = await new_cursor()
    cursor.delete_batch_members({P(4, 4): 0b10})
    cursor.delete_ranges([(P(4, 0), P(4, 1)), (P(4, 3), P(4, 3)), (P(4, 7), P(4, 8))])
    assert cursor.mark_delete_position == P(4, 1)  # the acknowledged prefix
    cursor.mark_delete(P(4, 5))
    assert cursor.individually_deleted.ranges() == [(P(4, 7), P(4, 8))]
    assert cursor.batches == []
    await cursor.flush()
    assert cursor.stats()["persisted_mark_delete_position"] == "4:5"


async def test_a_partial_batch_is_kept_until_its_last_member() -> None:
    _, cursor = await new_cursor()
    cursor.delete_batch_members({P(4, 5): 0b110})
    cursor.delete_batch_members({P(4, 5): 0b011})
    assert cursor.batch_bits(P(4, 5)) == 0b010 and not cursor.is_acknowledged(P(4, 5))
    cursor.delete_batch_members({P(4, 5): 0b101})
    assert cursor.batch_bits(P(4, 5)) is None and cursor.is_acknowledged(P(4, 5))


async def test_a_burst_costs_few_writes() -> None:
    log, cursor = await new_cursor(100)
    pending = [cursor.delete([P(4, e)]) for e in reversed(range(100))]
    await asyncio.gather(*pending)
    assert cursor.mark_delete_position == P(4, 99)
    assert log.writes <= 2


async def test_a_failed_write_is_retried_by_the_cursor() -> None:
    log, cursor = await new_cursor()
    log.failures = 3
    cursor.delete([P(4, 0)])  # nobody waits: the cursor persists it all the same
    for _ in range(100):
        await asyncio.sleep(0)
        if cursor.stats()["persists"]:
            break
    stats = cursor.stats()
    assert stats["persists"] == 1 and stats["persist_failures"] >= 2  # the ledger rolled
    assert stats["persisted_mark_delete_position"] == "4:0"


async def test_waiters_get_the_error_once_the_retries_are_spent() -> None:
    log, cursor = await new_cursor()
    log.failures = 10 * limits.cursor_write_retries_max
    with pytest.raises(BookieUnavailable):
        await cursor.delete([P(4, 0)])
    assert cursor.stats()["persist_failures"] == limits.cursor_write_retries_max
    log.failures = 0
    assert cursor.is_acknowledged(P(4, 0))  # still in effect; the next write carries it
    await cursor.delete([P(4, 1)])
    assert cursor.stats()["persisted_mark_delete_position"] == "4:1"


async def test_a_fenced_cursor_gives_up_at_once_and_refuses_more() -> None:
    log, cursor = await new_cursor()
    log.fenced = True
    with pytest.raises(ManagedLedgerFenced):
        await cursor.delete([P(4, 0)])
    assert cursor.stats()["persist_failures"] == 1
    with pytest.raises(ManagedLedgerFenced):
        cursor.delete([P(4, 1)])  # refused before anything changes
    assert not cursor.is_acknowledged(P(4, 1))


async def test_close_persists_what_is_pending() -> None:
    log, cursor = await new_cursor()
    cursor.mark_delete(P(4, 3))
    await cursor.close()
    assert log.writes == 1 and cursor.stats()["persisted_mark_delete_position"] == "4:3"
