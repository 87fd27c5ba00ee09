"""Shared and Key_Shared subscriptions, negative acks, ack-timeout redelivery, seek, last
message id and partitioned topics, with the official pulsar-client."""

from __future__ import annotations

import collections
import time
from collections.abc import Iterator

import pulsar
import pytest

from georep.broker.errors import TopicExists
from georep.broker.hash_ranges import key_hash
from tests.harness.broker_cluster import (
    InProcessCluster,
    open_client,
    receive_all,
    receive_none,
    service_of,
    unique_topic,
)

pytestmark = pytest.mark.timeout(120)

EARLIEST = pulsar.InitialPosition.Earliest
SHARED = pulsar.ConsumerType.Shared
KEY_SHARED = pulsar.ConsumerType.KeyShared


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[InProcessCluster]:
    running = InProcessCluster(tmp_path_factory.mktemp("broker") / "cluster").start()
    yield running
    running.stop()
    assert running.errors == []


def drain(consumers, expected: int, *, ack: bool = True) -> dict[int, list[pulsar.Message]]:
    """Receive ``expected`` messages in total from ``consumers`` (polled in turn)."""
    got: dict[int, list[pulsar.Message]] = collections.defaultdict(list)
    deadline = time.monotonic() + 20
    total = 0
    while total < expected:
        assert time.monotonic() < deadline, f"only {total} of {expected} messages arrived"
        for index, consumer in enumerate(consumers):
            try:
                message = consumer.receive(timeout_millis=50)
            except pulsar.Timeout:
                continue
            if ack:
                consumer.acknowledge(message)
            got[index].append(message)
            total += 1
    return got


def test_shared_spreads_and_redelivers_what_a_closed_consumer_held(
    cluster: InProcessCluster,
) -> None:
    topic = unique_topic()
    with open_client(cluster.url) as client:
        producer = client.create_producer(topic)
        consumers = [
            client.subscribe(
                topic, "s", consumer_type=SHARED, initial_position=EARLIEST, receiver_queue_size=10
            )
            for _ in range(3)
        ]
        for n in range(60):
            producer.send(f"m{n}".encode())
        got = drain(consumers, 30)
        assert len(got) >= 2  # spread over several consumers
        # consumer 0 takes more messages and closes without acking them
        held = []
        for _ in range(3):
            try:
                held.append(consumers[0].receive(timeout_millis=200))
            except pulsar.Timeout:
                break
        consumers[0].close()
        rest = drain(consumers[1:], 60 - 30)
        delivered = [m.data() for ms in got.values() for m in ms]
        delivered += [m.data() for ms in rest.values() for m in ms]
        assert sorted(delivered) == sorted(f"m{n}".encode() for n in range(60))
        redelivered = [m for ms in rest.values() for m in ms if m.redelivery_count() > 0]
        assert {m.data() for m in held} <= {m.data() for m in redelivered}
        for consumer in consumers[1:]:
            assert receive_none(consumer, 200) == []
            consumer.close()
        producer.close()


def test_changing_the_type_redelivers_what_was_unacked(cluster: InProcessCluster) -> None:
    topic = unique_topic()
    with open_client(cluster.url) as client:
        producer = client.create_producer(topic)
        exclusive = client.subscribe(topic, "s", initial_position=EARLIEST)
        for n in range(6):
            producer.send(f"m{n}".encode())
        got = receive_all(exclusive, 6, ack=False)
        for message in got[:3]:
            exclusive.acknowledge(message)
        exclusive.close()
        shared = client.subscribe(topic, "s", consumer_type=SHARED)  # the type changes
        assert sorted(m.data() for m in receive_all(shared, 3)) == [b"m3", b"m4", b"m5"]
        assert receive_none(shared) == []
        shared.close()
        producer.close()


def test_unsubscribe_needs_the_last_consumer(cluster: InProcessCluster) -> None:
    topic = unique_topic()
    with open_client(cluster.url) as client:
        first = client.subscribe(topic, "s", consumer_type=SHARED)
        second = client.subscribe(topic, "s", consumer_type=SHARED)
        with pytest.raises(pulsar.PulsarException):
            first.unsubscribe()  # another consumer is attached
        second.close()
        first.unsubscribe()


def test_shared_refuses_cumulative_ack(cluster: InProcessCluster) -> None:
    topic = unique_topic()
    with open_client(cluster.url) as client:
        producer = client.create_producer(topic)
        consumer = client.subscribe(topic, "s", consumer_type=SHARED, initial_position=EARLIEST)
        producer.send(b"x")
        message = consumer.receive(timeout_millis=5000)
        with pytest.raises(pulsar.PulsarException):
            consumer.acknowledge_cumulative(message)  # the client refuses it itself
        consumer.close()
        producer.close()


def test_negative_ack_redelivers_after_the_delay(cluster: InProcessCluster) -> None:
    topic = unique_topic()
    with open_client(cluster.url) as client:
        producer = client.create_producer(topic)
        consumer = client.subscribe(
            topic,
            "s",
            consumer_type=SHARED,
            initial_position=EARLIEST,
            negative_ack_redelivery_delay_ms=200,
        )
        for n in range(5):
            producer.send(f"m{n}".encode())
        messages = receive_all(consumer, 5, ack=False)
        consumer.negative_acknowledge(messages[1])
        consumer.negative_acknowledge(messages[3])
        for n in (0, 2, 4):
            consumer.acknowledge(messages[n])
        again = receive_all(consumer, 2)
        assert sorted(m.data() for m in again) == [b"m1", b"m3"]
        assert all(m.redelivery_count() == 1 for m in again)
        assert receive_none(consumer) == []
        consumer.close()
        producer.close()


def test_negative_ack_on_exclusive_redelivers_in_order(cluster: InProcessCluster) -> None:
    topic = unique_topic()
    with open_client(cluster.url) as client:
        producer = client.create_producer(topic)
        consumer = client.subscribe(
            topic, "s", initial_position=EARLIEST, negative_ack_redelivery_delay_ms=200
        )
        for n in range(4):
            producer.send(f"m{n}".encode())
        messages = receive_all(consumer, 4, ack=False)
        consumer.acknowledge(messages[0])
        consumer.negative_acknowledge(messages[2])
        consumer.acknowledge(messages[1])
        consumer.acknowledge(messages[3])
        again = receive_all(consumer, 1)
        assert again[0].data() == b"m2" and again[0].redelivery_count() >= 1
        consumer.close()
        producer.close()


def test_ack_timeout_redelivers(cluster: InProcessCluster) -> None:
    topic = unique_topic()
    with open_client(cluster.url) as client:
        producer = client.create_producer(topic)
        consumer = client.subscribe(
            topic,
            "s",
            consumer_type=SHARED,
            initial_position=EARLIEST,
            unacked_messages_timeout_ms=10_000,
        )
        producer.send(b"slow")
        first = consumer.receive(timeout_millis=5000)
        second = consumer.receive(timeout_millis=20_000)  # not acked: comes back
        assert first.data() == second.data() == b"slow"
        assert second.redelivery_count() >= 1
        consumer.acknowledge(second)
        consumer.close()
        producer.close()


def test_key_shared_keeps_each_key_on_one_consumer_in_order(cluster: InProcessCluster) -> None:
    topic = unique_topic()
    with open_client(cluster.url) as client:
        producer = client.create_producer(topic)
        consumers = [
            client.subscribe(topic, "s", consumer_type=KEY_SHARED, initial_position=EARLIEST)
            for _ in range(3)
        ]
        keys = [f"key-{k}" for k in range(12)]
        for n in range(120):
            producer.send(f"{keys[n % 12]}:{n}".encode(), partition_key=keys[n % 12])
        got = drain(consumers, 120)
        owner: dict[str, int] = {}
        for index, messages in got.items():
            last_seen: dict[str, int] = {}
            for message in messages:
                key, n = message.data().decode().split(":")
                assert owner.setdefault(key, index) == index, f"{key} on two consumers"
                assert int(n) > last_seen.get(key, -1), f"{key} out of order"
                last_seen[key] = int(n)
        assert len(set(owner.values())) >= 2
        for consumer in consumers:
            consumer.close()
        producer.close()


def test_key_shared_order_survives_a_consumer_leaving_and_joining(
    cluster: InProcessCluster,
) -> None:
    topic = unique_topic()
    with open_client(cluster.url) as client:
        producer = client.create_producer(topic)
        keys = [f"key-{k}" for k in range(8)]
        first = client.subscribe(
            topic, "s", consumer_type=KEY_SHARED, initial_position=EARLIEST, receiver_queue_size=5
        )
        second = client.subscribe(topic, "s", consumer_type=KEY_SHARED, receiver_queue_size=5)
        for n in range(40):
            producer.send(f"{keys[n % 8]}:{n}".encode(), partition_key=keys[n % 8])
        seen: list[str] = []
        for message in drain([first, second], 10).values():
            seen += [m.data().decode() for m in message]
        second.close()  # what it held unacked goes back, before newer entries of its keys
        third = client.subscribe(topic, "s", consumer_type=KEY_SHARED, receiver_queue_size=5)
        for n in range(40, 80):
            producer.send(f"{keys[n % 8]}:{n}".encode(), partition_key=keys[n % 8])
        rest = drain([first, third], 70, ack=True)
        for messages in rest.values():
            last: dict[str, int] = {}
            for message in messages:
                key, n = message.data().decode().split(":")
                if message.redelivery_count() == 0:
                    assert int(n) > last.get(key, -1), f"{key} out of order"
                last[key] = max(last.get(key, -1), int(n))
        delivered = {m for m in seen} | {m.data().decode() for ms in rest.values() for m in ms}
        assert len(delivered) == 80
        first.close()
        third.close()
        producer.close()


def test_key_shared_sticky_ranges(cluster: InProcessCluster) -> None:
    topic = unique_topic()
    sticky = pulsar.KeySharedMode.Sticky
    with open_client(cluster.url) as client:
        low = client.subscribe(
            topic,
            "s",
            consumer_type=KEY_SHARED,
            initial_position=EARLIEST,
            key_shared_policy=pulsar.ConsumerKeySharedPolicy(sticky, sticky_ranges=[(0, 32767)]),
        )
        with pytest.raises(pulsar.PulsarException):  # overlaps the first consumer's range
            client.subscribe(
                topic,
                "s",
                consumer_type=KEY_SHARED,
                key_shared_policy=pulsar.ConsumerKeySharedPolicy(
                    sticky, sticky_ranges=[(30000, 40000)]
                ),
            )
        high = client.subscribe(
            topic,
            "s",
            consumer_type=KEY_SHARED,
            key_shared_policy=pulsar.ConsumerKeySharedPolicy(
                sticky, sticky_ranges=[(32768, 65535)]
            ),
        )
        producer = client.create_producer(topic)
        for n in range(40):
            producer.send(f"{n}".encode(), partition_key=f"key-{n}")
        got = drain([low, high], 40)
        for index, messages in got.items():
            for message in messages:
                hashed = key_hash(message.partition_key().encode())
                assert (hashed < 32768) == (index == 0), message.partition_key()
        for consumer in (low, high):
            consumer.close()
        producer.close()


def test_seek_by_message_id_and_by_time(cluster: InProcessCluster) -> None:
    topic = unique_topic()
    with open_client(cluster.url) as client:
        producer = client.create_producer(topic)
        consumer = client.subscribe(topic, "s", initial_position=EARLIEST)
        ids = [producer.send(f"m{n}".encode()) for n in range(6)]
        time.sleep(0.05)
        middle_ms = int(time.time() * 1000)  # between m5 and m6
        time.sleep(0.05)
        ids += [producer.send(f"m{n}".encode()) for n in range(6, 10)]
        receive_all(consumer, 10)
        consumer.seek(ids[3])  # the client resumes after the id it sought
        got = [m.data() for m in receive_all(consumer, 6)]
        assert got == [f"m{n}".encode() for n in range(4, 10)]
        consumer.seek(middle_ms)
        got = [m.data() for m in receive_all(consumer, 4)]
        assert got == [f"m{n}".encode() for n in range(6, 10)]
        consumer.seek(pulsar.MessageId.earliest)
        assert next(m.data() for m in receive_all(consumer, 10)) == b"m0"
        consumer.close()
        producer.close()


def test_last_message_id_and_reader(cluster: InProcessCluster) -> None:
    topic = unique_topic()
    with open_client(cluster.url) as client:
        consumer = client.subscribe(topic, "s", initial_position=EARLIEST)
        empty = consumer.get_last_message_id()
        assert empty.entry_id() == -1
        producer = client.create_producer(
            topic,
            batching_enabled=True,
            batching_max_messages=3,
            batching_max_publish_delay_ms=1000,
        )
        for n in range(3):
            producer.send_async(f"m{n}".encode(), lambda *_: None)
        producer.flush()
        last = consumer.get_last_message_id()
        assert last.batch_index() == 2
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        got = []
        while reader.has_message_available():
            got.append(reader.read_next(timeout_millis=5000).data())
        assert got == [b"m0", b"m1", b"m2"]
        reader.close()
        consumer.close()
        producer.close()


def test_partitioned_topic(cluster: InProcessCluster) -> None:
    topic = unique_topic("parted")
    cluster.call(lambda c: service_of(c).create_partitioned_topic(topic, 3))
    with open_client(cluster.url) as client:
        assert client.get_topic_partitions(topic) == [f"{topic}-partition-{n}" for n in range(3)]
        consumer = client.subscribe(topic, "s", consumer_type=SHARED, initial_position=EARLIEST)
        producer = client.create_producer(
            topic, message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution
        )
        for n in range(30):
            producer.send(f"m{n}".encode(), partition_key=f"k{n}")
        got = receive_all(consumer, 30)
        assert sorted(m.data() for m in got) == sorted(f"m{n}".encode() for n in range(30))
        assert {m.topic_name() for m in got} == {f"{topic}-partition-{n}" for n in range(3)}
        assert receive_none(consumer) == []
        consumer.close()
        producer.close()
        with pytest.raises(pulsar.PulsarException):
            client.create_producer(f"{topic}-partition-3")  # beyond the partitions


def test_a_topic_created_shows_in_its_namespace_at_once_and_stays_non_partitioned(
    cluster: InProcessCluster,
) -> None:
    topic = unique_topic("plain")
    namespace = topic.removeprefix("persistent://").rpartition("/")[0]
    listed_before = cluster.call(lambda c: service_of(c).topics_of_namespace(namespace))
    assert topic not in listed_before  # the listing is held now
    with open_client(cluster.url) as client:
        client.create_producer(topic).close()
    assert topic in cluster.call(lambda c: service_of(c).topics_of_namespace(namespace))
    with pytest.raises(TopicExists):
        cluster.call(lambda c: service_of(c).create_partitioned_topic(topic, 2))
