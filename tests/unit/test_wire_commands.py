"""The command registry, the builders and the error replies of wire/commands.py.

``messages(cls)`` is the hypothesis strategy for any generated message, filled from its
descriptor (every field type, presence and repetition); test_wire_frames.py uses it too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, TypeVar, cast

import pytest
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message as ProtobufMessage
from google.protobuf.message_factory import GetMessageClass
from hypothesis import given, settings
from hypothesis import strategies as st

from georep.invariant import InvariantViolation
from georep.wire import commands, frames
from georep.wire import pulsar_wire_pb2 as pb
from georep.wire.commands import REGISTRY, Sender, Type

# --- strategies ---------------------------------------------------------------------------

_MESSAGE_DEPTH_MAX = 2
_SURROGATES: tuple[Literal["Cs"]] = ("Cs",)
_TEXT = st.text(st.characters(exclude_categories=_SURROGATES), max_size=12)
_SCALARS = {
    FieldDescriptor.TYPE_DOUBLE: st.floats(allow_nan=False),
    FieldDescriptor.TYPE_INT64: st.integers(-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_UINT64: st.integers(0, 2**64 - 1),
    FieldDescriptor.TYPE_INT32: st.integers(-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_UINT32: st.integers(0, 2**32 - 1),
    FieldDescriptor.TYPE_BOOL: st.booleans(),
    FieldDescriptor.TYPE_STRING: _TEXT,
    FieldDescriptor.TYPE_BYTES: st.binary(max_size=12),
}


M = TypeVar("M", bound=ProtobufMessage)


def _fields(cls: type[ProtobufMessage]) -> Sequence[FieldDescriptor]:
    # types-protobuf types DESCRIPTOR as the pure-Python or the upb descriptor, whichever
    # is installed; both have this API, but GetMessageClass is typed for the first only.
    return cast(Descriptor, cls.DESCRIPTOR).fields


@st.composite
def messages(draw: st.DrawFn, cls: type[M], depth: int = 0) -> M:
    """A message of ``cls`` with every required field set and optional ones at random."""
    message = cls()
    for field in _fields(cls):
        nested_type = field.message_type
        nested = nested_type is not None
        if field.is_repeated:
            count = 0 if nested and depth >= _MESSAGE_DEPTH_MAX else draw(st.integers(0, 3))
            container = getattr(message, field.name)
            for _ in range(count):
                if nested_type is not None:
                    container.add().CopyFrom(
                        draw(messages(GetMessageClass(nested_type), depth + 1))
                    )
                else:
                    container.append(draw(_value(field)))
            continue
        if not field.is_required and (
            (nested and depth >= _MESSAGE_DEPTH_MAX) or not draw(st.booleans())
        ):
            continue
        if nested_type is not None:
            sub = draw(messages(GetMessageClass(nested_type), depth + 1))
            getattr(message, field.name).CopyFrom(sub)
        else:
            setattr(message, field.name, draw(_value(field)))
    return message


def _value(field: FieldDescriptor) -> st.SearchStrategy[object]:
    if field.enum_type is not None:
        return st.sampled_from([value.number for value in field.enum_type.values])
    return _SCALARS[field.type]


@st.composite
def any_command(draw: st.DrawFn, specs: list[commands.CommandSpec] | None = None) -> pb.BaseCommand:
    spec = draw(st.sampled_from(specs or list(REGISTRY.values())))
    # CommandSpec.type holds a BaseCommand.Type, declared as the int it is at run time.
    command = pb.BaseCommand(type=cast(pb.BaseCommand.Type, spec.type))
    getattr(command, spec.field).CopyFrom(draw(messages(spec.body)))
    return command


def encode_any(command: pb.BaseCommand, metadata: pb.MessageMetadata, payload: bytes) -> bytes:
    """A frame for any command of the registry (payload commands get metadata and payload)."""
    if REGISTRY[command.type].carries_payload:
        return frames.encode_payload_command(command, metadata, payload)
    return frames.encode_command(command)


# --- the registry ---------------------------------------------------------------------------

#: The commands the broker must understand or send to serve pulsar-client.
REQUIRED_SUBSET = {
    "CONNECT", "CONNECTED", "PING", "PONG", "ERROR", "LOOKUP", "LOOKUP_RESPONSE",
    "PARTITIONED_METADATA", "PARTITIONED_METADATA_RESPONSE", "PRODUCER", "PRODUCER_SUCCESS",
    "SEND", "SEND_RECEIPT", "SEND_ERROR", "SUBSCRIBE", "FLOW", "MESSAGE", "ACK", "ACK_RESPONSE",
    "REDELIVER_UNACKNOWLEDGED_MESSAGES", "SEEK", "UNSUBSCRIBE", "SUCCESS", "CLOSE_PRODUCER",
    "CLOSE_CONSUMER", "GET_LAST_MESSAGE_ID", "GET_LAST_MESSAGE_ID_RESPONSE",
    "ACTIVE_CONSUMER_CHANGE", "REACHED_END_OF_TOPIC", "GET_TOPICS_OF_NAMESPACE",
    "GET_TOPICS_OF_NAMESPACE_RESPONSE", "GET_SCHEMA", "GET_SCHEMA_RESPONSE",
    "GET_OR_CREATE_SCHEMA", "GET_OR_CREATE_SCHEMA_RESPONSE", "CONSUMER_STATS",
    "CONSUMER_STATS_RESPONSE", "AUTH_CHALLENGE", "AUTH_RESPONSE",
    "TC_CLIENT_CONNECT_REQUEST", "TC_CLIENT_CONNECT_RESPONSE",
}  # fmt: skip


def test_registry_covers_the_subset_and_every_declared_body() -> None:
    assert {spec.name for spec in REGISTRY.values()} == REQUIRED_SUBSET
    bodies = {field.name for field in pb.BaseCommand.DESCRIPTOR.fields} - {"type"}
    assert {spec.field for spec in REGISTRY.values()} == bodies


def test_only_send_and_message_carry_a_payload() -> None:
    assert {spec.name for spec in REGISTRY.values() if spec.carries_payload} == {"SEND", "MESSAGE"}


def test_senders() -> None:
    assert REGISTRY[Type.CONNECT].sender is Sender.CLIENT
    assert REGISTRY[Type.MESSAGE].sender is Sender.BROKER
    assert REGISTRY[Type.PING].sender is Sender.EITHER
    assert Sender.BROKER in REGISTRY[Type.CLOSE_CONSUMER].sender


def test_only_empty_bodies_may_be_absent() -> None:
    assert {s.name for s in REGISTRY.values() if s.body_may_be_absent} == {"PING", "PONG"}


# --- round trips ----------------------------------------------------------------------------


@pytest.mark.parametrize("spec", list(REGISTRY.values()), ids=lambda spec: spec.name)
@settings(max_examples=40)
@given(data=st.data())
def test_every_command_round_trips(spec: commands.CommandSpec, data: st.DataObject) -> None:
    command = data.draw(any_command([spec]))
    metadata = data.draw(messages(pb.MessageMetadata))
    payload = data.draw(st.binary(max_size=64))
    decoder = frames.FrameDecoder()
    decoder.feed(encode_any(command, metadata, payload))
    frame = decoder.next_frame()
    assert frame is not None and decoder.next_frame() is None
    assert frame.command == command
    assert frame.body == getattr(command, spec.field)
    if spec.carries_payload:
        assert frame.metadata == metadata
        assert frame.payload == payload
    else:
        assert frame.metadata is None and frame.payload == b""


@given(messages(pb.MessageMetadata))
def test_message_metadata_round_trips_with_every_field(metadata: pb.MessageMetadata) -> None:
    assert pb.MessageMetadata.FromString(metadata.SerializeToString()) == metadata


def test_message_metadata_declares_what_clients_send() -> None:
    fields = pb.MessageMetadata.DESCRIPTOR.fields_by_name
    for name in (
        "replicated_from", "replicate_to", "partition_key", "ordering_key", "event_time",
        "properties", "num_messages_in_batch", "marker_type", "compression",
        "uncompressed_size", "uuid", "chunk_id", "num_chunks_from_msg",
        "total_chunk_msg_size", "null_value", "null_partition_key", "deliver_at_time",
        "highest_sequence_id", "schema_version",
    ):  # fmt: skip
        assert name in fields, name


# --- builders -------------------------------------------------------------------------------

_MESSAGE_ID = pb.MessageIdData(ledger_id=3, entry_id=9)

BUILT = [
    commands.connected("georep", pb.PROTOCOL_V20, 5 << 20, supports_broker_entry_metadata=True),
    commands.auth_challenge("georep", pb.PROTOCOL_V20, "token", b"challenge"),
    commands.ping(),
    commands.pong(),
    commands.success(1),
    commands.error(1, pb.TOPIC_NOT_FOUND, "no such topic"),
    commands.lookup_response(2, "pulsar://127.0.0.1:6650"),
    commands.lookup_response(2, "pulsar://b:6650", redirect=True, broker_service_url_tls="x"),
    commands.lookup_failed(2, pb.SERVICE_NOT_READY, "later"),
    commands.partitioned_metadata_response(3, 4),
    commands.partitioned_metadata_failed(3, pb.METADATA_ERROR, "store down"),
    commands.get_topics_of_namespace_response(4, ["persistent://t/n/a"]),
    commands.producer_success(5, "p-1", 41, schema_version=b"\x00", producer_ready=False),
    commands.send_receipt(1, 42, _MESSAGE_ID, 43),
    commands.send_error(1, 42, pb.CHECKSUM_ERROR, "bad crc"),
    commands.message(7, _MESSAGE_ID, redelivery_count=2, ack_set=[-1, 3]),
    commands.ack_response(7, 8),
    commands.ack_response(7, 8, pb.NOT_ALLOWED_ERROR, "no"),
    commands.close_producer(1, 9),
    commands.close_consumer(7, 9),
    commands.get_last_message_id_response(10, _MESSAGE_ID, _MESSAGE_ID),
    commands.active_consumer_change(7, True),
    commands.reached_end_of_topic(7),
    commands.consumer_stats_response(11, msg_backlog=5, consumer_name="c"),
    commands.get_schema_response(12, pb.Schema(name="s", data=b"{}", type=pb.Schema.JSON), b"1"),
    commands.get_or_create_schema_response(13, b"2"),
    commands.tc_client_connect_response(14, pb.NOT_ALLOWED_ERROR, "no transactions"),
]


@pytest.mark.parametrize("command", BUILT, ids=lambda command: Type.Name(command.type))
def test_builders_make_complete_broker_commands(command: pb.BaseCommand) -> None:
    spec = REGISTRY[command.type]
    assert Sender.BROKER in spec.sender
    assert command.IsInitialized()
    assert command.HasField(spec.field)
    wire = encode_any(
        command, pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=0), b"x"
    )
    decoder = frames.FrameDecoder()
    decoder.feed(wire)
    assert _next(decoder).command == command


def test_every_broker_command_has_a_builder() -> None:
    built = {command.type for command in BUILT}
    broker_sent = {spec.type for spec in REGISTRY.values() if Sender.BROKER in spec.sender}
    assert broker_sent - built == set()


def test_build_and_body_of() -> None:
    command = commands.build(Type.FLOW, consumer_id=1, message_permits=1000)
    assert command.type == Type.FLOW
    assert commands.body_of(command) is command.flow
    assert command.flow.message_permits == 1000


def test_request_id_of() -> None:
    lookup = commands.build(Type.LOOKUP, topic="t", request_id=5)
    assert commands.request_id_of(lookup) == 5
    assert (
        commands.request_id_of(commands.build(Type.FLOW, consumer_id=1, message_permits=1)) is None
    )
    assert commands.request_id_of(commands.build(Type.ACK, consumer_id=1, ack_type=0)) is None
    assert commands.request_id_of(pb.BaseCommand(type=Type.NEW_TXN)) is None


# --- error replies --------------------------------------------------------------------------

_SEND = commands.build(Type.SEND, producer_id=4, sequence_id=17)


@pytest.mark.parametrize(
    ("request_command", "reply_type", "check"),
    [
        (_SEND, Type.SEND_ERROR,
         lambda r: (r.send_error.producer_id, r.send_error.sequence_id) == (4, 17)),
        (commands.build(Type.LOOKUP, topic="t", request_id=5), Type.LOOKUP_RESPONSE,
         lambda r: r.lookup_response.response == pb.LookupResponse.FAILED),
        (commands.build(Type.PARTITIONED_METADATA, topic="t", request_id=5),
         Type.PARTITIONED_METADATA_RESPONSE,
         lambda r: r.partitioned_metadata_response.error == pb.TOPIC_NOT_FOUND),
        (commands.build(Type.GET_SCHEMA, request_id=5, topic="t"), Type.GET_SCHEMA_RESPONSE,
         lambda r: r.get_schema_response.error_code == pb.TOPIC_NOT_FOUND),
        (commands.build(Type.GET_OR_CREATE_SCHEMA, request_id=5, topic="t",
                        schema=pb.Schema(name="s", data=b"", type=pb.Schema.STRING)),
         Type.GET_OR_CREATE_SCHEMA_RESPONSE,
         lambda r: r.get_or_create_schema_response.error_message == "why"),
        (commands.build(Type.CONSUMER_STATS, request_id=5, consumer_id=1),
         Type.CONSUMER_STATS_RESPONSE, lambda r: r.consumer_stats_response.request_id == 5),
        (commands.build(Type.ACK, consumer_id=1, ack_type=0, request_id=5), Type.ACK_RESPONSE,
         lambda r: r.ack_response.error == pb.TOPIC_NOT_FOUND),
        (commands.build(Type.TC_CLIENT_CONNECT_REQUEST, request_id=5, tc_id=0),
         Type.TC_CLIENT_CONNECT_RESPONSE, lambda r: r.tc_client_connect_response.request_id == 5),
        (commands.build(Type.PRODUCER, topic="t", producer_id=1, request_id=5), Type.ERROR,
         lambda r: (r.error.request_id, r.error.message) == (5, "why")),
        (commands.build(Type.SUBSCRIBE, topic="t", subscription="s", sub_type=0, consumer_id=1,
                        request_id=5), Type.ERROR, lambda r: r.error.error == pb.TOPIC_NOT_FOUND),
    ],
    ids=lambda value: Type.Name(value.type) if isinstance(value, pb.BaseCommand) else "",
)  # fmt: skip
def test_error_reply_uses_the_response_each_request_expects(
    request_command, reply_type, check
) -> None:
    reply = commands.error_reply(request_command, pb.TOPIC_NOT_FOUND, "why")
    assert reply is not None and reply.type == reply_type and check(reply)
    assert reply.IsInitialized()


@pytest.mark.parametrize(
    "command",
    [
        commands.build(Type.FLOW, consumer_id=1, message_permits=1),
        commands.build(Type.ACK, consumer_id=1, ack_type=0),
        commands.ping(),
        commands.build(Type.REDELIVER_UNACKNOWLEDGED_MESSAGES, consumer_id=1),
    ],
    ids=lambda command: Type.Name(command.type),
)
def test_error_reply_is_none_when_the_client_expects_no_answer(command: pb.BaseCommand) -> None:
    assert commands.error_reply(command, pb.UNKNOWN_ERROR, "x") is None


def test_encoding_an_incomplete_command_is_a_bug() -> None:
    with pytest.raises(InvariantViolation):
        frames.encode_command(pb.BaseCommand(type=Type.LOOKUP, lookup=pb.Lookup(topic="t")))
    with pytest.raises(InvariantViolation):
        frames.encode_command(pb.BaseCommand(type=Type.LOOKUP))
    with pytest.raises(InvariantViolation):
        frames.encode_command(_SEND)  # a payload command needs encode_payload_command
    with pytest.raises(InvariantViolation):
        frames.encode_command(pb.BaseCommand(type=Type.NEW_TXN))


def _next(decoder: frames.FrameDecoder) -> frames.Frame:
    """The next whole frame, which the test knows is there."""
    frame = decoder.next_frame()
    assert frame is not None
    return frame
