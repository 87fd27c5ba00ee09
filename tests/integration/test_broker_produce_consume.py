"""The official pulsar-client against the embedded broker: produce and consume.

One in-process cluster (three bookies, SQLite) serves the module; each test uses its own
topic. Covers: the handshake and lookups, unbatched and batched publishing, Exclusive
and Failover subscriptions, individual (out of order) and cumulative acknowledgements,
redelivery to a reconnecting consumer, unsubscribe, and that nothing acknowledged is
delivered again.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pulsar
import pytest

from georep.domain.topic_name import TopicName
from georep.wire.commands import Type
from tests.harness.broker_cluster import (
    InProcessCluster,
    RawConnection,
    connect_frame,
    open_client,
    producer_frame,
    receive_all,
    receive_none,
    send_frame,
    unique_topic,
)
from tests.harness.waiting import wait_for

pytestmark = pytest.mark.timeout(120)

EARLIEST = pulsar.InitialPosition.Earliest


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[InProcessCluster]:
    running = InProcessCluster(tmp_path_factory.mktemp("broker") / "cluster").start()
    yield running
    running.stop()
    assert running.errors == []


def mdp(cluster: InProcessCluster, topic: str, subscription: str):
    """The subscription's persisted mark-delete position, as the broker holds it."""

    def read(c):
        loaded = c.service.loaded_topic(TopicName.parse(topic))
        return tuple(loaded.ledger.cursors[subscription].mark_delete_position)

    return cluster.call(read)


def acknowledged(cluster: InProcessCluster, topic: str, subscription: str, messages) -> list[bool]:
    """Whether the broker's cursor holds each message as acknowledged."""
    from georep.storage.managed_ledger import Position

    def read(c):
        cursor = c.service.loaded_topic(TopicName.parse(topic)).ledger.cursors[subscription]
        return [
            cursor.is_acknowledged(Position(m.message_id().ledger_id(), m.message_id().entry_id()))
            for m in messages
        ]

    return cluster.call(read)


def test_unbatched_round_trip_keeps_order_and_properties(cluster: InProcessCluster) -> None:
    topic = unique_topic()
    with open_client(cluster.url) as client:
        consumer = client.subscribe(topic, "s", initial_position=EARLIEST)
        producer = client.create_producer(topic)
        ids = [
            producer.send(f"m{n}".encode(), properties={"n": str(n)}, partition_key=f"k{n}")
            for n in range(20)
        ]
        messages = receive_all(consumer, 20)
        assert [m.data() for m in messages] == [f"m{n}".encode() for n in range(20)]
        assert [m.properties() for m in messages] == [{"n": str(n)} for n in range(20)]
        assert [m.partition_key() for m in messages] == [f"k{n}" for n in range(20)]
        assert [str(m.message_id()) for m in messages] == [str(i) for i in ids]
        assert all(m.redelivery_count() == 0 for m in messages)
        assert receive_none(consumer) == []
        consumer.close()
        producer.close()


def test_batched_publish_is_one_entry_per_batch(cluster: InProcessCluster) -> None:
    topic = unique_topic()
    with open_client(cluster.url) as client:
        consumer = client.subscribe(topic, "s", initial_position=EARLIEST)
        producer = client.create_producer(
            topic,
            batching_enabled=True,
            batching_max_messages=10,
            batching_max_publish_delay_ms=50,
        )
        done = threading.Semaphore(0)
        for n in range(30):
            producer.send_async(f"b{n}".encode(), lambda *_: done.release())
        producer.flush()
        for _ in range(30):
            assert done.acquire(timeout=10)
        messages = receive_all(consumer, 30)
        assert [m.data() for m in messages] == [f"b{n}".encode() for n in range(30)]
        entries = {(m.message_id().ledger_id(), m.message_id().entry_id()) for m in messages}
        assert len(entries) < 30  # batched: several messages share an entry
        assert {m.message_id().batch_index() for m in messages} != {-1}
        consumer.close()
        producer.close()


def test_exclusive_refuses_a_second_consumer(cluster: InProcessCluster) -> None:
    topic = unique_topic()
    with open_client(cluster.url) as client:
        first = client.subscribe(topic, "s")
        with pytest.raises(pulsar.ConsumerBusy):
            client.subscribe(topic, "s")
        with pytest.raises(pulsar.ConsumerBusy):  # another type while consumers are on
            client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared)
        first.close()
        second = client.subscribe(topic, "s")  # free again
        second.close()


def test_out_of_order_acks_redeliver_only_the_unacked(cluster: InProcessCluster) -> None:
    topic = unique_topic()
    with open_client(cluster.url) as client:
        producer = client.create_producer(topic)
        consumer = client.subscribe(topic, "s", initial_position=EARLIEST)
        for n in range(10):
            producer.send(f"m{n}".encode())
        messages = receive_all(consumer, 10, ack=False)
        for n in (9, 7, 1, 2, 4):
            consumer.acknowledge(messages[n])
        consumer.close()  # returns once the broker persisted the acks
        assert acknowledged(cluster, topic, "s", messages) == [
            n in (9, 7, 1, 2, 4) for n in range(10)
        ]
        assert mdp(cluster, topic, "s")[1] == messages[0].message_id().entry_id() - 1
        consumer = client.subscribe(topic, "s")
        again = receive_all(consumer, 5)
        assert [m.data() for m in again] == [b"m0", b"m3", b"m5", b"m6", b"m8"]
        assert all(m.redelivery_count() >= 1 for m in again)
        assert receive_none(consumer) == []
        consumer.close()
        producer.close()


def test_cumulative_ack(cluster: InProcessCluster) -> None:
    topic = unique_topic()
    with open_client(cluster.url) as client:
        producer = client.create_producer(topic)
        consumer = client.subscribe(topic, "s", initial_position=EARLIEST)
        for n in range(10):
            producer.send(f"m{n}".encode())
        messages = receive_all(consumer, 10, ack=False)
        consumer.acknowledge_cumulative(messages[6])
        consumer.close()
        assert mdp(cluster, topic, "s")[1] == messages[6].message_id().entry_id()
        consumer = client.subscribe(topic, "s")
        assert [m.data() for m in receive_all(consumer, 3)] == [b"m7", b"m8", b"m9"]
        assert receive_none(consumer) == []
        consumer.close()
        producer.close()


@pytest.mark.parametrize("batch_index_ack", [False, True])
def test_batch_members_acked_one_by_one(cluster: InProcessCluster, batch_index_ack: bool) -> None:
    topic = unique_topic()
    with open_client(cluster.url) as client:
        producer = client.create_producer(
            topic,
            batching_enabled=True,
            batching_max_messages=5,
            batching_max_publish_delay_ms=1000,
        )
        for n in range(5):
            producer.send_async(f"b{n}".encode(), lambda *_: None)
        producer.flush()
        consumer = client.subscribe(
            topic, "s", initial_position=EARLIEST, batch_index_ack_enabled=batch_index_ack
        )
        messages = receive_all(consumer, 5, ack=False)
        assert len({(m.message_id().ledger_id(), m.message_id().entry_id()) for m in messages}) == 1
        for n in (0, 2, 4):
            consumer.acknowledge(messages[n])
        consumer.close()
        consumer = client.subscribe(topic, "s", batch_index_ack_enabled=batch_index_ack)
        again = [m.data() for m in receive_all(consumer, 2 if batch_index_ack else 5)]
        # With batch-index acks the broker knows members 0, 2 and 4 are done and says so
        # in ack_set; without them the client acks the entry only when all are done.
        assert again == (
            [b"b1", b"b3"] if batch_index_ack else [f"b{n}".encode() for n in range(5)]
        )
        assert receive_none(consumer) == []
        consumer.close()
        consumer = client.subscribe(topic, "s", batch_index_ack_enabled=batch_index_ack)
        if batch_index_ack:
            assert receive_none(consumer) == []  # the entry is deleted on the cursor
        consumer.close()
        producer.close()


def test_failover_switches_the_active_consumer(cluster: InProcessCluster) -> None:
    topic = unique_topic()
    with open_client(cluster.url) as client:
        producer = client.create_producer(topic)
        first = client.subscribe(
            topic,
            "s",
            consumer_type=pulsar.ConsumerType.Failover,
            consumer_name="a",
            initial_position=EARLIEST,
        )
        second = client.subscribe(
            topic, "s", consumer_type=pulsar.ConsumerType.Failover, consumer_name="b"
        )
        for n in range(6):
            producer.send(f"m{n}".encode())
        got = receive_all(first, 3)
        assert [m.data() for m in got] == [b"m0", b"m1", b"m2"]
        assert receive_none(second) == []  # the standby gets nothing
        first.close()
        rest = receive_all(second, 3)
        assert [m.data() for m in rest] == [b"m3", b"m4", b"m5"]
        second.close()
        producer.close()


def test_unsubscribe_forgets_the_subscription(cluster: InProcessCluster) -> None:
    topic = unique_topic()
    with open_client(cluster.url) as client:
        producer = client.create_producer(topic)
        consumer = client.subscribe(topic, "s", initial_position=EARLIEST)
        producer.send(b"old")
        receive_all(consumer, 1, ack=False)
        consumer.unsubscribe()
        producer.send(b"new")
        consumer = client.subscribe(topic, "s")  # latest: a new subscription
        producer.send(b"newer")
        assert [m.data() for m in receive_all(consumer, 1)] == [b"newer"]
        consumer.close()
        producer.close()


def test_producer_names_are_unique_per_topic(cluster: InProcessCluster) -> None:
    topic = unique_topic()
    with open_client(cluster.url) as client:
        producer = client.create_producer(topic, producer_name="only-one")
        with pytest.raises(pulsar.ProducerBusy):
            client.create_producer(topic, producer_name="only-one")
        producer.close()
        client.create_producer(topic, producer_name="only-one").close()


def test_exclusive_producer_access(cluster: InProcessCluster) -> None:
    topic = unique_topic()
    with open_client(cluster.url) as client:
        exclusive = client.create_producer(topic, access_mode=pulsar.ProducerAccessMode.Exclusive)
        with pytest.raises(pulsar.PulsarException):
            client.create_producer(topic)
        exclusive.close()
        shared = client.create_producer(topic)
        with pytest.raises(pulsar.PulsarException):
            client.create_producer(topic, access_mode=pulsar.ProducerAccessMode.Exclusive)
        shared.close()


def test_unknown_namespace_and_bad_names_fail_fast(cluster: InProcessCluster) -> None:
    with open_client(cluster.url) as client:
        with pytest.raises(pulsar.TopicNotFound):
            client.create_producer("persistent://nobody/nowhere/t")
        with pytest.raises(pulsar.PulsarException):
            client.create_producer("persistent://public/default/a/b")


def test_markers_are_not_dispatched_and_never_hold_back_the_mdp(cluster: InProcessCluster) -> None:
    """Markers (replication snapshots) between messages: an application's consumer never
    sees them (the gateway's do: ``test_broker_sync.py``); a lagging subscription gets no
    holes for them; once the messages before a marker are acknowledged the mark-delete
    position moves over it."""
    topic = unique_topic("markers")
    layout = [b"m0", None, b"m1", None, None, b"m2", None]  # None: a marker entry
    with open_client(cluster.url) as client:
        consumer = client.subscribe(topic, "s", initial_position=EARLIEST)
        raw = RawConnection(cluster.url)
        # Only the gateway's producers (georep.*) may publish markers.
        raw.send(connect_frame() + producer_frame(topic, name="georep.repl.test"))
        opened, _ = raw.replies()
        assert [c.type for c in opened] == [Type.CONNECTED, Type.PRODUCER_SUCCESS]
        frames_out = b"".join(
            send_frame(1, n, payload or b"", marker_type=None if payload else 1)
            for n, payload in enumerate(layout)
        )
        raw.send(frames_out)
        receipts: list = []

        def seven_receipts() -> bool:
            receipts.extend(raw.replies(0.1)[0])
            return len(receipts) >= 7

        wait_for(seven_receipts)
        raw.close()
        positions = [
            (c.send_receipt.message_id.ledger_id, c.send_receipt.message_id.entry_id)
            for c in receipts
            if c.type == Type.SEND_RECEIPT
        ]
        assert len(positions) == 7
        got = receive_all(consumer, 3, ack=False)
        assert [m.data() for m in got] == [b"m0", b"m1", b"m2"]
        assert receive_none(consumer) == []
        last = consumer.get_last_message_id()  # the last message, not the trailing marker
        assert (last.ledger_id(), last.entry_id()) == positions[5]
        consumer.acknowledge(got[1])
        consumer.acknowledge(got[2])
        consumer.close()
        marker_positions = [p for p, payload in zip(positions, layout, strict=True) if not payload]
        held = acknowledged_positions(cluster, topic, "s", marker_positions + positions[:1])
        assert held == [False] * 5, "a marker was acknowledged out of order (a hole)"
        consumer = client.subscribe(topic, "s")
        (again,) = receive_all(consumer, 1)
        assert again.data() == b"m0"
        consumer.close()
        wait_for(lambda: mdp(cluster, topic, "s") == positions[-1])


def acknowledged_positions(cluster: InProcessCluster, topic: str, subscription: str, positions):
    from georep.storage.managed_ledger import Position

    def read(c):
        cursor = c.service.loaded_topic(TopicName.parse(topic)).ledger.cursors[subscription]
        return [cursor.is_acknowledged(Position(*p)) for p in positions]

    return cluster.call(read)


class CountingForwarder:
    """A TCP forwarder on its own port to the broker (a published container port, say),
    counting the bytes it carries from the client."""

    def __init__(self, target_port: int) -> None:
        import socket

        self.target_port = target_port
        self.bytes_from_client = 0
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        import socket

        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            threading.Thread(target=self._pipe, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, False), daemon=True).start()

    def _pipe(self, source, sink, counted: bool) -> None:
        try:
            while data := source.recv(65536):
                if counted:
                    self.bytes_from_client += len(data)
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                try:
                    sock.close()
                except OSError:
                    pass

    def close(self) -> None:
        self.server.close()


def test_a_client_keeps_using_the_address_it_connected_to(cluster):
    """Lookups answer 'connect through the service URL': a client that reached the
    broker through another address (a published port, a NAT) sends its data there,
    not to the broker's own listening address, which may not be reachable from it."""
    port = int(cluster.url.rsplit(":", 1)[1])
    forwarder = CountingForwarder(port)
    topic = unique_topic()
    payload = b"x" * 10_000
    try:
        with open_client(f"pulsar://127.0.0.1:{forwarder.port}") as c:
            consumer = c.subscribe(topic, "s", initial_position=EARLIEST)
            producer = c.create_producer(topic, batching_enabled=False)
            for _ in range(20):
                producer.send(payload)
            assert [m.data() for m in receive_all(consumer, 20)] == [payload] * 20
    finally:
        forwarder.close()
    assert forwarder.bytes_from_client > 20 * len(payload)
