"""Pulsar frames: a sans-I/O codec that knows nothing of sockets.

All integers are big-endian. A simple command (everything but SEND and MESSAGE)::

    [u32 total_size][u32 command_size][BaseCommand]

    total_size   = 4 + command_size   (total_size never counts itself)

A payload command (SEND from a producer, MESSAGE to a consumer)::

    [u32 total_size][u32 command_size][BaseCommand]
    ( [u16 0x0e02][u32 size][BrokerEntryMetadata] )   optional, MESSAGE only in practice
    [u16 0x0e01][u32 crc32c]                          the checksum
    [u32 metadata_size][MessageMetadata][payload]     crc32c covers exactly these bytes

Worked example: a SEND whose command encodes to 8 bytes, metadata to 20 and payload to
5 has ``total_size = 4 + 8 + 6 + 4 + 20 + 5 = 47``, a 51-byte frame, and its checksum is
CRC32C over the last 29 bytes. The bytes from the 0x0e01 magic to the end are the
message's *headers and payload*: what the broker stores and later sends back, unchanged,
behind a MESSAGE command.

:class:`FrameDecoder` is fed bytes in any split and hands back whole :class:`Frame` s.
It refuses a ``total_size`` above ``limits.pulsar_frame_bytes_max`` as soon as the four
bytes of the prefix are in, before buffering the body. Whatever the input, it raises
nothing but :class:`~georep.wire.errors.PulsarProtocolError`: fatal errors
poison the decoder; non-fatal ones (a bad checksum, a command outside the subset)
consume their frame and decoding goes on.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from crc32c import crc32c
from google.protobuf.message import Message as ProtobufMessage

from georep import limits
from georep.invariant import invariant, present
from georep.wire import pulsar_wire_pb2 as pb
from georep.wire.commands import REGISTRY, Type, body_of, spec_of
from georep.wire.errors import (
    ChecksumMismatch,
    FrameTooLarge,
    MalformedCommand,
    MalformedFrame,
    MalformedPayload,
    PulsarProtocolError,
    UnknownCommand,
)

#: Magic in front of the CRC32C of a payload frame.
CHECKSUM_MAGIC = 0x0E01
#: Magic in front of broker entry metadata.
BROKER_ENTRY_METADATA_MAGIC = 0x0E02

_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_MAGIC_AND_SIZE = struct.Struct(">HI")
_SIZE_BYTES = _U32.size
_MAGIC_AND_CRC_BYTES = _MAGIC_AND_SIZE.size

_KNOWN_TYPES = frozenset(Type.values())
_MISSING_FIELDS_SHOWN = 5

invariant(_MAGIC_AND_CRC_BYTES == 6)


@dataclass(frozen=True, slots=True)
class Frame:
    """One decoded frame. Payload fields are None/empty for simple commands."""

    command: pb.BaseCommand
    #: Parsed metadata of a payload frame.
    metadata: pb.MessageMetadata | None = None
    #: The message payload (for a batch: all its messages, see batch.py).
    payload: bytes = b""
    #: ``[0x0e01][crc][metadata size][metadata][payload]`` exactly as received (without the
    #: checksum section when the peer sent none). A broker stores these bytes.
    headers_and_payload: bytes = b""
    #: The checksum the peer sent, already verified; None when the peer sent none.
    checksum: int | None = None
    broker_entry_metadata: pb.BrokerEntryMetadata | None = None

    @property
    def type(self) -> int:
        return self.command.type

    @property
    def body(self) -> ProtobufMessage:
        """The command's body: ``command.send`` for a SEND, and so on."""
        return body_of(self.command)


# --- decoding -----------------------------------------------------------------------------


def _raw_type_number(data: bytes | memoryview) -> int | None:
    """The varint of field 1 if ``data`` starts with it, as every encoder writes it."""
    if not data or data[0] != 0x08:
        return None
    value = 0
    for index, byte in enumerate(data[1:11]):
        value |= (byte & 0x7F) << (7 * index)
        if not byte & 0x80:
            return value
    return None


def missing_fields(message: ProtobufMessage) -> list[str]:
    """The required fields ``message`` lacks, by path (``"send.producer_id"``)."""
    missing: list[str] = message.FindInitializationErrors()  # type: ignore[attr-defined]  # not in the stubs
    return missing


def parse_untrusted(message: ProtobufMessage, data: bytes | memoryview) -> str | None:
    """Parse peer bytes into ``message``: None when they parse and every required field
    is present (the runtime does not check that itself), else what is wrong."""
    try:
        message.ParseFromString(data)  # type: ignore[arg-type]  # any buffer: no copy
    except Exception as error:  # untrusted bytes: DecodeError, RecursionError, ...
        return f"does not parse ({type(error).__name__})"
    if not message.IsInitialized():
        missing = missing_fields(message)
        shown = ", ".join(missing[:_MISSING_FIELDS_SHOWN])
        ellipsis = ", ..." if len(missing) > _MISSING_FIELDS_SHOWN else ""
        return f"lacks required fields {shown}{ellipsis}"
    return None


def decode_command(data: bytes | memoryview) -> pb.BaseCommand:
    """Decode the BaseCommand of a frame and check that its type's body is there."""
    command = pb.BaseCommand()
    problem = parse_untrusted(command, data)
    if problem is not None:
        number = _raw_type_number(data)
        if number is not None and number not in _KNOWN_TYPES:
            raise UnknownCommand(f"command type {number} is not a Pulsar type we know", number)
        raise MalformedCommand(f"BaseCommand of {len(data)} bytes {problem}")
    spec = spec_of(command)
    if spec is None:
        name = Type.Name(command.type)
        raise UnknownCommand(f"command {name} is outside the supported subset", command.type)
    if not command.HasField(spec.field):
        if not spec.body_may_be_absent:
            raise MalformedCommand(f"{spec.name} without its {spec.field} body")
        getattr(command, spec.field).SetInParent()
    return command


def decode_frame(body: bytes, *, checksum_required: bool = True) -> Frame:
    """Decode one frame given without its ``total_size`` prefix."""
    if len(body) < _SIZE_BYTES:
        raise MalformedFrame(f"frame of {len(body)} bytes has no room for its command size")
    (command_size,) = _U32.unpack_from(body, 0)
    command_end = _SIZE_BYTES + command_size
    if command_end > len(body):
        raise MalformedFrame(
            f"command size {command_size} exceeds the frame's {len(body) - _SIZE_BYTES} bytes"
        )
    view = memoryview(body)  # slices below share the frame's bytes until copied out
    command = decode_command(view[_SIZE_BYTES:command_end])
    spec = REGISTRY[command.type]
    rest = view[command_end:]
    if not spec.carries_payload:
        if rest:
            raise MalformedPayload(f"{spec.name} followed by {len(rest)} stray bytes", command)
        return Frame(command)
    return _decode_payload_section(command, rest, checksum_required)


def _decode_payload_section(
    command: pb.BaseCommand, rest: memoryview, checksum_required: bool
) -> Frame:
    name = Type.Name(command.type)
    offset = 0
    broker_entry_metadata = None
    if len(rest) >= 2 and _U16.unpack_from(rest, 0)[0] == BROKER_ENTRY_METADATA_MAGIC:
        if len(rest) < _MAGIC_AND_SIZE.size:
            raise MalformedPayload(f"{name}: truncated broker entry metadata", command)
        _, size = _MAGIC_AND_SIZE.unpack_from(rest, 0)
        offset = _MAGIC_AND_SIZE.size + size
        if offset > len(rest):
            raise MalformedPayload(f"{name}: broker entry metadata size {size} overruns", command)
        broker_entry_metadata = pb.BrokerEntryMetadata()
        problem = parse_untrusted(broker_entry_metadata, rest[_MAGIC_AND_SIZE.size : offset])
        if problem is not None:
            raise MalformedPayload(f"{name}: broker entry metadata {problem}", command)
    headers_start = offset
    checksum = None
    if len(rest) - offset >= 2 and _U16.unpack_from(rest, offset)[0] == CHECKSUM_MAGIC:
        if len(rest) - offset < _MAGIC_AND_CRC_BYTES:
            raise MalformedPayload(f"{name}: truncated checksum", command)
        _, checksum = _MAGIC_AND_SIZE.unpack_from(rest, offset)
        offset += _MAGIC_AND_CRC_BYTES
    elif checksum_required:
        raise MalformedPayload(f"{name} without the 0x0e01 checksum section", command)
    checked = rest[offset:]
    if len(checked) < _SIZE_BYTES:
        raise MalformedPayload(f"{name} without a metadata size", command)
    (metadata_size,) = _U32.unpack_from(checked, 0)
    metadata_end = _SIZE_BYTES + metadata_size
    if metadata_end > len(checked):
        raise MalformedPayload(
            f"{name}: metadata size {metadata_size} exceeds the {len(checked) - 4} bytes left",
            command,
        )
    if checksum is not None:
        actual = crc32c(checked)
        if actual != checksum:
            raise ChecksumMismatch(
                f"{name}: CRC32C {actual:#010x} does not match the sent {checksum:#010x}",
                command,
                checksum,
                actual,
            )
    metadata = pb.MessageMetadata()
    problem = parse_untrusted(metadata, checked[_SIZE_BYTES:metadata_end])
    if problem is not None:
        raise MalformedPayload(f"{name}: MessageMetadata {problem}", command)
    return Frame(
        command,
        metadata=metadata,
        payload=bytes(checked[metadata_end:]),
        headers_and_payload=bytes(rest[headers_start:]),
        checksum=checksum,
        broker_entry_metadata=broker_entry_metadata,
    )


class FrameDecoder:
    """Feed bytes in any split; take whole frames out, one at a time::

        decoder.feed(await reader.read(65536))
        while True:
            try:
                frame = decoder.next_frame()
            except PulsarProtocolError as error:
                if error.fatal:
                    return close(reason=error)   # the decoder stays failed
                answer(error)                    # e.g. SEND_ERROR for a ChecksumMismatch
                continue
            if frame is None:
                break
            dispatch(frame)

    A connection loop feeds what it read, then calls :meth:`next_frame` until it returns
    None, so the size of a frame is checked as soon as its prefix arrives and at most one
    read beyond the prefix is buffered before a frame that is too large is refused.
    """

    __slots__ = ("_buffer", "_checksum_required", "_failure", "_frame_bytes_max", "_offset")

    def __init__(
        self,
        *,
        frame_bytes_max: int = limits.pulsar_frame_bytes_max,
        checksum_required: bool = True,
    ) -> None:
        invariant(0 < frame_bytes_max <= limits.pulsar_frame_bytes_max, "frame_bytes_max range")
        self._buffer = bytearray()
        self._offset = 0
        self._frame_bytes_max = frame_bytes_max
        self._checksum_required = checksum_required
        self._failure: PulsarProtocolError | None = None

    def feed(self, data: bytes) -> None:
        if self._failure is not None:
            raise self._failure
        self._buffer += data

    def next_frame(self) -> Frame | None:
        """The next whole frame, or None until more bytes are fed."""
        if self._failure is not None:
            raise self._failure
        buffer = self._buffer
        available = len(buffer) - self._offset
        if available < _SIZE_BYTES:
            return None
        (total_size,) = _U32.unpack_from(buffer, self._offset)
        if total_size > self._frame_bytes_max:
            limit = self._frame_bytes_max
            raise self._poison(
                FrameTooLarge(f"frame size {total_size} exceeds the maximum {limit}")
            )
        if total_size < _SIZE_BYTES:
            raise self._poison(MalformedFrame(f"frame size {total_size} has no room for a command"))
        end = self._offset + _SIZE_BYTES + total_size
        if end > len(buffer):
            return None
        body = bytes(buffer[self._offset + _SIZE_BYTES : end])
        self._offset = end
        if self._offset * 2 >= len(buffer):
            del buffer[: self._offset]
            self._offset = 0
        try:
            return decode_frame(body, checksum_required=self._checksum_required)
        except PulsarProtocolError as error:
            if error.fatal:
                self._poison(error)
            raise

    def frames(self) -> list[Frame]:
        """Every whole frame buffered now. Raises on the first bad one: the frames before
        it are lost to the caller, so a broker that must answer them uses next_frame."""
        out = []
        while (frame := self.next_frame()) is not None:
            out.append(frame)
        return out

    @property
    def buffered_bytes(self) -> int:
        return len(self._buffer) - self._offset

    def _poison(self, error: PulsarProtocolError) -> PulsarProtocolError:
        """Remember a fatal error: every later call raises it again."""
        self._failure = error
        return error


# --- encoding -----------------------------------------------------------------------------


def _serialize_command(command: pb.BaseCommand, *, with_payload: bool) -> bytes:
    spec = present(spec_of(command), f"encoding a command outside the subset: {command.type}")
    invariant(spec.carries_payload == with_payload, f"{spec.name}: payload mismatch")
    invariant(
        command.HasField(spec.field) or spec.body_may_be_absent,
        f"{spec.name} without its {spec.field} body",
    )
    invariant(command.IsInitialized(), f"{spec.name} lacks required fields")
    return command.SerializeToString()


def _check_size(total_size: int, frame_bytes_max: int) -> None:
    if total_size > frame_bytes_max:
        raise FrameTooLarge(f"frame of {total_size} bytes exceeds the maximum {frame_bytes_max}")


def encode_command(
    command: pb.BaseCommand, *, frame_bytes_max: int = limits.pulsar_frame_bytes_max
) -> bytes:
    """A simple command frame. A command missing required fields is a bug (raised loudly)."""
    data = _serialize_command(command, with_payload=False)
    total_size = _SIZE_BYTES + len(data)
    _check_size(total_size, frame_bytes_max)
    return b"".join((_U32.pack(total_size), _U32.pack(len(data)), data))


def encode_headers_and_payload(metadata: pb.MessageMetadata | bytes, payload: bytes) -> bytes:
    """``[0x0e01][crc32c][metadata size][metadata][payload]`` for a SEND or to store."""
    if isinstance(metadata, pb.MessageMetadata):
        invariant(metadata.IsInitialized(), "MessageMetadata lacks required fields")
        metadata = metadata.SerializeToString()
    checked = b"".join((_U32.pack(len(metadata)), metadata, payload))
    return b"".join((_MAGIC_AND_SIZE.pack(CHECKSUM_MAGIC, crc32c(checked)), checked))


def encode_payload_command(
    command: pb.BaseCommand,
    metadata: pb.MessageMetadata | bytes,
    payload: bytes,
    *,
    broker_entry_metadata: pb.BrokerEntryMetadata | None = None,
    frame_bytes_max: int = limits.pulsar_frame_bytes_max,
) -> bytes:
    """A SEND or MESSAGE frame; the checksum is computed here."""
    return encode_stored_payload_command(
        command,
        encode_headers_and_payload(metadata, payload),
        broker_entry_metadata=broker_entry_metadata,
        frame_bytes_max=frame_bytes_max,
    )


def encode_stored_payload_command(
    command: pb.BaseCommand,
    headers_and_payload: bytes,
    *,
    broker_entry_metadata: pb.BrokerEntryMetadata | None = None,
    frame_bytes_max: int = limits.pulsar_frame_bytes_max,
) -> bytes:
    """A SEND or MESSAGE frame around headers and payload kept as received (stored bytes
    keep the producer's checksum, so the consumer verifies end to end)."""
    data = _serialize_command(command, with_payload=True)
    prefix = b""
    if broker_entry_metadata is not None:
        entry_metadata = broker_entry_metadata.SerializeToString()
        prefix = _MAGIC_AND_SIZE.pack(BROKER_ENTRY_METADATA_MAGIC, len(entry_metadata))
        prefix += entry_metadata
    total_size = _SIZE_BYTES + len(data) + len(prefix) + len(headers_and_payload)
    _check_size(total_size, frame_bytes_max)
    return b"".join(
        (_U32.pack(total_size), _U32.pack(len(data)), data, prefix, headers_and_payload)
    )
