"""``georep cluster`` as a process: readiness line, clean stop, kill -9 under load, and
producer deduplication across restarts.

kill -9 contract checked here: every publish the broker acknowledged is readable after
the restart; messages whose acknowledgement the broker persisted (the consumer was closed,
which returns only once its acks are durable) are not delivered again; every other
acknowledged publish is.
"""

from __future__ import annotations

import threading
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pulsar
import pytest

from tests.harness.broker_cluster import (
    ClusterProcess,
    admin_call,
    open_client,
    receive_all,
    receive_none,
    unique_topic,
)
from tests.harness.gateway import admin_url
from tests.harness.waiting import wait_for

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]

EARLIEST = pulsar.InitialPosition.Earliest


@pytest.fixture
def process(tmp_path) -> Iterator[ClusterProcess]:
    cluster = ClusterProcess(tmp_path / "cluster")
    yield cluster
    cluster.kill()


def drain(
    process: ClusterProcess,
    consumer: pulsar.Consumer,
    topic: str,
    subscription: str = "s",
    quiet_ms: int = 1500,
    timeout_s: float = 120,
) -> list[pulsar.Message]:
    """Receive and acknowledge what ``subscription`` holds: until none arrives for
    ``quiet_ms`` and the cluster's admin reports the subscription's backlog empty (a
    quiet period alone cut the read short on a loaded machine)."""
    stats = f"/admin/v2/persistent/{topic.removeprefix('persistent://')}/stats"
    deadline = time.monotonic() + timeout_s
    out: list[Any] = []
    while True:
        try:
            message = consumer.receive(timeout_millis=quiet_ms)
        except pulsar.Timeout:
            status, document = admin_call(admin_url(process), "GET", stats)
            assert status == 200, (status, document)
            backlog = document["subscriptions"][subscription]["msgBacklog"]
            if backlog == 0:
                return out
            assert time.monotonic() < deadline, (
                f"{subscription} still has {backlog} entries unacknowledged after"
                f" {timeout_s} s; {len(out)} messages received"
            )
            continue
        consumer.acknowledge(message)
        out.append(message)


def test_ready_line_and_clean_stop(process: ClusterProcess) -> None:
    line = process.start()
    assert line == f"CLUSTER_READY {process.url} http://127.0.0.1:{process.admin_port}"
    topic = unique_topic()
    with open_client(process.url) as client:
        producer = client.create_producer(topic)
        producer.send(b"before the stop")
        producer.close()
    assert process.terminate() == 0
    process.start()
    with open_client(process.url) as client:
        consumer = client.subscribe(topic, "s", initial_position=EARLIEST)
        assert [m.data() for m in receive_all(consumer, 1)] == [b"before the stop"]
        # read from the bookies: the new process's entry cache holds nothing yet
        assert cache_figure(process, "missed_reads_total") >= 1
        hits = cache_figure(process, "hit_reads_total")
        producer = client.create_producer(topic)
        producer.send(b"after the start")
        assert [m.data() for m in receive_all(consumer, 1)] == [b"after the start"]
        assert cache_figure(process, "hit_reads_total") > hits  # read at the tail
        assert cache_figure(process, "entries") >= 1
        consumer.close()
    assert process.terminate() == 0


def cache_figure(process: ClusterProcess, name: str) -> float:
    """``georep_managed_ledger_cache_<name>`` in the cluster's ``/metrics``."""
    with urllib.request.urlopen(f"{admin_url(process)}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    prefix = f"georep_managed_ledger_cache_{name} "
    (line,) = [line for line in text.splitlines() if line.startswith(prefix)]
    return float(line.removeprefix(prefix))


async def test_external_bookies_and_metadata_url(tmp_path) -> None:
    """--metadata and --bookies: the cluster runs no bookie of its own."""
    import asyncio

    from georep.runtime.processes import start_bookie

    url = f"sqlite:///{tmp_path / 'shared-metadata.db'}"
    bookies = [
        await start_bookie(tmp_path / f"bookie-{n}", metadata_url=url, extra=["--no-fsync"])
        for n in range(3)
    ]
    cluster = ClusterProcess(
        tmp_path / "cluster",
        extra=["--metadata", url, "--bookies", ",".join(b.detail for b in bookies)],
    )
    try:
        await asyncio.to_thread(cluster.start)
        assert not (tmp_path / "cluster" / "bookies").exists()

        def round_trip() -> list[bytes]:
            topic = unique_topic()
            with open_client(cluster.url) as client:
                consumer = client.subscribe(topic, "s", initial_position=EARLIEST)
                producer = client.create_producer(topic)
                producer.send(b"via external bookies")
                got = [m.data() for m in receive_all(consumer, 1)]
                consumer.close()
                producer.close()
                return got

        assert await asyncio.to_thread(round_trip) == [b"via external bookies"]
        assert await asyncio.to_thread(cluster.terminate) == 0
    finally:
        cluster.kill()
        for bookie in bookies:
            await bookie.terminate()


def test_kill_9_under_load_loses_no_acknowledged_publish(process: ClusterProcess) -> None:
    process.start()
    topic = unique_topic("kill")
    acked_before = set()
    with open_client(process.url) as client:
        consumer = client.subscribe(topic, "s", initial_position=EARLIEST)
        producer = client.create_producer(topic, batching_enabled=False)
        for n in range(200):
            producer.send(f"first-{n}".encode())
        for message in receive_all(consumer, 200, ack=False):
            if int(message.data().split(b"-")[1]) % 3 != 0:  # ack two thirds, out of order
                consumer.acknowledge(message)
                acked_before.add(message.data())
        consumer.close()  # acks durable once this returns

    confirmed: set[bytes] = set()
    lock = threading.Lock()
    stop = threading.Event()
    load_client = pulsar.Client(
        process.url,
        operation_timeout_seconds=5,
        connection_timeout_ms=2000,
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
    )
    producer = load_client.create_producer(
        topic,
        batching_enabled=True,
        batching_max_publish_delay_ms=5,
        send_timeout_millis=5000,
        block_if_queue_full=True,
        max_pending_messages=500,
    )

    def produce() -> None:
        n = 0
        while not stop.is_set():
            payload = f"load-{n}".encode()

            def done(result, _message_id, payload=payload) -> None:
                if result == pulsar.Result.Ok:
                    with lock:
                        confirmed.add(payload)

            try:
                producer.send_async(payload, done)
            except pulsar.PulsarException:
                return
            n += 1
            if n % 50 == 0:
                time.sleep(0.002)

    thread = threading.Thread(target=produce, daemon=True)
    thread.start()
    wait_for(lambda: len(confirmed) >= 2000, timeout_s=60)
    process.kill()  # SIGKILL while the producer is still sending
    stop.set()
    thread.join(30)
    with lock:
        confirmed_at_kill = set(confirmed)
    load_client.close()

    process.start()
    with open_client(process.url) as client:
        consumer = client.subscribe(topic, "s", receiver_queue_size=2000)
        delivered = [m.data() for m in drain(process, consumer, topic)]
        consumer.close()
    expected_first = {f"first-{n}".encode() for n in range(200)} - acked_before
    assert not set(delivered) & acked_before, "a persisted ack was forgotten"
    assert expected_first <= set(delivered), "an unacknowledged message was not redelivered"
    missing = confirmed_at_kill - set(delivered)
    assert not missing, f"{len(missing)} acknowledged publishes lost, e.g. {sorted(missing)[:5]}"
    assert len(delivered) == len(set(delivered)), "a message was delivered twice"


def test_partially_acknowledged_batches_survive_kill_9(process: ClusterProcess) -> None:
    """Batch-index acks are persisted with the cursor: after kill -9 a resubscribed
    consumer gets only the members nobody acknowledged (the broker sends the remembered
    bits as ``ack_set`` and the client skips the rest)."""
    process.start()
    topic = unique_topic("batch-ack")
    sent = [f"b{n}".encode() for n in range(15)]
    acked = {sent[n] for n in (0, 2, 3, *range(5, 10), 14)}  # batch 2 (5..9) wholly
    with open_client(process.url) as client:
        producer = client.create_producer(
            topic,
            batching_enabled=True,
            batching_max_messages=5,
            batching_max_publish_delay_ms=1000,
        )
        for payload in sent:
            producer.send_async(payload, lambda *_: None)
        producer.flush()
        producer.close()
        consumer = client.subscribe(
            topic, "s", initial_position=EARLIEST, batch_index_ack_enabled=True
        )
        messages = receive_all(consumer, len(sent), ack=False)
        entries = {(m.message_id().ledger_id(), m.message_id().entry_id()) for m in messages}
        assert len(entries) == 3, "expected three batches of five"
        for message in messages:
            if message.data() in acked:
                consumer.acknowledge(message)
        consumer.close()  # answered once the acks, batch members included, are durable
    process.kill()
    process.start()
    with open_client(process.url) as client:
        consumer = client.subscribe(topic, "s", batch_index_ack_enabled=True)
        delivered = [m.data() for m in drain(process, consumer, topic)]
        consumer.close()
    assert delivered == [payload for payload in sent if payload not in acked]


@pytest.mark.parametrize(("messages", "batched"), [(10, False), (1_500, False), (1_500, True)])
def test_dedup_survives_kill_9(process: ClusterProcess, messages: int, batched: bool) -> None:
    """10 entries: rebuilt by scanning the log; 1,500 entries: from the snapshot taken at
    1,000 plus a scan; 1,500 messages in batches: a batch's highest id counts."""
    process.start()
    topic = unique_topic("dedup")
    with open_client(process.url) as client:
        producer = client.create_producer(
            topic,
            producer_name="dedup-producer",
            batching_enabled=batched,
            batching_max_publish_delay_ms=5,
            batching_max_messages=100,
            block_if_queue_full=True,
        )
        for n in range(messages):
            producer.send_async(f"m{n}".encode(), lambda *_: None)
        producer.flush()
        producer.close()
    process.kill()
    process.start()
    with open_client(process.url) as client:
        producer = client.create_producer(topic, producer_name="dedup-producer")
        assert producer.last_sequence_id() == messages - 1
        producer.send(b"resent", sequence_id=messages - 2)  # a duplicate: not stored
        producer.send(b"new")  # sequence id `messages`: stored
        consumer = client.subscribe(topic, "s", initial_position=EARLIEST)
        got = [m.data() for m in receive_all(consumer, messages + 1)]
        assert got == [f"m{n}".encode() for n in range(messages)] + [b"new"]
        assert receive_none(consumer) == []
        consumer.close()
        producer.close()
