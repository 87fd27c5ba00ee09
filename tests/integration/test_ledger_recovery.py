"""Fencing and recovery against real bookie processes (docs/ARCHITECTURE.md, "Fencing
and recovery")."""

import asyncio
import sys
import textwrap

import pytest

from georep.storage import entry as entry_format
from georep.storage.errors import LedgerFenced, ReadBeyondLastAddConfirmed
from georep.storage.meta.ledger_metadata import LedgerState

pytestmark = pytest.mark.slow


async def wait_stored(cluster, bookie, ledger_id, entry_id):
    """Until ``bookie`` holds the entry (bounded: 20 s)."""
    for _ in range(400):
        if await cluster.stored(bookie, ledger_id, entry_id) is not None:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"entry {entry_id} never reached {bookie}")


async def write(handle, count, start=0):
    return await asyncio.gather(
        *[await handle.add_async(f"e{i}".encode()) for i in range(start, start + count)]
    )


async def test_fencing_stops_the_old_writer_and_keeps_its_lac(cluster_factory):
    cluster = await cluster_factory(3)
    writer = await cluster.client().create_ledger(ensemble_size=3, write_quorum=2, ack_quorum=2)
    acked = await write(writer, 50)
    assert acked == list(range(50))

    reader = await cluster.client().open_ledger(writer.ledger_id)  # recovery
    assert reader.metadata.state == LedgerState.CLOSED
    assert reader.last_add_confirmed == writer.last_add_confirmed == 49
    assert [e.payload for e in await reader.read(0, 49)] == [f"e{i}".encode() for i in range(50)]

    with pytest.raises(LedgerFenced):
        await writer.add(b"too late")
    with pytest.raises(ReadBeyondLastAddConfirmed):
        await reader.read(0, 50)


async def test_parallel_recovering_opens_agree(cluster_factory):
    cluster = await cluster_factory(3)
    writer = await cluster.client().create_ledger(ensemble_size=3, write_quorum=3, ack_quorum=2)
    await write(writer, 30)
    # one more entry reaches a single bookie only: recoveries may keep it or not,
    # but they must all agree
    _, second, third = writer.ensemble
    await cluster.fault(second, drop_adds_from_entry=30)
    await cluster.fault(third, drop_adds_from_entry=30)
    pending = await writer.add_async(b"maybe")
    await wait_stored(cluster, writer.ensemble[0], writer.ledger_id, 30)

    readers = await asyncio.gather(
        *[cluster.client().open_ledger(writer.ledger_id) for _ in range(6)]
    )
    ends = {r.metadata.last_entry_id for r in readers}
    assert len(ends) == 1, ends
    (end,) = ends
    assert end in (29, 30)
    stored = await cluster.store.ledgers.get_ledger(writer.ledger_id)
    assert stored.last_entry_id == end and stored.state == LedgerState.CLOSED
    with pytest.raises(LedgerFenced):
        await pending


async def test_lost_fence_on_one_bookie_loses_no_acknowledged_entry(cluster_factory):
    """E=3 Qw=3 Qa=2. Entry 20 has one ack (one short of Qa) when a recovery starts;
    one bookie 'loses' the fence. The writer must not get entry 20 or anything later
    acknowledged, and every entry it was acknowledged survives."""
    cluster = await cluster_factory(3)
    writer = await cluster.client(request_timeout_ms=1500).create_ledger(
        ensemble_size=3, write_quorum=3, ack_quorum=2
    )
    acked = set(await write(writer, 20))
    b0, b1, b2 = writer.ensemble
    await cluster.fault(b1, drop_adds_from_entry=20)
    await cluster.fault(b2, drop_adds_from_entry=20)
    pending = await writer.add_async(b"one short")
    await wait_stored(cluster, b0, writer.ledger_id, 20)  # b0 acked it; b1, b2 dropped it
    await cluster.fault(b0, ignore_fence=True)  # b0 will lose its fence

    reader = await cluster.client().open_ledger(writer.ledger_id)
    await cluster.fault(b1)
    await cluster.fault(b2)
    # b0 still takes normal adds, b1 and b2 are fenced: the writer cannot reach Qa
    later = []
    for i in range(3):
        try:
            later.append(await writer.add_async(f"late{i}".encode()))
        except LedgerFenced:
            break
    results = await asyncio.gather(pending, *later, return_exceptions=True)
    assert all(isinstance(r, LedgerFenced) for r in results), results

    end = reader.metadata.last_entry_id
    assert end in (19, 20)
    assert acked <= set(range(end + 1))
    payloads = [e.payload for e in await reader.read(0, end)]
    assert payloads[:20] == [f"e{i}".encode() for i in range(20)]


async def test_tail_gap_ends_the_ledger_before_the_gap(cluster_factory):
    """Entry 11 exists on a bookie but entry 10 nowhere: 10 was never confirmed, so
    neither was 11; the ledger closes at 9."""
    cluster = await cluster_factory(3)
    writer = await cluster.client().create_ledger(ensemble_size=3, write_quorum=3, ack_quorum=2)
    await write(writer, 10)
    stray = entry_format.encode(writer.ledger_id, 11, 9, 999, b"stray")
    assert (await cluster.raw_add(writer.ensemble[0], writer.ledger_id, 11, stray)).name == "OK"

    reader = await cluster.client().open_ledger(writer.ledger_id)
    assert reader.metadata.last_entry_id == 9
    assert len(await reader.read(0, 9)) == 10


@pytest.mark.parametrize("fault", ["slow", "dead"])
async def test_recovery_with_a_slow_or_dead_bookie(cluster_factory, fault):
    cluster = await cluster_factory(4)
    writer = await cluster.client().create_ledger(ensemble_size=3, write_quorum=3, ack_quorum=2)
    await write(writer, 40)
    victim = writer.ensemble[2]
    if fault == "slow":
        await cluster.fault(victim, delay_ms=800)
    else:
        await cluster.kill(victim)

    reader = await cluster.client(request_timeout_ms=1500).open_ledger(writer.ledger_id)
    assert reader.metadata.last_entry_id == 39
    assert [e.payload for e in await reader.read(0, 39)] == [f"e{i}".encode() for i in range(40)]


WRITER = textwrap.dedent("""
    import asyncio, json, sys
    from georep.storage.client.bookkeeper import BookKeeper
    from georep.storage.meta.store import MetadataStore

    async def main(url, count):
        store = await MetadataStore.open(url)
        bk = BookKeeper(store.ledgers, store.bookies, request_timeout_ms=60000)
        writer = await bk.create_ledger(ensemble_size=3, write_quorum=3, ack_quorum=2)
        print(json.dumps({"ledger": writer.ledger_id, "ensemble": writer.ensemble}), flush=True)
        for i in range(count):
            await writer.add(f"e{i}".encode())
            print(json.dumps({"acked": i}), flush=True)
        sys.stdin.readline()  # the test sets faults, then lets us write one more
        writer_future = await writer.add_async(b"on fewer than Qa")
        print(json.dumps({"sent": count}), flush=True)
        await writer_future
        print(json.dumps({"acked": count}), flush=True)

    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
""")


async def test_writer_crash_with_entry_on_fewer_than_qa_bookies(cluster_factory, tmp_path):
    """kill -9 of a writer whose last entry reached one bookie: after recovery that entry
    is either on its whole write set or nowhere a reader can see."""
    import json

    cluster = await cluster_factory(3)
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(script),
        cluster.url,
        "25",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None and process.stdin is not None
    header = json.loads(await process.stdout.readline())
    ledger_id, ensemble = header["ledger"], header["ensemble"]
    acked = []
    for _ in range(25):
        acked.append(json.loads(await process.stdout.readline())["acked"])
    await cluster.fault(ensemble[1], drop_adds_from_entry=25)
    await cluster.fault(ensemble[2], drop_adds_from_entry=25)
    process.stdin.write(b"go\n")
    await process.stdin.drain()
    assert json.loads(await process.stdout.readline()) == {"sent": 25}
    await wait_stored(cluster, ensemble[0], ledger_id, 25)  # on one bookie only
    process.kill()
    await process.wait()
    for address in ensemble:
        await cluster.fault(address)

    reader = await cluster.client().open_ledger(ledger_id)
    end = reader.metadata.last_entry_id
    assert end in (24, 25)
    assert acked == list(range(25))
    assert len(await reader.read(0, end)) == end + 1
    copies = [await cluster.stored(a, ledger_id, 25) for a in ensemble]
    if end == 25:
        assert all(copies), "recovered entry must be on its whole write set"
    else:
        with pytest.raises(ReadBeyondLastAddConfirmed):
            await reader.read(25, 25)
    # a second recovery agrees with the first
    again = await cluster.client().open_ledger(ledger_id)
    assert again.metadata.last_entry_id == end
