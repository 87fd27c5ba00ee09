"""Auditor and replication workers restore the replica count after a bookie is lost."""

import asyncio
import time

import pytest

from georep.storage.client.distribution_schedule import Quorums
from georep.storage.replication.auditor import Auditor
from georep.storage.replication.autorecovery import AutoRecovery
from georep.storage.replication.replication_worker import ReplicationWorker

pytestmark = pytest.mark.slow


def auditor_repositories(store):
    return {
        "leases": store.leases,
        "bookies": store.bookies,
        "ledgers": store.ledgers,
        "under_replication": store.under_replication,
    }


def worker_repositories(store):
    return {
        "under_replication": store.under_replication,
        "ledgers": store.ledgers,
        "bookies": store.bookies,
    }


async def closed_ledger(cluster, entries=200, e=3, qw=2, qa=2):
    writer = await cluster.client().create_ledger(ensemble_size=e, write_quorum=qw, ack_quorum=qa)
    await asyncio.gather(*[await writer.add_async(f"r{i}".encode()) for i in range(entries)])
    await writer.close()
    return writer.metadata.ledger_id, writer.ensemble


async def wait_lost(cluster, address):
    for _ in range(300):  # bounded: 30 s, ten leases
        alive = {b.address for b in await cluster.store.bookies.list_bookies(alive_only=True)}
        if address not in alive:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{address} still alive")


async def assert_fully_replicated(cluster, ledger_id, entries):
    metadata = await cluster.store.ledgers.get_ledger(ledger_id)
    quorums = Quorums(metadata.ensemble_size, metadata.write_quorum, metadata.ack_quorum)
    for entry_id in range(entries):
        ensemble = metadata.ensemble_for(entry_id)
        for index in quorums.write_set(entry_id):
            assert await cluster.stored(ensemble[index], ledger_id, entry_id), (
                f"entry {entry_id} missing on {ensemble[index]}"
            )
    return metadata


async def test_auditor_and_worker_restore_replicas_after_kill(cluster_factory):
    cluster = await cluster_factory(4)
    ledger_id, ensemble = await closed_ledger(cluster)
    victim = ensemble[1]
    await cluster.kill(victim)
    await wait_lost(cluster, victim)

    service = AutoRecovery.of(cluster.store, audit_interval_s=0.3, auditor_lease_s=3, grace_s=1)
    await service.start()
    try:
        for _ in range(200):
            if victim not in (await cluster.store.ledgers.get_ledger(ledger_id)).bookies():
                break
            await asyncio.sleep(0.1)
    finally:
        await service.stop()
    metadata = await assert_fully_replicated(cluster, ledger_id, 200)
    assert victim not in metadata.bookies()
    assert await cluster.store.under_replication.list_underreplicated() == []
    reader = await cluster.client().open_ledger(ledger_id)
    assert [e.payload for e in await reader.read(0, 199)] == [f"r{i}".encode() for i in range(200)]


async def test_open_ledger_fragment_is_fenced_after_grace(cluster_factory):
    cluster = await cluster_factory(4)
    writer = await cluster.client().create_ledger(ensemble_size=3, write_quorum=3, ack_quorum=2)
    await asyncio.gather(*[await writer.add_async(b"x") for _ in range(20)])
    # an idle writer: every copy landed (Qa=2 confirms before the third), so the kill
    # fails no add and the writer keeps the lost bookie in its open last segment
    for address in writer.ensemble:
        for entry_id in range(20):
            for _ in range(200):
                if await cluster.stored(address, writer.ledger_id, entry_id):
                    break
                await asyncio.sleep(0.05)
    victim = writer.ensemble[0]
    await cluster.kill(victim)
    await wait_lost(cluster, victim)

    auditor = Auditor(**auditor_repositories(cluster.store), holder="a1")
    assert await auditor.is_leader()
    report = await auditor.audit_once()
    assert report.marked_ledgers == {writer.ledger_id: {victim}}
    now = [time.time()]  # the worker's clock, moved by the test: no real waiting
    worker = ReplicationWorker(
        cluster.client(request_timeout_ms=1000),
        **worker_repositories(cluster.store),
        holder="w1",
        grace_s=30,
        clock=lambda: now[0],
    )
    assert await worker.replicate_once() is None  # within grace: left to the writer
    assert (await cluster.store.ledgers.get_ledger(writer.ledger_id)).state == "OPEN"
    now[0] += 31
    # the worker skips a ledger it deferred once, then takes it again
    results = [await worker.replicate_once() for _ in range(3)]
    assert writer.ledger_id in results
    metadata = await assert_fully_replicated(cluster, writer.ledger_id, 20)
    assert metadata.is_closed and metadata.last_entry_id == 19


async def test_two_workers_compete_for_one_ledger(cluster_factory):
    cluster = await cluster_factory(4)
    ledger_id, ensemble = await closed_ledger(cluster, entries=100)
    victim = ensemble[0]
    await cluster.kill(victim)
    await wait_lost(cluster, victim)
    auditor = Auditor(**auditor_repositories(cluster.store), holder="a1")
    assert await auditor.is_leader()
    await auditor.audit_once()
    assert not await Auditor(**auditor_repositories(cluster.store), holder="a2").is_leader()

    workers = [
        ReplicationWorker(cluster.client(), **worker_repositories(cluster.store), holder=f"w{n}")
        for n in range(2)
    ]
    results = await asyncio.gather(*(w.replicate_once() for w in workers))
    assert sorted(results, key=str) == sorted([ledger_id, None], key=str)
    metadata = await assert_fully_replicated(cluster, ledger_id, 100)
    assert victim not in metadata.bookies()
    assert await cluster.store.under_replication.list_underreplicated() == []


async def test_autorecovery_inside_bookie_processes(cluster_factory):
    """`georep bookie --autorecovery`: the surviving bookies elect an auditor among
    themselves and repair the ledger with no other process involved."""
    cluster = await cluster_factory(4, bookie_args=("--autorecovery",))
    ledger_id, ensemble = await closed_ledger(cluster, entries=60)
    victim = ensemble[2]
    await cluster.kill(victim)
    for _ in range(300):
        if victim not in (await cluster.store.ledgers.get_ledger(ledger_id)).bookies():
            break
        await asyncio.sleep(0.1)
    metadata = await assert_fully_replicated(cluster, ledger_id, 60)
    assert victim not in metadata.bookies()
