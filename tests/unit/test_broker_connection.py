"""The connection state machine, fed bytes directly (no socket, a fake clock).

Each test drives ``ServerConnection.data_received`` / ``tick`` and decodes what the
connection wrote. Nothing here needs storage: the service is a stand-in that knows one
namespace and no partitioned topics.
"""

from __future__ import annotations

import asyncio
import random
import struct
from typing import cast

import pytest

from georep import limits
from georep.broker.connection import HANDLERS, PROTOCOL_VERSION, ServerConnection, State
from georep.broker.errors import NamespaceNotFound
from georep.broker.service import BrokerConfig, BrokerService
from georep.domain.topic_name import TopicName
from georep.wire import commands, frames
from georep.wire import pulsar_wire_pb2 as pb
from georep.wire.commands import REGISTRY, Sender, Type

SERVICE_URL = "pulsar://127.0.0.1:6650"


class FakeTransport:
    def __init__(self) -> None:
        self.written = bytearray()
        self.closed = False
        self.reading = True

    def write(self, data: bytes) -> None:
        assert not self.closed, "wrote after close"
        self.written += data

    def close(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def get_write_buffer_size(self) -> int:
        return 0

    def take(self) -> list[pb.BaseCommand]:
        decoder = frames.FrameDecoder()
        decoder.feed(bytes(self.written))
        self.written.clear()
        return [frame.command for frame in decoder.frames()]


class FakeService:
    def __init__(self) -> None:
        self.config = BrokerConfig(service_url=SERVICE_URL, keepalive_interval_s=30)
        self.closing = False

    async def partitions_of(self, name: TopicName) -> int:
        if name.namespace != "public/default":
            raise NamespaceNotFound(f"namespace {name.namespace} does not exist")
        return 0


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def make() -> tuple[ServerConnection, FakeTransport, Clock]:
    transport = FakeTransport()
    clock = Clock()
    # FakeService stands in for a BrokerService: it has what a connection asks before
    # any topic is opened (config, closing, partitions_of).
    service = cast(BrokerService, FakeService())
    connection = ServerConnection(service, transport, peer="test", clock=clock)
    return connection, transport, clock


def connect_frame(version: int = 20) -> bytes:
    return frames.encode_command(
        commands.build(Type.CONNECT, client_version="test", protocol_version=version)
    )


async def connected() -> tuple[ServerConnection, FakeTransport, Clock]:
    connection, transport, clock = make()
    connection.data_received(connect_frame())
    assert [c.type for c in transport.take()] == [Type.CONNECTED]
    return connection, transport, clock


async def settle() -> None:
    """Let the handlers that run as tasks finish."""
    for _ in range(5):
        await asyncio.sleep(0)


def test_every_client_command_has_a_handler() -> None:
    for command_type, spec in REGISTRY.items():
        if Sender.CLIENT in spec.sender:
            assert command_type in HANDLERS, spec.name


async def test_handshake_answers_the_lower_version() -> None:
    connection, transport, _ = make()
    data = connect_frame(version=PROTOCOL_VERSION + 1)
    for byte in data:  # split anywhere
        connection.data_received(bytes([byte]))
    (reply,) = transport.take()
    assert reply.type == Type.CONNECTED
    assert reply.connected.protocol_version == PROTOCOL_VERSION
    assert reply.connected.max_message_size == limits.pulsar_message_bytes_max
    assert connection.state is State.CONNECTED
    old, old_transport, _ = make()
    old.data_received(connect_frame(version=6))
    assert old_transport.take()[0].connected.protocol_version == 6


@pytest.mark.parametrize(
    ("frame", "reason"),
    [
        (frames.encode_command(commands.ping()), "PING before CONNECT"),
        (
            frames.encode_command(commands.build(Type.FLOW, consumer_id=1, message_permits=5)),
            "FLOW before CONNECT",
        ),
    ],
)
async def test_commands_before_connect_close(frame: bytes, reason: str) -> None:
    connection, transport, _ = make()
    connection.data_received(frame)
    assert connection.state is State.CLOSED and transport.closed
    assert reason in (connection.close_reason or "")
    assert transport.take() == []


async def test_second_connect_closes() -> None:
    connection, _transport, _ = await connected()
    connection.data_received(connect_frame())
    assert connection.close_reason == "a second CONNECT"


async def test_broker_command_from_client_closes() -> None:
    connection, _, _ = await connected()
    connection.data_received(frames.encode_command(commands.success(1)))
    assert "broker-to-client" in (connection.close_reason or "")


async def test_oversized_frame_closes_before_its_body() -> None:
    connection, transport, _ = await connected()
    connection.data_received(struct.pack(">I", limits.pulsar_frame_bytes_max + 1))
    assert connection.state is State.CLOSED
    assert (connection.close_reason or "").startswith("FrameTooLarge")
    connection.data_received(b"\x00" * 100)  # whatever follows is ignored
    assert transport.take() == []


async def test_ping_pong_and_keepalive() -> None:
    connection, transport, clock = await connected()
    connection.data_received(frames.encode_command(commands.ping()))
    assert [c.type for c in transport.take()] == [Type.PONG]
    clock.now += 29
    connection.tick(clock.now)
    assert transport.take() == []
    clock.now += 2
    connection.tick(clock.now)
    assert [c.type for c in transport.take()] == [Type.PING]
    clock.now += 20
    connection.data_received(frames.encode_command(commands.pong()))  # alive again
    clock.now += 20
    connection.tick(clock.now)
    assert connection.state is State.CONNECTED
    clock.now += 11
    connection.tick(clock.now)
    assert [c.type for c in transport.take()] == [Type.PING]
    clock.now += 31
    connection.tick(clock.now)
    assert connection.closed
    assert "keep-alive" in (connection.close_reason or "")


async def test_handshake_deadline() -> None:
    connection, _, clock = make()
    clock.now += limits.connect_handshake_s_max + 1
    connection.tick(clock.now)
    assert "no CONNECT" in (connection.close_reason or "")


async def test_lookup_and_partitioned_metadata() -> None:
    connection, transport, _ = await connected()
    lookup = commands.build(Type.LOOKUP, topic="persistent://public/default/t", request_id=3)
    bad = commands.build(Type.LOOKUP, topic="persistent://other/ns/t", request_id=4)
    invalid = commands.build(Type.LOOKUP, topic="non-persistent://public/default/t", request_id=5)
    metadata = commands.build(
        Type.PARTITIONED_METADATA, topic="persistent://public/default/t", request_id=6
    )
    for command in (lookup, bad, invalid, metadata):
        connection.data_received(frames.encode_command(command))
    await settle()
    ok, missing, refused, partitions = transport.take()
    assert ok.lookup_response.response == pb.LookupResponse.CONNECT
    assert ok.lookup_response.broker_service_url == SERVICE_URL
    assert ok.lookup_response.authoritative
    assert missing.lookup_response.response == pb.LookupResponse.FAILED
    assert missing.lookup_response.error == pb.TOPIC_NOT_FOUND
    assert refused.lookup_response.error == pb.TOPIC_NOT_FOUND  # the client fails fast
    assert "not served" in refused.lookup_response.message
    assert (
        partitions.partitioned_metadata_response.request_id,
        partitions.partitioned_metadata_response.partitions,
    ) == (6, 0)
    assert connection.state is State.CONNECTED


async def test_unknown_command_is_ignored() -> None:
    connection, transport, _ = await connected()
    body = bytes([0x08, 50])  # BaseCommand{type: NEW_TXN}, outside the subset
    connection.data_received(struct.pack(">II", 4 + len(body), len(body)) + body)
    connection.data_received(frames.encode_command(commands.ping()))
    assert [c.type for c in transport.take()] == [Type.PONG]


async def test_send_with_bad_checksum_gets_send_error() -> None:
    connection, transport, _ = await connected()
    metadata = pb.MessageMetadata(producer_name="p", sequence_id=9, publish_time=1)
    frame = bytearray(
        frames.encode_payload_command(
            commands.build(Type.SEND, producer_id=1, sequence_id=9), metadata, b"payload"
        )
    )
    frame[-1] ^= 0xFF
    connection.data_received(bytes(frame))
    (reply,) = transport.take()
    assert reply.type == Type.SEND_ERROR
    assert (reply.send_error.sequence_id, reply.send_error.error) == (9, pb.CHECKSUM_ERROR)
    assert connection.state is State.CONNECTED


async def test_send_for_unknown_producer_closes() -> None:
    connection, _transport, _ = await connected()
    metadata = pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1)
    connection.data_received(
        frames.encode_payload_command(
            commands.build(Type.SEND, producer_id=77, sequence_id=0), metadata, b"x"
        )
    )
    assert "producer 77" in (connection.close_reason or "")


async def test_unknown_consumer_requests_get_errors() -> None:
    connection, transport, _ = await connected()
    for command in (
        commands.build(Type.FLOW, consumer_id=5, message_permits=10),
        commands.build(Type.ACK, consumer_id=5, ack_type=pb.Ack.INDIVIDUAL),
        commands.build(Type.ACK, consumer_id=5, ack_type=pb.Ack.INDIVIDUAL, request_id=8),
        commands.build(Type.REDELIVER_UNACKNOWLEDGED_MESSAGES, consumer_id=5),
        commands.build(Type.CONSUMER_STATS, consumer_id=5, request_id=9),
        commands.build(Type.TC_CLIENT_CONNECT_REQUEST, request_id=10, tc_id=0),
    ):
        connection.data_received(frames.encode_command(command))
    receipt, stats, tc = transport.take()
    assert receipt.ack_response.error == pb.CONSUMER_NOT_FOUND
    assert stats.consumer_stats_response.error_code == pb.CONSUMER_NOT_FOUND
    assert tc.tc_client_connect_response.error == pb.NOT_ALLOWED_ERROR
    assert connection.state is State.CONNECTED


async def test_random_bytes_never_raise() -> None:
    rng = random.Random(20240601)
    for case in range(300):
        connection, _, _ = await connected()
        length = rng.choice([1, 3, 8, 40, 300])
        garbage = bytes(rng.randrange(256) for _ in range(length))
        if rng.random() < 0.5:  # a plausible size prefix in front
            garbage = struct.pack(">I", len(garbage)) + garbage
        try:
            connection.data_received(garbage)
        except Exception as error:  # pragma: no cover - the failure message is the point
            pytest.fail(f"seed 20240601 case {case}: {garbage!r} raised {error!r}")


async def test_publish_backpressure_pauses_reading() -> None:
    connection, transport, _ = await connected()
    for _ in range(limits.pending_publishes_per_connection_max):
        connection.publish_started()
    assert not transport.reading
    for _ in range(limits.pending_publishes_per_connection_max // 2):
        connection.publish_finished()
    assert transport.reading
