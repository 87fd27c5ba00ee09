"""Interop proof: the official pulsar-client against georep's Pulsar wire codec.

The server here is a throwaway written for this test (NOT the broker, which comes later):
an asyncio server on 127.0.0.1 that decodes with ``FrameDecoder`` and answers with the
builders of ``commands`` and the encoders of ``frames``. The first test does the
handshake and a partitioned-metadata lookup; the second pushes real producer frames
(unbatched and batched, CRC32C included) through the decoder and hands real consumers
MESSAGE frames the codec built, so both directions of the payload format are exercised.

What the client sent, recorded with pulsar-client 3.13.0 (C++ core 4.2.0):

- CONNECT: client_version "Pulsar-CPP-v4.2.0", protocol_version 20, auth_method_name
  "none", feature_flags {supports_auth_refresh, supports_broker_entry_metadata}.
- ``get_topic_partitions``: CONNECT, then PARTITIONED_METADATA (request_id 1) on the
  service-URL connection. No LOOKUP: a partition-count query needs no owner. It answers
  a broker PING with PONG; its own keep-alive PING comes only after 30 s idle.
- producing/consuming a non-partitioned topic, per producer or consumer:
  PARTITIONED_METADATA (answered 0), LOOKUP (authoritative false), then, on the same
  connection since the lookup named the service URL itself: PRODUCER (no name: the
  broker picks one) / SEND (payload frames with the 0x0e01 checksum; a batch is one SEND
  with num_messages = n) / CLOSE_PRODUCER, and SUBSCRIBE / FLOW (1000 permits) / ACK
  (one grouped individual ACK listing several ids) / CLOSE_CONSUMER.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter
from dataclasses import dataclass, field

import pulsar
import pytest

from georep import limits
from georep.wire import batch, commands, frames
from georep.wire import pulsar_wire_pb2 as pb
from georep.wire.commands import Type
from georep.wire.errors import PulsarProtocolError

pytestmark = pytest.mark.timeout(60)

TOPIC = "persistent://public/default/t"
SERVER_VERSION = "georep-handshake-test"
#: Highest protocol version the throwaway server speaks: the client's own 20 or lower.
SERVER_PROTOCOL_VERSION = pb.PROTOCOL_V20


@dataclass
class _Connection:
    writer: asyncio.StreamWriter
    pong_seen: bool = False
    held_until_pong: list[pb.BaseCommand] = field(default_factory=list)
    #: consumer id -> next entry to dispatch, and its permits
    next_entry: dict[int, int] = field(default_factory=dict)
    permits: Counter[int] = field(default_factory=Counter)

    def send(self, command: pb.BaseCommand) -> None:
        self.writer.write(frames.encode_command(command))


@dataclass
class ToyServer:
    """Just enough of a broker to prove the codec: one in-memory topic, no storage."""

    partitions: int = 4
    received: list[pb.BaseCommand] = field(default_factory=list)
    client_versions: list[tuple[str, int]] = field(default_factory=list)
    #: headers and payload of every stored entry, as sent by the producer.
    entries: list[bytes] = field(default_factory=list)
    #: Payloads of each batch the producer sent, as batch.split_batch split them.
    batches_split: list[list[bytes]] = field(default_factory=list)
    pongs: int = 0
    #: Anything the codec refused from pulsar-client: must stay empty.
    codec_errors: list[PulsarProtocolError] = field(default_factory=list)
    port: int = 0
    _producer_names: itertools.count = field(default_factory=itertools.count)

    def types_received(self) -> Counter[str]:
        return Counter(Type.Name(command.type) for command in self.received)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = _Connection(writer)
        decoder = frames.FrameDecoder()
        try:
            while data := await reader.read(65536):
                decoder.feed(data)
                while (frame := decoder.next_frame()) is not None:
                    self.received.append(frame.command)
                    self._answer(frame, connection)
                    self._dispatch(connection)
                await writer.drain()
        except PulsarProtocolError as error:  # the tests assert there were none
            self.codec_errors.append(error)
        finally:
            writer.close()

    def _answer(self, frame: frames.Frame, connection: _Connection) -> None:
        command = frame.command
        kind = command.type
        reply: pb.BaseCommand | None = None
        if kind == Type.CONNECT:
            self.client_versions.append(
                (command.connect.client_version, command.connect.protocol_version)
            )
            version = min(command.connect.protocol_version, SERVER_PROTOCOL_VERSION)
            connection.send(
                commands.connected(SERVER_VERSION, version, limits.pulsar_message_bytes_max)
            )
            reply = commands.ping()  # probe the client's keep-alive answer at once
        elif kind == Type.PING:
            reply = commands.pong()
        elif kind == Type.PONG:
            self.pongs += 1
            connection.pong_seen = True
            for held in connection.held_until_pong:
                connection.send(held)
            connection.held_until_pong.clear()
        elif kind == Type.PARTITIONED_METADATA:
            request = command.partitioned_metadata
            count = self.partitions if request.topic == TOPIC else 0
            answer = commands.partitioned_metadata_response(request.request_id, count)
            # Held until the client answered our PING, so the test can rely on the PONG.
            if connection.pong_seen:
                reply = answer
            else:
                connection.held_until_pong.append(answer)
        elif kind == Type.LOOKUP:
            reply = commands.lookup_response(
                command.lookup.request_id, f"pulsar://127.0.0.1:{self.port}"
            )
        elif kind == Type.PRODUCER:
            name = command.producer.producer_name or f"toy-{next(self._producer_names)}"
            reply = commands.producer_success(command.producer.request_id, name)
        elif kind == Type.SEND:
            reply = self._store(frame)
        elif kind == Type.SUBSCRIBE:
            connection.next_entry[command.subscribe.consumer_id] = 0
            reply = commands.success(command.subscribe.request_id)
        elif kind == Type.FLOW:
            connection.permits[command.flow.consumer_id] += command.flow.message_permits
        elif kind == Type.ACK:
            if command.ack.HasField("request_id"):
                reply = commands.ack_response(command.ack.consumer_id, command.ack.request_id)
        elif kind == Type.CLOSE_PRODUCER:
            reply = commands.success(command.close_producer.request_id)
        elif kind == Type.CLOSE_CONSUMER:
            connection.next_entry.pop(command.close_consumer.consumer_id, None)
            reply = commands.success(command.close_consumer.request_id)
        else:
            reply = commands.error_reply(command, pb.NOT_ALLOWED_ERROR, "not in the toy server")
        if reply is not None:
            connection.send(reply)

    def _store(self, frame: frames.Frame) -> pb.BaseCommand:
        send = frame.command.send
        metadata = frame.metadata
        assert metadata is not None, "a SEND carries metadata"
        assert frame.checksum is not None, "the client always sends a checksum (v6+)"
        if metadata.num_messages_in_batch > 1 or send.num_messages > 1:
            pairs = batch.split_batch(frame.payload, metadata.num_messages_in_batch)
            self.batches_split.append([payload for _, payload in pairs])
        entry_id = len(self.entries)
        self.entries.append(frame.headers_and_payload)
        message_id = pb.MessageIdData(ledger_id=1, entry_id=entry_id)
        return commands.send_receipt(
            send.producer_id, send.sequence_id, message_id, send.highest_sequence_id
        )

    def _dispatch(self, connection: _Connection) -> None:
        for consumer_id, next_entry in connection.next_entry.items():
            while next_entry < len(self.entries) and connection.permits[consumer_id] > 0:
                message_id = pb.MessageIdData(ledger_id=1, entry_id=next_entry)
                command = commands.message(consumer_id, message_id)
                stored = self.entries[next_entry]
                connection.writer.write(frames.encode_stored_payload_command(command, stored))
                connection.permits[consumer_id] -= 1
                next_entry += 1
            connection.next_entry[consumer_id] = next_entry

    def append_server_batch(self, payloads: list[bytes]) -> None:
        """Store a batch the codec builds itself (metadata, batch layout and CRC are ours)."""
        singles = [
            (pb.SingleMessageMetadata(payload_size=0, partition_key=f"k{index}"), payload)
            for index, payload in enumerate(payloads)
        ]
        batched, count = batch.build_batch(singles)
        metadata = pb.MessageMetadata(
            producer_name="toy-server",
            sequence_id=len(self.entries),
            publish_time=1_700_000_000_000,
            num_messages_in_batch=count,
        )
        self.entries.append(frames.encode_headers_and_payload(metadata, batched))


async def _start(server: ToyServer) -> asyncio.Server:
    listener = await asyncio.start_server(server.serve, "127.0.0.1", 0)
    server.port = listener.sockets[0].getsockname()[1]
    return listener


def _client(port: int) -> pulsar.Client:
    return pulsar.Client(
        f"pulsar://127.0.0.1:{port}",
        operation_timeout_seconds=5,
        connection_timeout_ms=2000,
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn),
    )


async def test_client_gets_partition_names_through_the_codec() -> None:
    server = ToyServer(partitions=4)
    listener = await _start(server)

    def query() -> list[str]:
        client = _client(server.port)
        try:
            return client.get_topic_partitions(TOPIC)
        finally:
            client.close()

    try:
        names = await asyncio.to_thread(query)
    finally:
        listener.close()
        await listener.wait_closed()

    assert server.codec_errors == []
    assert names == [f"{TOPIC}-partition-{index}" for index in range(4)]
    types = server.types_received()
    assert types["CONNECT"] == 1 and types["PARTITIONED_METADATA"] == 1
    assert server.pongs == 1, "the client answers a broker PING with PONG"
    ((client_version, protocol_version),) = server.client_versions
    assert client_version.startswith("Pulsar-CPP-")
    assert protocol_version >= pb.PROTOCOL_V6  # checksums are always on


async def test_real_producer_and_consumer_frames_round_trip() -> None:
    server = ToyServer()
    listener = await _start(server)
    topic = "persistent://public/default/interop"

    def produce_and_consume() -> list[tuple[bytes, str, dict[str, str]]]:
        client = _client(server.port)
        try:
            plain = client.create_producer(topic, batching_enabled=False)
            for index in range(3):
                plain.send(f"plain-{index}".encode(), properties={"n": str(index)})
            plain.close()
            batched = client.create_producer(
                topic,
                batching_enabled=True,
                batching_max_messages=5,
                batching_max_publish_delay_ms=1000,
            )
            for index in range(5):
                batched.send_async(
                    f"batched-{index}".encode(), lambda *_: None, partition_key=f"p{index}"
                )
            batched.flush()
            batched.close()
            server.append_server_batch([b"server-0", b"server-1"])

            consumer = client.subscribe(
                topic, "sub", initial_position=pulsar.InitialPosition.Earliest
            )
            received = []
            for _ in range(3 + 5 + 2):
                message = consumer.receive(timeout_millis=5000)
                received.append(
                    (message.data(), message.partition_key(), dict(message.properties()))
                )
                consumer.acknowledge(message)
            consumer.close()
            return received
        finally:
            client.close()

    try:
        received = await asyncio.to_thread(produce_and_consume)
    finally:
        listener.close()
        await listener.wait_closed()

    assert server.codec_errors == []
    assert [data for data, _, _ in received] == [
        *(f"plain-{index}".encode() for index in range(3)),
        *(f"batched-{index}".encode() for index in range(5)),
        b"server-0",
        b"server-1",
    ]
    assert [props for _, _, props in received[:3]] == [{"n": str(index)} for index in range(3)]
    assert [key for _, key, _ in received[3:]] == [f"p{index}" for index in range(5)] + [
        "k0",
        "k1",
    ]
    assert server.batches_split == [[f"batched-{index}".encode() for index in range(5)]]
    types = server.types_received()
    assert types["SEND"] == 4  # three single messages and one batch of five
    assert types["PRODUCER"] == 2 and types["SUBSCRIBE"] == 1 and types["FLOW"] >= 1
    assert types["LOOKUP"] >= 1 and types["ACK"] >= 1
