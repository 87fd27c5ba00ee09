"""The gateway's Pulsar link against a real ``georep cluster`` process: handshake and
lookup, pipelined sends with receipts in order, deduplication by sequence id across
producers, entries as stored (a batch stays one entry), flow control and cumulative
acknowledgements, and failure when the broker dies."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from georep.client.consumer import SubType
from georep.client.errors import LinkClosed, LinkError, ServerError
from georep.client.link import PulsarLink
from georep.runtime.awaiting import within
from georep.wire import batch, commands
from georep.wire import pulsar_wire_pb2 as pb
from tests.harness.broker_cluster import ClusterProcess, unique_topic
from tests.harness.gateway import produce

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[ClusterProcess]:
    process = ClusterProcess(tmp_path_factory.mktemp("link") / "cluster", name="L")
    process.start()
    yield process
    process.kill()


def metadata(sequence_id: int, **fields) -> pb.MessageMetadata:
    return pb.MessageMetadata(
        producer_name="georep.repl.X",
        sequence_id=sequence_id,
        highest_sequence_id=sequence_id,
        publish_time=int(time.time() * 1000),
        **fields,
    )


async def test_pipelined_sends_and_dedup_across_producers(cluster) -> None:
    topic = unique_topic("link")
    link = PulsarLink(cluster.url)
    try:
        producer = await link.create_producer(topic, "georep.repl.X")
        assert producer.last_sequence_id == -1
        futures = [await producer.send(metadata(i * 10), b"p%d" % i) for i in range(500)]
        receipts = await asyncio.gather(*futures)
        assert [r.sequence_id for r in receipts] == [i * 10 for i in range(500)]
        assert not any(r.duplicate for r in receipts)
        positions = [r.position for r in receipts]
        assert positions == sorted(positions)
        await producer.close()

        again = await link.create_producer(topic, "georep.repl.X")
        assert again.last_sequence_id == 4990
        resent = await (await again.send(metadata(4990), b"p499"))
        assert resent.duplicate
        newer = await (await again.send(metadata(4991), b"new"))
        assert not newer.duplicate
        await again.close()
    finally:
        await link.close()


async def test_a_batch_under_one_sequence_id_is_not_counted_n_times(cluster) -> None:
    """The replicator sends a stored batch of n under one id with highest_sequence_id
    equal to it: the next entry's id, one higher, must be stored."""
    topic = unique_topic("link-batch")
    payload, count = batch.build_batch(
        [(pb.SingleMessageMetadata(payload_size=0), b"m%d" % i) for i in range(10)]
    )
    link = PulsarLink(cluster.url)
    try:
        producer = await link.create_producer(topic, "georep.repl.X")
        first = await producer.send(
            metadata(100, num_messages_in_batch=count), payload, num_messages=count
        )
        second = await producer.send(metadata(101), b"single")
        assert not (await first).duplicate
        assert not (await second).duplicate
        consumer = await link.subscribe(topic, "reader", durable=False)
        entries = [await consumer.receive(), await consumer.receive()]
        assert [e.messages for e in entries] == [10, 1]
        assert entries[0].payload == payload  # as stored, not re-cut
        assert entries[0].metadata.sequence_id == 100
    finally:
        await link.close()


async def test_consumer_reads_entries_in_order_and_acks_cumulatively(cluster) -> None:
    topic = unique_topic("link-consume")
    await asyncio.to_thread(produce, cluster.url, topic, 300, "m", batching=False)
    link = PulsarLink(cluster.url)
    try:
        consumer = await link.subscribe(topic, "georep.repl.Y", receiver_queue=50)
        entries = [await consumer.receive() for _ in range(300)]
        assert [e.payload for e in entries] == [b"m-%d" % i for i in range(300)]
        assert await consumer.backlog() == 300
        consumer.ack_cumulative(entries[199].position)
        await consumer.ack_cumulative_durably(entries[199].position)
        assert await consumer.backlog() == 100
        await consumer.close()

        again = await link.subscribe(topic, "georep.repl.Y")
        first = await again.receive()
        assert first.payload == b"m-200"
        await again.unsubscribe()
    finally:
        await link.close()


async def test_exclusive_subscription_refuses_a_second_consumer(cluster) -> None:
    topic = unique_topic("link-exclusive")
    link = PulsarLink(cluster.url)
    try:
        await link.subscribe(topic, "georep.repl.Z")
        with pytest.raises(ServerError) as caught:
            await link.subscribe(topic, "georep.repl.Z")
        assert caught.value.code == pb.CONSUMER_BUSY
        assert caught.value.retriable
    finally:
        await link.close()


async def test_lookup_of_a_missing_namespace_fails_clearly(cluster) -> None:
    link = PulsarLink(cluster.url)
    try:
        with pytest.raises(ServerError):
            await link.create_producer("persistent://nobody/nothing/x", "georep.repl.X")
    finally:
        await link.close()


async def test_unreachable_broker_is_a_link_error() -> None:
    from tests.harness.broker_cluster import free_port

    link = PulsarLink(f"pulsar://127.0.0.1:{free_port()}", connect_timeout_s=2)
    with pytest.raises(LinkError):
        await link.create_producer(unique_topic(), "georep.repl.X")
    await link.close()


async def test_pending_sends_fail_when_the_broker_dies(tmp_path) -> None:
    cluster = ClusterProcess(tmp_path / "dying", name="D")
    cluster.start()
    link = PulsarLink(cluster.url)
    try:
        producer = await link.create_producer(unique_topic("dying"), "georep.repl.X")
        futures = [await producer.send(metadata(i), b"x" * 1024) for i in range(200)]
        cluster.kill()
        outcomes = await asyncio.gather(*futures, return_exceptions=True)
        failed = [o for o in outcomes if isinstance(o, BaseException)]
        assert all(isinstance(o, LinkClosed) for o in failed)
        with pytest.raises(LinkError):
            for i in range(200, 10_000):  # the failure shows at the latest on the next send
                await producer.send(metadata(i), b"x")
                await asyncio.sleep(0)
    finally:
        await link.close()
        cluster.kill()


async def test_a_subscribe_given_up_on_never_holds_the_exclusive_subscription(cluster) -> None:
    """SUBSCRIBE and CLOSE_CONSUMER in one write, as a client that gave up sends them:
    the close reaches the broker while it still loads the topic and creates the
    consumer, which must then not stay attached (the retry, from another link here,
    would meet "already has a consumer")."""
    topics = [unique_topic("given-up") for _ in range(10)]
    giving_up, retrying = PulsarLink(cluster.url), PulsarLink(cluster.url)
    try:
        for consumer_id, topic in enumerate(topics, start=1):
            connection = await giving_up.lookup(topic)
            subscribe = commands.build(
                commands.Type.SUBSCRIBE,
                topic=topic,
                subscription="georep.repl.X",
                sub_type=SubType.EXCLUSIVE,
                consumer_id=consumer_id,
                request_id=connection.next_request_id(),
            )
            connection.abandon(subscribe)  # queued: both go out in one write
            connection.abandon(commands.close_consumer(consumer_id, connection.next_request_id()))
        await asyncio.sleep(1)
        for topic in topics:
            consumer = await within(retrying.subscribe(topic, "georep.repl.X"), 30)
            await consumer.close()
    finally:
        await giving_up.close()
        await retrying.close()
