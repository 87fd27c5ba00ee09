"""Managed ledgers on real bookie processes: appends and reads across rollovers, a second
owner fencing the first without interleaving, trimming by cursors and retention, and the
factory (docs/ARCHITECTURE.md, "Managed ledger")."""

from __future__ import annotations

import asyncio
import itertools
from typing import cast

import pytest

from georep import limits
from georep.storage.errors import (
    InvalidArgument,
    ManagedLedgerClosed,
    ManagedLedgerFenced,
    NoSuchEntry,
    NoSuchLedger,
    NoSuchManagedLedger,
    StorageError,
)
from georep.storage.managed_ledger import ManagedLedgerConfig, ManagedLedgerFactory, Position
from georep.storage.managed_ledger.entry_cache import EntryCache
from georep.storage.meta.managed_ledgers import ManagedLedgerRepository
from tests.conftest import ManualClock

pytestmark = pytest.mark.slow

SMALL = ManagedLedgerConfig(rollover_entries_max=5)


@pytest.fixture
async def factories(cluster_factory):
    """``make(cluster, clock=None)``: a factory on its own BookKeeper client; all are
    closed before the clusters stop."""
    made: list[ManagedLedgerFactory] = []

    def make(cluster, clock=None) -> ManagedLedgerFactory:
        options = {} if clock is None else {"clock": clock}
        factory = ManagedLedgerFactory(cluster.client(), cluster.store.managed_ledgers, **options)
        made.append(factory)
        return factory

    yield make
    for factory in made:
        await factory.close()


async def append_all(ml, payloads):
    futures = [await ml.append_async(p) for p in payloads]
    return await asyncio.gather(*futures)


def payloads(count, prefix="m"):
    return [f"{prefix}{i}".encode() for i in range(count)]


async def test_appends_and_reads_across_rollovers(cluster_factory, factories):
    cluster = await cluster_factory(3)
    ml = await factories(cluster).open("t/rollover", SMALL)
    assert ml.last_confirmed is None and ml.first_position is None
    assert await ml.read(Position.EARLIEST, 10) == []

    one = await ml.append(b"first")
    rest = await append_all(ml, payloads(21))  # all at once: queued through rollovers
    positions = [one, *rest]
    assert positions == sorted(positions) and len(set(positions)) == 22
    ledgers = sorted({p.ledger_id for p in positions})
    assert len(ledgers) == 5  # 5 entries per ledger: 5 + 5 + 5 + 5 + 2
    assert all(sum(p.ledger_id == lid for p in positions) <= 5 for lid in ledgers)
    assert ml.last_confirmed == positions[-1] and ml.first_position == positions[0]

    expected = list(zip(positions, [b"first", *payloads(21)], strict=True))
    assert await ml.read(Position.EARLIEST, 100) == expected
    assert await ml.read(positions[3], 9) == expected[3:12]  # crosses two boundaries
    # a start between ledgers or past an end continues at the next entry
    assert (await ml.read(Position(positions[4].ledger_id, 99), 1))[0][0] == positions[5]
    assert await ml.read(ml.next_position(positions[-1]), 10) == []
    for before, after in itertools.pairwise(positions):
        assert ml.next_position(before) == after
    assert ml.entries_after(None) == 22 and ml.entries_after(positions[9]) == 12
    assert ml.entries_between(positions[2], positions[7]) == 4
    assert await ml.read_entry(positions[6]) == b"m5"
    with pytest.raises(NoSuchEntry):
        await ml.read_entry(Position(positions[4].ledger_id, 5))
    with pytest.raises(InvalidArgument):
        await ml.read(Position.EARLIEST, limits.managed_ledger_read_entries_max + 1)

    stats = ml.stats()
    assert (stats["entries"], stats["bytes"], stats["ledgers"]) == (22, 58, 5)
    assert stats["rollovers"] == 4 and stats["pending_appends"] == 0

    # closed and reopened by a new owner: the same log, a fresh ledger at its end
    await ml.close()
    with pytest.raises(ManagedLedgerClosed):
        await ml.append(b"late")
    again = await factories(cluster).open("t/rollover", SMALL)
    assert await again.read(Position.EARLIEST, 100) == expected
    assert again.last_confirmed == positions[-1]
    appended = await again.append(b"after reopen")
    assert appended.ledger_id > positions[-1].ledger_id and appended.entry_id == 0


async def test_reads_at_the_tail_come_from_memory_older_ones_from_the_bookies(
    cluster_factory, factories
):
    """The entry cache (storage/managed_ledger/entry_cache.py) keeps the 3 entries
    confirmed last: with every bookie killed they are still read, across a ledger
    boundary, and an older one is not (it was never served from memory)."""
    cluster = await cluster_factory(3)
    factory = factories(cluster)
    factory.cache = EntryCache(bytes_max=1_000, entries_max=3)
    ml = await factory.open("t/cache", SMALL)
    positions = await append_all(ml, payloads(12))  # ledgers of 5, 5 and 2 entries
    expected = list(zip(positions, payloads(12), strict=True))
    assert await ml.read(positions[0], 12) == expected  # ledgers 1-2 from the bookies
    assert factory.cache.snapshot()["hit_reads"] == 1  # the last ledger whole
    for address in list(cluster.bookies):
        await cluster.kill(address)
    assert await ml.read(positions[9], 10) == expected[9:]
    with pytest.raises(StorageError):
        await ml.read(positions[8], 1)


async def test_rollover_by_bytes_and_by_age(cluster_factory, factories):
    cluster = await cluster_factory(3)
    clock = ManualClock()
    factory = factories(cluster, clock)
    by_bytes = await factory.open("t/bytes", ManagedLedgerConfig(rollover_bytes_max=10))
    positions = await append_all(by_bytes, [b"x" * 4] * 6)  # 3 entries fill 12 bytes
    assert [p.entry_id for p in positions] == [0, 1, 2, 0, 1, 2]

    by_age = await factory.open("t/age", ManagedLedgerConfig(rollover_age_s_max=60))
    first = await by_age.append(b"a")
    clock.advance(59)
    assert (await by_age.append(b"b")).ledger_id == first.ledger_id
    clock.advance(1)
    third = await by_age.append(b"c")  # the ledger turned 60 s old: a new one
    assert third.ledger_id > first.ledger_id and third.entry_id == 0
    # an idle log rolls over on trim, so its old data can go
    clock.advance(60)
    assert await by_age.trim() == [first.ledger_id, third.ledger_id]
    assert by_age.stats()["entries"] == 0 and by_age.last_confirmed == third


async def test_second_opener_fences_the_first_without_interleaving(cluster_factory, factories):
    cluster = await cluster_factory(3)
    first = await factories(cluster).open("t/owner", SMALL)
    confirmed_a = await append_all(first, payloads(7, "a"))
    cursor_a = await first.open_cursor("sub", start="earliest")
    in_flight = [await first.append_async(p) for p in payloads(20, "late-a")]

    second = await factories(cluster).open("t/owner", SMALL)  # takes the log over
    results = await asyncio.gather(*in_flight, return_exceptions=True)
    late_confirmed = [r for r in results if isinstance(r, Position)]
    assert all(isinstance(r, ManagedLedgerFenced) for r in results if r not in late_confirmed)
    # the fenced owner can append, ack and roll over no more
    with pytest.raises(ManagedLedgerFenced):
        await first.append(b"after the takeover")
    with pytest.raises(ManagedLedgerFenced):
        await cursor_a.mark_delete(confirmed_a[0])
    assert first.is_fenced

    confirmed_b = await append_all(second, payloads(8, "b"))
    log = await second.read(Position.EARLIEST, 100)
    positions = [p for p, _ in log]
    assert positions == sorted(positions)
    # every entry either owner was told is durable is there, in order; all of A's
    # entries come before B's (A's unconfirmed adds may or may not have survived)
    assert set(confirmed_a + late_confirmed + confirmed_b) <= set(positions)
    owners = [1 if data.startswith(b"b") else 0 for _, data in log]
    assert owners == sorted(owners)
    a_payloads = [data for _, data in log if not data.startswith(b"b")]
    assert a_payloads[:7] == payloads(7, "a")
    assert a_payloads[7:] == payloads(len(a_payloads) - 7, "late-a")
    assert [data for _, data in log if data.startswith(b"b")] == payloads(8, "b")
    assert min(p.ledger_id for p in confirmed_b) > max(
        p.ledger_id for p in late_confirmed + confirmed_a
    )
    # the cursor moved to the new owner as it was persisted
    assert second.cursors["sub"].mark_delete_position == Position(confirmed_a[0].ledger_id, -1)

    # an idle owner learns of a takeover from its next add (its ledger is fenced)
    third = await factories(cluster).open("t/owner", SMALL)
    with pytest.raises(ManagedLedgerFenced):
        await second.append(b"b-too-late")
    assert second.is_fenced
    assert await third.read(Position.EARLIEST, 100) == log


class StoreRacingTheOwner:
    """The managed-ledger repository, except that its first read of a row returns
    only after ``race()`` ran: what the previous owner does between a new opener's read
    and its compare-and-set."""

    def __init__(self, store, race) -> None:
        self._store = store
        self._race = race

    def __getattr__(self, name):
        return getattr(self._store, name)

    async def get_managed_ledger(self, name):
        info = await self._store.get_managed_ledger(name)
        race, self._race = self._race, None
        if race is not None:
            await race()
        return info


async def test_opener_fences_a_ledger_the_owner_rolled_over_to_meanwhile(
    cluster_factory, factories
):
    """The previous owner rolls over after the new opener read the list: the opener's
    CAS fails, it reads the list again and fences the new ledger too."""
    cluster = await cluster_factory(3)
    first = await factories(cluster).open("t/rolling", SMALL)
    confirmed = await append_all(first, payloads(5, "a"))  # the ledger is full

    async def roll_over() -> None:
        confirmed.append(await first.append(b"rolled"))  # onto a new ledger, CAS'd

    racing = StoreRacingTheOwner(cluster.store.managed_ledgers, roll_over)
    second = await ManagedLedgerFactory(
        cluster.client(), cast(ManagedLedgerRepository, racing)
    ).open("t/rolling", SMALL)
    try:
        assert confirmed[-1].ledger_id > confirmed[0].ledger_id
        with pytest.raises(ManagedLedgerFenced):
            await first.append(b"after the takeover")
        later = await append_all(second, payloads(3, "b"))
        assert later[0].ledger_id > confirmed[-1].ledger_id
        log = await second.read(Position.EARLIEST, 100)
        assert [p for p, _ in log] == confirmed + later
        assert [data for _, data in log] == [*payloads(5, "a"), b"rolled", *payloads(3, "b")]
    finally:
        await second.close()


async def test_concurrent_openers_leave_one_owner(cluster_factory, factories):
    cluster = await cluster_factory(3)
    opened = await asyncio.gather(
        *(factories(cluster).open("t/race", SMALL) for _ in range(3)), return_exceptions=True
    )
    instances = [o for o in opened if not isinstance(o, BaseException)]
    assert instances and all(
        isinstance(o, ManagedLedgerFenced) for o in opened if o not in instances
    )
    outcomes = await asyncio.gather(*(ml.append(b"x") for ml in instances), return_exceptions=True)
    assert sum(isinstance(o, Position) for o in outcomes) == 1, outcomes


async def test_trim_keeps_what_cursors_need_and_never_the_current_ledger(
    cluster_factory, factories
):
    cluster = await cluster_factory(3)
    ml = await factories(cluster).open("t/trim", SMALL)
    slow = await ml.open_cursor("slow", start="earliest")
    fast = await ml.open_cursor("fast", start="earliest")
    positions = await append_all(ml, payloads(17))  # ledgers of 5, 5, 5, 2
    ledger_ids = sorted({p.ledger_id for p in positions})

    assert await ml.trim() == []  # nothing acknowledged
    await fast.mark_delete(positions[-1])
    await slow.mark_delete(positions[7])  # inside the second ledger
    assert await ml.trim() == ledger_ids[:1]
    with pytest.raises(NoSuchLedger):
        await cluster.store.ledgers.get_ledger(ledger_ids[0])
    assert ml.first_position == positions[5]
    assert slow.backlog == 9 and fast.backlog == 0
    assert (await slow.read_entries(1))[0][0] == positions[8]

    await slow.delete(positions[8:10])  # the MDP reaches the end of the second ledger
    assert slow.mark_delete_position == positions[9]
    assert await ml.trim() == ledger_ids[1:2]
    await slow.mark_delete(positions[-1])
    # everything is acknowledged: all but the current ledger go
    assert await ml.trim() == ledger_ids[2:3]
    assert ml.stats()["ledger_ids"] == ledger_ids[3:] and ml.stats()["entries"] == 2
    assert [p for p, _ in await ml.read(Position.EARLIEST, 10)] == positions[15:]
    assert await ml.trim() == []
    await ml.append(b"next")

    reopened = await factories(cluster).open("t/trim", SMALL)
    assert reopened.stats()["ledger_ids"][0] == ledger_ids[3]
    assert reopened.cursors["slow"].backlog == 1


async def test_retention_by_time_and_size(cluster_factory, factories):
    cluster = await cluster_factory(3)
    clock = ManualClock()
    factory = factories(cluster, clock)

    # no cursor: retention alone decides
    config = ManagedLedgerConfig(rollover_entries_max=5, retention_s=100)
    by_time = await factory.open("t/retain-time", config)
    old = await append_all(by_time, payloads(11))  # closes two ledgers now
    clock.advance(50)
    newer = await append_all(by_time, payloads(5))  # closes the third 50 s later
    assert await by_time.trim() == []
    clock.advance(50)  # the first two are 100 s old
    assert await by_time.trim() == sorted({p.ledger_id for p in old[:10]})
    clock.advance(50)
    assert await by_time.trim() == [newer[0].ledger_id]
    assert by_time.stats()["ledger_ids"] == [newer[-1].ledger_id]  # the current one stays

    # size: the newest ledgers are kept while they sum to at most retention_bytes
    config = ManagedLedgerConfig(rollover_entries_max=5, retention_bytes=25)
    by_size = await factory.open("t/retain-size", config)
    cursor = await by_size.open_cursor("sub", start="earliest")
    positions = await append_all(by_size, [b"0123456789"] * 16)  # 50 bytes a ledger
    await by_size.append(b"")  # the fourth ledger holds 10 + 0 bytes
    ledger_ids = sorted({p.ledger_id for p in positions})
    assert await by_size.trim() == []  # nothing acknowledged: nothing goes
    await cursor.mark_delete(positions[-1])
    # 160 bytes: the oldest go until what is left (incl. the current ledger) fits 25
    assert await by_size.trim() == ledger_ids[:3]

    # time and size together: a ledger is kept while both hold
    config = ManagedLedgerConfig(rollover_entries_max=5, retention_s=100, retention_bytes=100)
    both = await factory.open("t/retain-both", config)
    positions = await append_all(both, [b"0123456789"] * 15)
    ledger_ids = sorted({p.ledger_id for p in positions})
    # trim first rolls the full current ledger over: three closed ledgers of 50 bytes
    assert await both.trim() == ledger_ids[:1]  # young, but 150 bytes > 100
    clock.advance(100)
    assert await both.trim() == ledger_ids[1:]  # 100 bytes fit, but old


async def test_backpressure_keeps_call_order(cluster_factory, factories, monkeypatch):
    cluster = await cluster_factory(3)
    ml = await factories(cluster).open("t/room", SMALL)
    monkeypatch.setattr(limits, "managed_ledger_pending_appends_count_max", 3)
    for address in cluster.bookies:
        await cluster.fault(address, delay_ms=50)  # adds stay pending a while
    admitted = []

    async def producer(i):
        future = await ml.append_async(f"m{i}".encode())
        admitted.append(ml.stats()["pending_appends"])
        return future

    futures = await asyncio.gather(*(producer(i) for i in range(12)))
    positions = await asyncio.gather(*futures)
    assert max(admitted) <= 3
    assert positions == sorted(positions)
    assert [data for _, data in await ml.read(Position.EARLIEST, 20)] == payloads(12)


async def test_wait_for_entries_after(cluster_factory, factories):
    cluster = await cluster_factory(3)
    ml = await factories(cluster).open("t/tail", SMALL)
    waiter = asyncio.create_task(ml.wait_for_entries_after(None))
    await asyncio.sleep(0)
    assert not waiter.done()
    first = await ml.append(b"one")
    await waiter
    await ml.wait_for_entries_after(Position.EARLIEST)  # already there: returns at once
    waiter = asyncio.create_task(ml.wait_for_entries_after(first))
    cancelled = asyncio.create_task(ml.wait_for_entries_after(first))
    await asyncio.sleep(0)
    cancelled.cancel()  # one waiter giving up does not wake the others
    await asyncio.sleep(0)
    assert not waiter.done()
    await ml.append(b"two")
    await waiter
    waiter = asyncio.create_task(ml.wait_for_entries_after(ml.last_confirmed))
    await asyncio.sleep(0)
    await ml.close()
    with pytest.raises(ManagedLedgerClosed):
        await waiter


async def test_factory_open_list_delete(cluster_factory, factories):
    cluster = await cluster_factory(3)
    factory = factories(cluster)
    same = await asyncio.gather(*(factory.open("t/one", SMALL) for _ in range(3)))
    assert same[0] is same[1] is same[2]
    await factory.open("t/two", SMALL)
    ml = same[0]
    cursor = await ml.open_cursor("sub")
    await append_all(ml, payloads(12))
    await cursor.mark_delete(ml.last_confirmed)
    assert await factory.list_names() == ["t/one", "t/two"]
    used = set(ml.stats()["ledger_ids"]) | {cursor.stats()["cursor_ledger_id"]}
    assert used <= set(await cluster.store.ledgers.list_ledger_ids())

    await factory.delete("t/one")
    assert await factory.list_names() == ["t/two"]
    assert not used & set(await cluster.store.ledgers.list_ledger_ids())
    with pytest.raises(ManagedLedgerClosed):
        await ml.append(b"deleted")
    with pytest.raises(NoSuchManagedLedger):
        await factory.delete("t/one")
    fresh = await factory.open("t/one", SMALL)
    assert fresh is not ml and fresh.last_confirmed is None and not fresh.cursors
    with pytest.raises(InvalidArgument):
        await factory.open("", SMALL)


async def test_appends_resume_on_a_new_ledger_after_a_storage_outage(cluster_factory, factories):
    cluster = await cluster_factory(3)  # E=3 of 3 bookies: one lost stops the writer
    ml = await factories(cluster).open("t/outage", SMALL)
    before = await ml.append(b"before")
    victim = next(iter(cluster.bookies))
    await cluster.kill(victim)
    futures = [await ml.append_async(b"during") for _ in range(3)]
    results = await asyncio.gather(*futures, return_exceptions=True)
    failed = [r for r in results if isinstance(r, StorageError)]
    assert failed and not any(isinstance(r, ManagedLedgerFenced) for r in failed)

    await cluster.restart(victim)
    for _ in range(200):  # until the bookie has registered again
        try:
            after = await ml.append(b"after")
            break
        except StorageError:
            await asyncio.sleep(0.05)
    else:
        pytest.fail("appends did not resume")
    assert not ml.is_fenced and after.ledger_id > before.ledger_id
    log = await ml.read(Position.EARLIEST, 100)
    assert [p for p, _ in log] == sorted(p for p, _ in log)
    assert log[0] == (before, b"before") and log[-1] == (after, b"after")
    assert {data for _, data in log} <= {b"before", b"during", b"after"}
