"""Protocol fuzz against a live broker: malformed, oversized and mutated frames.

Every case must end in an error reply or a closed connection, never in a crashed broker
(the loop's exception handler sees nothing) or a touched topic: the victim topic's last
entry and its subscription's mark-delete position are the same afterwards, and a real
client still produces and consumes. Random cases print their seed on failure.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Iterator

import pulsar
import pytest

from georep import limits
from georep.domain.topic_name import TopicName
from georep.wire import commands, frames
from georep.wire import pulsar_wire_pb2 as pb
from georep.wire.commands import Type
from tests.harness.broker_cluster import (
    InProcessCluster,
    RawConnection,
    connect_frame,
    open_client,
    producer_frame,
    receive_all,
    send_frame,
)

pytestmark = pytest.mark.timeout(180)

SEED = 4242


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[InProcessCluster]:
    running = InProcessCluster(tmp_path_factory.mktemp("fuzz") / "cluster").start()
    yield running
    running.stop()
    assert running.errors == []


@pytest.fixture(scope="module")
def victim(cluster: InProcessCluster) -> str:
    topic = "persistent://public/default/victim"
    with open_client(cluster.url) as client:
        consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
        producer = client.create_producer(topic)
        for n in range(5):
            producer.send(f"m{n}".encode())
        receive_all(consumer, 2)
        consumer.close()
        producer.close()
    return topic


def state_of(cluster: InProcessCluster, topic: str):
    def read(c):
        loaded = c.service.loaded_topic(TopicName.parse(topic))
        return loaded.ledger.last_confirmed, loaded.ledger.cursors["s"].mark_delete_position

    return cluster.call(read)


def test_oversized_frame_closes(cluster: InProcessCluster, victim: str) -> None:
    raw = RawConnection(cluster.url)
    raw.send(connect_frame() + struct.pack(">I", limits.pulsar_frame_bytes_max + 1) + b"\x00" * 64)
    got, closed = raw.replies()
    assert [c.type for c in got] == [Type.CONNECTED]
    assert closed
    raw.close()


@pytest.mark.parametrize(
    "garbage",
    [
        b"\x00\x00\x00\x00",  # a frame too small for its command size
        b"\x00\x00\x00\x08\x00\x00\x00\x10" + b"\x00" * 8,  # command size beyond the frame
        b"\x00\x00\x00\x06\x00\x00\x00\x02\xff\xff",  # a command that does not parse
        frames.encode_command(commands.success(1)),  # a broker-to-client command
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",  # the wrong protocol
    ],
)
def test_malformed_frames_close(cluster: InProcessCluster, victim: str, garbage: bytes) -> None:
    raw = RawConnection(cluster.url)
    raw.send(connect_frame() + garbage)
    got, closed = raw.replies()
    assert closed, got
    raw.close()


def test_bad_sends_get_errors_and_store_nothing(cluster: InProcessCluster, victim: str) -> None:
    before = state_of(cluster, victim)
    raw = RawConnection(cluster.url)
    raw.send(connect_frame() + producer_frame(victim))
    got, closed = raw.replies()
    assert [c.type for c in got] == [Type.CONNECTED, Type.PRODUCER_SUCCESS] and not closed
    corrupt = bytearray(send_frame(1, 100))
    corrupt[-1] ^= 0x01  # the payload no longer matches its CRC32C
    overrun = bytearray(send_frame(1, 101, b"p"))
    metadata = pb.MessageMetadata(producer_name="", sequence_id=101, publish_time=1)
    size_at = len(overrun) - 1 - len(metadata.SerializeToString()) - 4
    struct.pack_into(">I", overrun, size_at, 0xFFFF)  # metadata size beyond the frame
    raw.send(bytes(corrupt) + bytes(overrun))
    got, closed = raw.replies()
    assert [(c.type, c.send_error.sequence_id) for c in got] == [
        (Type.SEND_ERROR, 100),
        (Type.SEND_ERROR, 101),
    ]
    assert got[0].send_error.error == pb.CHECKSUM_ERROR and not closed
    raw.send(send_frame(2, 102))  # a producer this connection does not have
    got, closed = raw.replies()
    assert closed
    raw.close()
    assert state_of(cluster, victim) == before


def test_bogus_acks_touch_nothing(cluster: InProcessCluster, victim: str) -> None:
    before = state_of(cluster, victim)
    raw = RawConnection(cluster.url)
    subscribe = commands.build(
        Type.SUBSCRIBE,
        topic=victim,
        subscription="s",
        sub_type=pb.Subscribe.EXCLUSIVE,
        consumer_id=1,
        request_id=2,
    )
    raw.send(connect_frame() + frames.encode_command(subscribe))
    got, _ = raw.replies()
    assert [c.type for c in got] == [Type.CONNECTED, Type.SUCCESS]
    for ids in ([(2**64 - 1, 0)], [(10**12, 5)], [(before[0][0], 10**9)], [(0, 0)]):
        for ack_type in (pb.Ack.INDIVIDUAL, pb.Ack.CUMULATIVE):
            ack = commands.build(
                Type.ACK,
                consumer_id=1,
                ack_type=ack_type,
                message_id=[pb.MessageIdData(ledger_id=l_id, entry_id=e_id) for l_id, e_id in ids],
                request_id=7,
            )
            raw.send(frames.encode_command(ack))
    got, closed = raw.replies()
    assert not closed and all(c.type == Type.ACK_RESPONSE for c in got)
    close = commands.build(Type.CLOSE_CONSUMER, consumer_id=1, request_id=9)
    raw.send(frames.encode_command(close))
    raw.replies()
    raw.close()
    assert state_of(cluster, victim) == before


def test_mutated_sessions(cluster: InProcessCluster, victim: str) -> None:
    before = state_of(cluster, victim)
    session = (
        connect_frame()
        + frames.encode_command(commands.build(Type.LOOKUP, topic=victim, request_id=1))
        + frames.encode_command(commands.ping())
        + frames.encode_command(
            commands.build(Type.GET_TOPICS_OF_NAMESPACE, namespace="public/default", request_id=3)
        )
    )
    rng = random.Random(SEED)
    for case in range(150):
        mutated = bytearray(session)
        for _ in range(rng.randint(1, 4)):
            position = rng.randrange(len(mutated))
            mutated[position] = rng.randrange(256)
        if rng.random() < 0.2:
            del mutated[rng.randrange(len(mutated)) :]
        raw = RawConnection(cluster.url)
        raw.send(bytes(mutated))
        raw.replies(0.05)
        raw.close()
        assert cluster.errors == [], f"seed {SEED} case {case}: {bytes(mutated)!r}"
    assert state_of(cluster, victim) == before
    with open_client(cluster.url) as client:  # still serving
        consumer = client.subscribe(victim, "s")
        assert [m.data() for m in receive_all(consumer, 3)] == [b"m2", b"m3", b"m4"]
        consumer.close()
