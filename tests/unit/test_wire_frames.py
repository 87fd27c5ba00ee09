"""The sans-I/O Pulsar frame codec: wire/frames.py.

Fed whole, byte by byte and in random splits; fuzzed with random bytes, mutated frames
and oversized sizes, after which only the codec's own error type may come out.
"""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from georep import limits
from georep.wire import commands, frames
from georep.wire import pulsar_wire_pb2 as pb
from georep.wire.commands import Type
from georep.wire.errors import (
    ChecksumMismatch,
    FrameTooLarge,
    MalformedCommand,
    MalformedFrame,
    MalformedPayload,
    PulsarProtocolError,
    UnknownCommand,
)
from tests.unit.test_wire_commands import any_command, encode_any, messages

METADATA = pb.MessageMetadata(producer_name="p-1", sequence_id=7, publish_time=1_700_000_000_000)
SEND = commands.build(Type.SEND, producer_id=1, sequence_id=7)


def _u32(value: int) -> bytes:
    return struct.pack(">I", value)


def _simple_frame(command_bytes: bytes) -> bytes:
    """A frame around raw command bytes, bypassing the encoder's checks."""
    return _u32(4 + len(command_bytes)) + _u32(len(command_bytes)) + command_bytes


def _payload_frame(command: pb.BaseCommand, after_command: bytes) -> bytes:
    data = command.SerializeToString()
    return _u32(4 + len(data) + len(after_command)) + _u32(len(data)) + data + after_command


def _decode_all(wire: bytes, **options) -> list[frames.Frame]:
    decoder = frames.FrameDecoder(**options)
    decoder.feed(wire)
    return decoder.frames()


# --- golden bytes, derived by hand from the wire format ---------------------------------------


def test_ping_frame_bytes() -> None:
    # type=18 -> 08 12; body field 18, length 0 -> tag (18 << 3 | 2) = 92 01, 00
    assert frames.encode_command(commands.ping()) == bytes.fromhex("00000009 00000005 0812 920100")


def test_flow_frame_bytes() -> None:
    # type=11 -> 08 0b; field 11 (tag 5a) of 5 bytes: consumer_id=1 (08 01), permits=1000 (10 e807)
    wire = frames.encode_command(commands.build(Type.FLOW, consumer_id=1, message_permits=1000))
    assert wire == bytes.fromhex("0000000d 00000009 080b 5a05 0801 10e807")


def test_checksum_is_crc32c_castagnoli() -> None:
    assert crc32c(b"123456789") == 0xE3069283  # the Castagnoli check value


def test_payload_frame_layout() -> None:
    wire = frames.encode_payload_command(SEND, METADATA, b"hello")
    command, metadata = SEND.SerializeToString(), METADATA.SerializeToString()
    total = 4 + len(command) + 6 + 4 + len(metadata) + 5
    checked = _u32(len(metadata)) + metadata + b"hello"
    assert wire == (
        _u32(total) + _u32(len(command)) + command
        + bytes.fromhex("0e01") + _u32(crc32c(checked)) + checked
    )  # fmt: skip
    frame = _decode_all(wire)[0]
    assert frame.headers_and_payload == wire[8 + len(command) :]
    assert frame.checksum == crc32c(checked)


# --- feeding in splits ----------------------------------------------------------------------


def _stream() -> tuple[bytes, list[pb.BaseCommand]]:
    sent = [
        commands.build(Type.CONNECT, client_version="c", protocol_version=20),
        commands.ping(),
        SEND,
        commands.partitioned_metadata_response(3, 4),
        commands.message(1, pb.MessageIdData(ledger_id=1, entry_id=2)),
    ]
    wire = b"".join(encode_any(command, METADATA, b"payload") for command in sent)
    return wire, sent


def test_byte_by_byte() -> None:
    wire, sent = _stream()
    decoder = frames.FrameDecoder()
    got = []
    for byte in wire:
        decoder.feed(bytes([byte]))
        got.extend(decoder.frames())
    assert [frame.command for frame in got] == sent
    assert decoder.buffered_bytes == 0


@given(st.data())
def test_random_splits(data: st.DataObject) -> None:
    wire, sent = _stream()
    cuts = sorted(data.draw(st.lists(st.integers(0, len(wire)), max_size=20)))
    decoder = frames.FrameDecoder()
    got = []
    for start, end in zip([0, *cuts], [*cuts, len(wire)], strict=True):
        decoder.feed(wire[start:end])
        got.extend(decoder.frames())
    assert [frame.command for frame in got] == sent
    assert [frame.payload for frame in got if frame.metadata] == [b"payload"] * 2


@settings(max_examples=50, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(any_command(), min_size=1, max_size=5), st.data())
def test_random_commands_in_random_splits(sent: list[pb.BaseCommand], data: st.DataObject) -> None:
    metadata = data.draw(messages(pb.MessageMetadata))
    wire = b"".join(encode_any(command, metadata, b"p") for command in sent)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(wire)), max_size=10)))
    decoder = frames.FrameDecoder()
    got = []
    for start, end in zip([0, *cuts], [*cuts, len(wire)], strict=True):
        decoder.feed(wire[start:end])
        got.extend(decoder.frames())
    assert [frame.command for frame in got] == sent


# --- sizes ----------------------------------------------------------------------------------


@pytest.mark.parametrize("total_size", [limits.pulsar_frame_bytes_max + 1, 2**31, 2**32 - 1])
def test_oversized_frame_is_refused_from_its_prefix_alone(total_size: int) -> None:
    decoder = frames.FrameDecoder()
    decoder.feed(_u32(total_size))
    with pytest.raises(FrameTooLarge):
        decoder.next_frame()
    with pytest.raises(FrameTooLarge):  # the decoder stays failed
        decoder.feed(b"more")


def test_frame_of_exactly_the_maximum_is_accepted() -> None:
    empty = frames.encode_payload_command(SEND, METADATA, b"")
    payload = b"x" * (limits.pulsar_frame_bytes_max - (len(empty) - 4))
    wire = frames.encode_payload_command(SEND, METADATA, payload)
    assert struct.unpack(">I", wire[:4])[0] == limits.pulsar_frame_bytes_max
    assert _decode_all(wire)[0].payload == payload
    with pytest.raises(FrameTooLarge):
        frames.encode_payload_command(SEND, METADATA, payload + b"x")


def test_configured_maximum_applies() -> None:
    wire = frames.encode_command(commands.ping())
    decoder = frames.FrameDecoder(frame_bytes_max=len(wire) - 5)
    decoder.feed(wire)
    with pytest.raises(FrameTooLarge):
        decoder.next_frame()


@pytest.mark.parametrize(
    "wire",
    [
        _u32(0),  # no room for the command size
        _u32(3) + b"abc",
        _u32(8) + _u32(5) + b"abcd",  # command size beyond the frame
        _u32(4) + _u32(2**32 - 1),
    ],
)
def test_inconsistent_sizes_are_fatal(wire: bytes) -> None:
    decoder = frames.FrameDecoder()
    decoder.feed(wire)
    with pytest.raises(MalformedFrame) as raised:
        decoder.next_frame()
    assert raised.value.fatal
    with pytest.raises(MalformedFrame):
        decoder.next_frame()


def test_partial_frame_waits_for_more() -> None:
    wire = frames.encode_command(commands.ping())
    decoder = frames.FrameDecoder()
    decoder.feed(wire[:-1])
    assert decoder.next_frame() is None
    assert decoder.buffered_bytes == len(wire) - 1


# --- commands -------------------------------------------------------------------------------


def test_unparsable_command_is_fatal() -> None:
    decoder = frames.FrameDecoder()
    decoder.feed(_simple_frame(b"\xff\xff\xff"))
    with pytest.raises(MalformedCommand) as raised:
        decoder.next_frame()
    assert raised.value.fatal


def test_command_missing_required_fields_is_refused() -> None:
    partial = pb.BaseCommand(type=Type.CONNECT, connect=pb.Connect()).SerializePartialToString()
    with pytest.raises(MalformedCommand, match="client_version"):
        _decode_all(_simple_frame(partial))


def test_command_without_its_body_is_refused() -> None:
    with pytest.raises(MalformedCommand, match="connect"):
        _decode_all(_simple_frame(pb.BaseCommand(type=Type.CONNECT).SerializeToString()))


def test_ping_without_body_is_accepted() -> None:
    (frame,) = _decode_all(_simple_frame(pb.BaseCommand(type=Type.PING).SerializeToString()))
    assert frame.command == commands.ping()


@pytest.mark.parametrize(("type_number", "what"), [(Type.NEW_TXN, "NEW_TXN"), (99, "99")])
def test_unknown_command_is_reported_and_skipped(type_number: int, what: str) -> None:
    unknown = _simple_frame(b"\x08" + bytes([type_number]))
    decoder = frames.FrameDecoder()
    decoder.feed(unknown + frames.encode_command(commands.ping()))
    with pytest.raises(UnknownCommand, match=what) as raised:
        decoder.next_frame()
    assert raised.value.type_number == type_number and not raised.value.fatal
    assert _next(decoder).type == Type.PING


def test_stray_bytes_after_a_simple_command() -> None:
    wire = frames.encode_command(commands.ping())
    stray = _u32(struct.unpack(">I", wire[:4])[0] + 2) + wire[4:] + b"!!"
    decoder = frames.FrameDecoder()
    decoder.feed(stray + wire)
    with pytest.raises(MalformedPayload) as raised:
        decoder.next_frame()
    assert raised.value.command.type == Type.PING and not raised.value.fatal
    assert _next(decoder).type == Type.PING


# --- checksums and payload sections ---------------------------------------------------------


@pytest.mark.parametrize("region", ["crc", "metadata size", "metadata", "payload"])
def test_checksum_mismatch_is_distinct_and_recoverable(region: str) -> None:
    good = frames.encode_payload_command(SEND, METADATA, b"hello")
    metadata_bytes = len(METADATA.SerializeToString())
    payload_start = len(good) - 5
    position = {
        "payload": payload_start + 2,
        "metadata": payload_start - metadata_bytes + 1,
        "metadata size": payload_start - metadata_bytes - 1,
        "crc": payload_start - metadata_bytes - 4 - 2,
    }[region]
    bad = bytearray(good)
    bad[position] ^= 0x01
    decoder = frames.FrameDecoder()
    decoder.feed(bytes(bad) + good)
    with pytest.raises(ChecksumMismatch) as raised:
        decoder.next_frame()
    error = raised.value
    assert not error.fatal and error.expected_crc != error.actual_crc
    assert error.command.send.sequence_id == 7  # enough to answer SEND_ERROR
    reply = commands.error_reply(error.command, pb.CHECKSUM_ERROR, str(error))
    assert reply is not None
    assert reply.type == Type.SEND_ERROR and reply.send_error.error == pb.CHECKSUM_ERROR
    assert _next(decoder).payload == b"hello"


def test_flipped_payload_bit_is_a_checksum_mismatch() -> None:
    bad = bytearray(frames.encode_payload_command(SEND, METADATA, b"hello"))
    bad[-1] ^= 0x80
    with pytest.raises(ChecksumMismatch) as raised:
        _decode_all(bytes(bad))
    assert raised.value.expected_crc != raised.value.actual_crc


def test_checksum_section_is_required_by_default() -> None:
    metadata = METADATA.SerializeToString()
    unchecked = _payload_frame(SEND, _u32(len(metadata)) + metadata + b"hi")
    with pytest.raises(MalformedPayload, match="checksum"):
        _decode_all(unchecked)
    (frame,) = _decode_all(unchecked, checksum_required=False)
    assert frame.checksum is None and frame.payload == b"hi" and frame.metadata == METADATA


def test_broker_entry_metadata_is_understood() -> None:
    entry_metadata = pb.BrokerEntryMetadata(broker_timestamp=123, index=9)
    command = commands.message(1, pb.MessageIdData(ledger_id=1, entry_id=2))
    wire = frames.encode_payload_command(
        command, METADATA, b"data", broker_entry_metadata=entry_metadata
    )
    (frame,) = _decode_all(wire)
    assert frame.broker_entry_metadata == entry_metadata
    assert frame.payload == b"data"
    assert frame.headers_and_payload == frames.encode_headers_and_payload(METADATA, b"data")


def test_stored_headers_are_sent_back_unchanged() -> None:
    (sent,) = _decode_all(frames.encode_payload_command(SEND, METADATA, b"data"))
    command = commands.message(1, pb.MessageIdData(ledger_id=1, entry_id=2))
    (delivered,) = _decode_all(
        frames.encode_stored_payload_command(command, sent.headers_and_payload)
    )
    assert delivered.checksum == sent.checksum and delivered.payload == b"data"


@pytest.mark.parametrize(
    "after_command",
    [
        b"",  # a SEND without anything after its command
        bytes.fromhex("0e01") + b"\x00",  # truncated checksum
        bytes.fromhex("0e02") + b"\x00",  # truncated broker entry metadata
        bytes.fromhex("0e02") + _u32(100),  # broker entry metadata overruns
        bytes.fromhex("0e01") + _u32(crc32c(b"")),  # no metadata size
        bytes.fromhex("0e01") + _u32(crc32c(_u32(50))) + _u32(50),  # metadata size overruns
        bytes.fromhex("0e01") + _u32(crc32c(_u32(2) + b"\xff\xff")) + _u32(2) + b"\xff\xff",
        bytes.fromhex("0e01") + _u32(crc32c(_u32(0))) + _u32(0),  # metadata lacks fields
    ],
)
def test_malformed_payload_sections(after_command: bytes) -> None:
    decoder = frames.FrameDecoder()
    decoder.feed(_payload_frame(SEND, after_command) + frames.encode_command(commands.pong()))
    with pytest.raises(MalformedPayload) as raised:
        decoder.next_frame()
    assert not raised.value.fatal and raised.value.command == SEND
    assert _next(decoder).type == Type.PONG


# --- fuzz -----------------------------------------------------------------------------------


def _drain(decoder: frames.FrameDecoder, data: bytes) -> None:
    """Feed ``data`` and take frames until the decoder wants more or fails for good."""
    try:
        decoder.feed(data)
    except PulsarProtocolError as error:
        assert error.fatal
        return
    for _ in range(decoder.buffered_bytes + 1):  # each frame consumes 8 bytes at least
        try:
            if decoder.next_frame() is None:
                return
        except PulsarProtocolError as error:
            if error.fatal:
                return
    raise AssertionError("the decoder did not stop")


@settings(max_examples=300)
@given(st.lists(st.binary(max_size=64), max_size=8))
def test_fuzz_random_bytes(chunks: list[bytes]) -> None:
    decoder = frames.FrameDecoder()
    for chunk in chunks:
        _drain(decoder, chunk)


@settings(max_examples=300)
@given(st.binary(max_size=200), st.sampled_from([b"", b"\x0e\x01", b"\x0e\x02", b"\x08\x06"]))
def test_fuzz_random_bodies_with_plausible_sizes(body: bytes, prefix: bytes) -> None:
    """Sizes that agree with the bytes that follow, so the body parsers are exercised."""
    for wire in (
        _u32(len(body) + 4) + _u32(len(body)) + body,
        _payload_frame(SEND, prefix + body),
        _payload_frame(SEND, bytes.fromhex("0e01") + _u32(crc32c(body)) + body),
    ):
        _drain(frames.FrameDecoder(), wire)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(any_command(), min_size=1, max_size=3), st.data())
def test_fuzz_mutated_valid_frames(sent: list[pb.BaseCommand], data: st.DataObject) -> None:
    wire = bytearray(b"".join(encode_any(command, METADATA, b"payload") for command in sent))
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(0, len(wire) - 1))
        mutation = data.draw(st.sampled_from(["flip", "set", "insert", "delete", "size"]))
        if mutation == "flip":
            wire[position] ^= 1 << data.draw(st.integers(0, 7))
        elif mutation == "set":
            wire[position] = data.draw(st.integers(0, 255))
        elif mutation == "insert":
            wire[position:position] = data.draw(st.binary(min_size=1, max_size=4))
        elif mutation == "delete" and len(wire) > 1:
            del wire[position]
        elif mutation == "size" and len(wire) >= position + 4:
            wire[position : position + 4] = _u32(data.draw(st.integers(0, 2**32 - 1)))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(wire)), max_size=5)))
    decoder = frames.FrameDecoder()
    for start, end in zip([0, *cuts], [*cuts, len(wire)], strict=True):
        _drain(decoder, bytes(wire[start:end]))


@given(st.integers(limits.pulsar_frame_bytes_max + 1, 2**32 - 1), st.binary(max_size=64))
def test_fuzz_oversized_sizes(total_size: int, rest: bytes) -> None:
    decoder = frames.FrameDecoder()
    decoder.feed(_u32(total_size) + rest)
    with pytest.raises(FrameTooLarge):
        decoder.next_frame()
    assert decoder.buffered_bytes == 4 + len(rest)


def _next(decoder: frames.FrameDecoder) -> frames.Frame:
    """The next whole frame, which the test knows is there."""
    frame = decoder.next_frame()
    assert frame is not None
    return frame
