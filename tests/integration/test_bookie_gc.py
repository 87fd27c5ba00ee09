"""The bookie's metadata duties: garbage collection of deleted ledgers, registration."""

from __future__ import annotations

import asyncio

from georep.storage import bookie_protocol
from georep.storage.bookie_protocol import Status
from tests.harness.bookie import RawClient, add_request, running_bookie


async def _create(store, address: str) -> int:
    metadata = await store.ledgers.create_ledger(
        ensemble_size=1, write_quorum=1, ack_quorum=1, ensemble=[address]
    )
    return metadata.ledger_id


async def _fill(client: RawClient, ledger: int, count: int = 5) -> None:
    for entry_id in range(count):
        response = await client.request(
            add_request(ledger, entry_id, b"g" * 200, request_id=client.next_id())
        )
        assert response.status == Status.OK


async def _status(client: RawClient, ledger: int, entry: int = 0) -> Status:
    return (
        await client.request(bookie_protocol.ReadRequest(client.next_id(), ledger, entry))
    ).status


async def test_gc_removes_deleted_ledgers_and_their_entry_logs(tmp_path, metadata_store):
    directory = tmp_path / "b"
    config = {"metadata_store": metadata_store, "gc_interval_s": 3600}
    async with running_bookie(directory, **config) as bookie, RawClient(bookie.address) as client:
        doomed = await _create(metadata_store, bookie.address)
        await _fill(client, doomed)
        await bookie.checkpoint()
        doomed_log = bookie.storage.entry_log.current_id
    # A restart starts a new entry log: the doomed ledger's log holds only it.
    async with running_bookie(directory, **config) as bookie, RawClient(bookie.address) as client:
        kept = await _create(metadata_store, bookie.address)
        newest = await _create(metadata_store, bookie.address)
        await _fill(client, kept)
        await _fill(client, newest)
        # An entry for a ledger id the store has not handed out yet: must survive.
        unborn = newest + 100
        await _fill(client, unborn, 1)
        await bookie.checkpoint()
        assert doomed_log in bookie.storage.entry_log.log_ids()

        await metadata_store.ledgers.delete_ledger(doomed)
        await metadata_store.ledgers.delete_ledger(newest)  # the highest id: kept by the rule
        assert await bookie.collect_garbage() == [doomed]
        assert await _status(client, doomed) == Status.NO_SUCH_LEDGER
        assert await _status(client, kept) == Status.OK
        assert await _status(client, newest) == Status.OK
        assert await _status(client, unborn) == Status.OK
        assert doomed_log not in bookie.storage.entry_log.log_ids()
        assert bookie.stats()["storage"]["ledgers_collected"] == 1
    # Not resurrected by journal replay after a restart.
    async with running_bookie(directory, **config) as bookie, RawClient(bookie.address) as client:
        assert await _status(client, doomed) == Status.NO_SUCH_LEDGER
        assert await _status(client, kept, 4) == Status.OK


async def test_gc_runs_periodically(tmp_path, metadata_store):
    async with (
        running_bookie(tmp_path / "b", metadata_store=metadata_store, gc_interval_s=0.05) as bookie,
        RawClient(bookie.address) as client,
    ):
        first = await _create(metadata_store, bookie.address)
        await _create(metadata_store, bookie.address)
        await _fill(client, first, 2)
        await metadata_store.ledgers.delete_ledger(first)
        while await _status(client, first) != Status.NO_SUCH_LEDGER:  # noqa: ASYNC110
            await asyncio.sleep(0.02)
        # A run is counted when it ends, after its deletions: the count may trail them.
        while bookie.stats()["gc_runs"] < 1:  # noqa: ASYNC110
            await asyncio.sleep(0.02)


async def test_registers_renews_and_unregisters(tmp_path, metadata_store, manual_clock):
    async with running_bookie(tmp_path / "b", metadata_store=metadata_store, lease_s=0.3) as bookie:
        alive = [b.address for b in await metadata_store.bookies.list_bookies()]
        assert alive == [bookie.address]
        manual_clock.advance(100)  # the lease has run out...
        while bookie.address not in [  # noqa: ASYNC110
            b.address for b in await metadata_store.bookies.list_bookies()
        ]:
            await asyncio.sleep(0.02)  # ...until the bookie renews it
        address = bookie.address
    assert address not in [
        b.address for b in await metadata_store.bookies.list_bookies(alive_only=False)
    ]
