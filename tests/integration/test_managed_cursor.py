"""Cursors on real bookie processes: reading and acknowledging, what survives a close and
a kill -9 of the owning process (exactly the acknowledgements that returned), the bound
on persisted ranges, and the cursor's own ledger rolling over (docs/ARCHITECTURE.md, "Cursor")."""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
from typing import Any

import pytest

from georep.runtime.awaiting import within
from georep.storage.errors import InvalidArgument, ManagedLedgerClosed, NoSuchCursor
from georep.storage.managed_ledger import ManagedLedgerConfig, ManagedLedgerFactory, Position

pytestmark = pytest.mark.slow

SMALL = ManagedLedgerConfig(rollover_entries_max=5)


@pytest.fixture
async def factories(cluster_factory):
    made: list[ManagedLedgerFactory] = []

    def make(cluster) -> ManagedLedgerFactory:
        factory = ManagedLedgerFactory(cluster.client(), cluster.store.managed_ledgers)
        made.append(factory)
        return factory

    yield make
    for factory in made:
        await factory.close()


async def append_all(ml, count, prefix="m"):
    futures = [await ml.append_async(f"{prefix}{i}".encode()) for i in range(count)]
    return await asyncio.gather(*futures)


def state_of(cursor) -> dict:
    return {
        "mdp": list(cursor.mark_delete_position),
        "ranges": [[*low, *high] for low, high in cursor.individually_deleted.ranges()],
        "properties": dict(cursor.properties),
    }


async def test_read_ack_rewind_seek_reset(cluster_factory, factories):
    cluster = await cluster_factory(3)
    ml = await factories(cluster).open("t/cursor", SMALL)
    cursor = await ml.open_cursor("sub", start="earliest")
    p = await append_all(ml, 12)  # ledgers of 5, 5, 2

    assert [q for q, _ in await cursor.read_entries(4)] == p[:4]
    assert cursor.read_position == p[4]
    await cursor.delete([p[5], p[6]])
    assert cursor.individually_deleted.ranges() == [(p[5], p[6])]
    assert cursor.is_acknowledged(p[6]) and not cursor.is_acknowledged(p[4])
    assert [q for q, _ in await cursor.read_entries(10)] == [p[4], *p[7:]]
    assert await cursor.read_entries(10) == []  # caught up
    assert cursor.backlog == 10

    cursor.rewind()  # redelivery: everything unacknowledged again
    assert [q for q, _ in await cursor.read_entries(100)] == [*p[:5], *p[7:]]
    # acknowledging the gap: the MDP crosses the ledger boundary and eats the range
    await cursor.delete([p[0], p[1], p[2], p[3], p[4]])
    assert cursor.mark_delete_position == p[6] and len(cursor.individually_deleted) == 0
    assert cursor.backlog == 5

    await cursor.mark_delete(p[2])  # older: a no-op, never backwards
    assert cursor.mark_delete_position == p[6]
    await cursor.delete([p[1]])  # at or below the MDP: a no-op
    with pytest.raises(InvalidArgument):  # not an entry of the log; nothing applied
        await cursor.delete([p[8], Position(p[5].ledger_id, 7)])
    assert not cursor.is_acknowledged(p[8])
    with pytest.raises(InvalidArgument):
        await cursor.mark_delete(ml.tail_position)  # past the last entry
    await cursor.mark_delete(p[8])
    assert cursor.mark_delete_position == p[8] and cursor.backlog == 3

    cursor.seek(p[10])
    assert [q for q, _ in await cursor.read_entries(10)] == p[10:]
    cursor.seek(p[0])  # never before the first unacknowledged entry
    assert cursor.read_position == p[9]

    await cursor.reset(p[1])  # admin reset: moves back, clears ranges
    assert cursor.mark_delete_position == p[0] and cursor.read_position == p[1]
    assert cursor.backlog == 11
    await cursor.reset(Position.LATEST)  # clamped to the end of the log
    assert cursor.mark_delete_position == p[-1] and cursor.backlog == 0
    stats = ml.stats()["cursors"]["sub"]
    assert stats["backlog"] == 0 and stats["mark_delete_position"] == str(p[-1])


async def test_open_cursor_starts_and_delete_cursor(cluster_factory, factories):
    cluster = await cluster_factory(3)
    ml = await factories(cluster).open("t/starts", SMALL)
    p = await append_all(ml, 7)
    earliest = await ml.open_cursor("earliest", start="earliest")
    latest = await ml.open_cursor("latest")
    middle = await ml.open_cursor("middle", start=p[5])
    before = await ml.open_cursor("before", start=Position.EARLIEST)
    assert (earliest.backlog, latest.backlog, middle.backlog, before.backlog) == (7, 0, 2, 7)
    assert (await middle.read_entries(1))[0][0] == p[5]
    assert await ml.open_cursor("middle", start="earliest") is middle  # restored as is
    await ml.append(b"new")
    assert [data for _, data in await latest.read_entries(5)] == [b"new"]
    for bad in ("oldest", 3, None):
        with pytest.raises(InvalidArgument):
            await ml.open_cursor("bad", start=bad)
    with pytest.raises(InvalidArgument):
        await ml.open_cursor("x" * 256)

    await ml.delete_cursor("middle")
    assert "middle" not in ml.cursors
    with pytest.raises(ManagedLedgerClosed):
        await middle.mark_delete(p[6])
    with pytest.raises(NoSuchCursor):
        await ml.delete_cursor("middle")
    await ml.close()
    reopened = await factories(cluster).open("t/starts", SMALL)
    assert sorted(reopened.cursors) == ["before", "earliest", "latest"]


async def test_state_survives_close_and_the_cursor_ledger_rolls_over(cluster_factory, factories):
    cluster = await cluster_factory(3)
    config = ManagedLedgerConfig(rollover_entries_max=5, cursor_rollover_entries_max=3)
    ml = await factories(cluster).open("t/persist", config)
    cursor = await ml.open_cursor("sub", start="earliest")
    first_ledger = cursor.stats()["cursor_ledger_id"]
    p = await append_all(ml, 20)
    for position in (p[3], p[4], p[9], p[12], p[13], p[17]):
        await cursor.delete([position])  # one persisted state each
    await cursor.mark_delete(p[1], properties={"replicated": "true"})
    await cursor.set_properties({"replicated": "true", "k": "v"})
    with pytest.raises(InvalidArgument):
        await cursor.set_properties({"k": 1})
    with pytest.raises(TypeError):
        cursor.properties["k"] = "w"  # a read-only view
    stats = cursor.stats()
    assert stats["ledger_switches"] >= 2 and stats["cursor_ledger_id"] != first_ledger
    assert first_ledger not in await cluster.store.ledgers.list_ledger_ids()  # old ones deleted
    expected = state_of(cursor)
    assert expected["ranges"] == [
        [*p[3], *p[4]],
        [*p[9], *p[9]],
        [*p[12], *p[13]],
        [*p[17], *p[17]],
    ]

    await ml.close()
    reopened = await factories(cluster).open("t/persist", config)
    restored = reopened.cursors["sub"]
    assert state_of(restored) == expected
    assert restored.read_position == p[2]  # a restored cursor reads from its MDP on
    assert restored.backlog == 20 - 2 - 6


async def test_partially_acknowledged_batches_persist_within_their_bound(
    cluster_factory, factories
):
    cluster = await cluster_factory(3)
    config = ManagedLedgerConfig(rollover_entries_max=5, cursor_batch_entries_persisted_max=2)
    ml = await factories(cluster).open("t/batches", config)
    cursor = await ml.open_cursor("sub", start="earliest")
    p = await append_all(ml, 8)
    # entries 1, 3, 6, 7 are batches of 3 (bits: members still unacknowledged)
    await cursor.delete_batch_members({p[1]: 0b110, p[3]: 0b011})
    await cursor.delete_batch_members({p[1]: 0b011, p[6]: 0b101, p[7]: 0b001})
    assert cursor.batches == [(p[1], 0b010), (p[3], 0b011), (p[6], 0b101), (p[7], 0b001)]
    await cursor.delete_batch_members({p[7]: 0b110})  # the last member: p[7] is done
    assert cursor.is_acknowledged(p[7]) and cursor.batch_bits(p[7]) is None
    await cursor.delete([p[3]])  # acknowledged whole: no longer partial
    with pytest.raises(InvalidArgument):
        await cursor.delete_batch_members({Position(p[7].ledger_id, 99): 1})
    assert cursor.batches == [(p[1], 0b010), (p[6], 0b101)]
    await cursor.delete_batch_members({p[2]: 0b100, p[4]: 0b1})
    stats = cursor.stats()
    assert stats["batch_entries"] == 4 and stats["batch_entries_unpersisted"] == 2
    expected = cursor.batches

    await ml.close()
    ml = await factories(cluster).open("t/batches", config)
    cursor = ml.cursors["sub"]
    assert cursor.batches == expected[:2]  # the lowest two; (2) and (4) were above the bound
    await cursor.mark_delete(p[1])  # at or below the MDP: forgotten
    assert cursor.batches == [(p[2], 0b100)]
    await cursor.reset(p[0])
    assert cursor.batches == []


@pytest.mark.parametrize("interval_ms", [0, 5])
async def test_acks_are_grouped_into_few_writes(cluster_factory, factories, interval_ms):
    cluster = await cluster_factory(3)
    config = ManagedLedgerConfig(cursor_persist_interval_ms=interval_ms)
    ml = await factories(cluster).open("t/group", config)
    cursor = await ml.open_cursor("sub", start="earliest")
    p = await append_all(ml, 100)
    before = cursor.stats()["persists"]
    await asyncio.gather(*(cursor.delete([q]) for q in reversed(p)))
    assert cursor.mark_delete_position == p[-1] and len(cursor.individually_deleted) == 0
    assert cursor.stats()["persists"] - before <= 2  # not one write per ack


CHILD = textwrap.dedent("""
    import asyncio, json, random, sys
    from georep.storage.client.bookkeeper import BookKeeper
    from georep.storage.managed_ledger import ManagedLedgerConfig, ManagedLedgerFactory
    from georep.storage.meta.store import MetadataStore

    def say(**fields):
        print(json.dumps(fields), flush=True)

    def state_of(cursor):
        return {
            "mdp": list(cursor.mark_delete_position),
            "ranges": [[*lo, *hi] for lo, hi in cursor.individually_deleted.ranges()],
            "properties": dict(cursor.properties),
        }

    async def append_all(ml, count, prefix):
        futures = [await ml.append_async(f"{prefix}{i}".encode()) for i in range(count)]
        return await asyncio.gather(*futures)

    async def main(url, seed):
        rng = random.Random(seed)
        store = await MetadataStore.open(url)
        factory = ManagedLedgerFactory(
            BookKeeper(store.ledgers, store.bookies), store.managed_ledgers
        )
        ml = await factory.open("crash/log", ManagedLedgerConfig(rollover_entries_max=7))
        idle = await ml.open_cursor("idle", start="earliest")
        busy = await ml.open_cursor("busy", start="earliest")
        positions = await append_all(ml, 60, "e")
        say(positions=[list(p) for p in positions])

        # idle: random individual and cumulative acks, then nothing more
        order = list(positions)
        rng.shuffle(order)
        for position in order[:35]:
            if rng.random() < 0.1:
                await idle.mark_delete(position)
            else:
                await idle.delete([position])
        await idle.set_properties({"replicated": "true"})
        say(idle=state_of(idle))

        # bounded: cursors of this log persist 5 ranges; this one has 10
        bounded_ml = await factory.open(
            "crash/bounded", ManagedLedgerConfig(cursor_ranges_persisted_max=5)
        )
        bounded = await bounded_ml.open_cursor("sub", start="earliest")
        bounded_positions = await append_all(bounded_ml, 30, "b")
        await bounded.delete(bounded_positions[1:20:2])
        say(bounded=state_of(bounded), positions=[list(p) for p in bounded_positions])

        # busy: acks in groups, on and on; each group is announced, then reported once
        # every ack of it returned
        order = list(positions)
        rng.shuffle(order)
        while order:
            group, order = order[:4], order[4:]
            kinds = ["mark_delete" if rng.random() < 0.1 else "delete" for _ in group]
            acks = [[kind, list(p)] for kind, p in zip(kinds, group)]
            say(sending=acks)
            await asyncio.gather(*(
                busy.mark_delete(p) if kind == "mark_delete" else busy.delete([p])
                for kind, p in zip(kinds, group)
            ))
            say(returned=acks)
        say(done=True)
        await asyncio.Event().wait()  # never ends by itself: the test kills it

    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
""")


def acknowledged_by(acks, positions) -> set:
    """The positions a list of ``[kind, position]`` acks acknowledge."""
    result = set()
    for kind, raw in acks:
        position = Position(*raw)
        if kind == "mark_delete":
            result |= {p for p in positions if p <= position}
        else:
            result.add(position)
    return result


@pytest.mark.parametrize("seed", [1, 2])
async def test_kill_9_restores_every_acknowledgement_that_returned(
    cluster_factory, factories, tmp_path, seed
):
    cluster = await cluster_factory(3)
    script = tmp_path / "owner.py"
    script.write_text(CHILD)
    with open(tmp_path / "owner.log", "wb") as stderr:  # noqa: ASYNC230 - a local file
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            str(script),
            cluster.url,
            str(seed),
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
        )
        assert process.stdout is not None

        async def said() -> dict:
            assert process.stdout is not None
            line = await within(process.stdout.readline(), 60)
            assert line, f"the owner died; see {tmp_path / 'owner.log'}"
            return json.loads(line)

        try:
            positions = [Position(*p) for p in (await said())["positions"]]
            idle = (await said())["idle"]
            bounded_said = await said()
            # [kind, position] acks, as the owner printed them
            sent: list[list[Any]] = []
            returned: list[list[Any]] = []
            while len(returned) < 24:  # kill -9 in the middle of the busy acks
                message = await said()
                if "sending" in message:
                    sent += message["sending"]
                elif "returned" in message:
                    returned += message["returned"]
        finally:
            process.kill()
            await process.wait()
        # what it printed before it died is still in the pipe: acks announced meanwhile
        for line in (await process.stdout.read()).splitlines():
            try:
                message = json.loads(line)
            except json.JSONDecodeError:
                continue  # torn by the kill: its acks were not sent yet
            sent += message.get("sending", [])
            returned += message.get("returned", [])

    ml = await factories(cluster).open("crash/log")
    # the idle cursor is back exactly as it was: MDP, ranges, properties
    assert state_of(ml.cursors["idle"]) == idle
    # the busy one holds every ack that returned, and none that was never sent
    busy = ml.cursors["busy"]
    restored = {p for p in positions if busy.is_acknowledged(p)}
    assert acknowledged_by(returned, positions) <= restored
    assert restored <= acknowledged_by(sent, positions)
    # and what it holds reads back as unacknowledged exactly where it should
    unread = [p for p, _ in await busy.read_entries(100)]
    assert unread == [p for p in positions if p not in restored]

    # past the persisted bound: the lowest 5 ranges survive, the 5 above are redelivered
    bounded_ml = await factories(cluster).open("crash/bounded")
    cursor = bounded_ml.cursors["sub"]
    bounded_positions = [Position(*p) for p in bounded_said["positions"]]
    before_crash = bounded_said["bounded"]
    assert len(before_crash["ranges"]) == 10
    assert state_of(cursor) == {**before_crash, "ranges": before_crash["ranges"][:5]}
    redelivered = [p for p, _ in await cursor.read_entries(100)]
    lost_acks = bounded_positions[11:20:2]
    assert set(lost_acks) <= set(redelivered)
    assert redelivered == [
        p
        for p in bounded_positions
        if p not in bounded_positions[1:10:2] and p > cursor.mark_delete_position
    ]
