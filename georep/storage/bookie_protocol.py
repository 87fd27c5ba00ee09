"""The bookie wire protocol: declared messages, a registry, and a sans-I/O codec.

Every frame is ``u32 length`` followed by ``length`` bytes::

    offset  size  field
    0       1     protocol version (1)
    1       1     op code            (OpCode)
    2       1     flags              (Flag bits; request only, 0 in responses)
    3       1     status             (Status; 0 in requests)
    4       8     request id         (echoed in the response)
    12      ...   body, declared per op below

A frame whose length prefix exceeds ``limits.bookie_frame_bytes_max`` (or is shorter
than the 12-byte header) is refused before its body is read: :class:`FrameDecoder`
raises :class:`ProtocolError` and the connection must be closed.

Bodies (``>`` big-endian):

    op        request body                      response body (status OK)
    ADD       ledger u64, entry i64, entry...   ledger u64, entry i64
    READ      ledger u64, entry i64             entry bytes
    READ_LAC  ledger u64                        lac i64, last entry i64
    HEALTH    (empty)                           JSON object (stats)
    FAULT     JSON object (see bookie/faults)   (empty)

A response with a non-OK status carries a UTF-8 message as its body.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from georep import limits
from georep.storage.errors import ProtocolError

PROTOCOL_VERSION = 1


class OpCode(enum.IntEnum):
    ADD = 1
    READ = 2
    READ_LAC = 3
    HEALTH = 4
    FAULT = 5


class Flag(enum.IntFlag):
    NONE = 0
    RECOVERY = 1  # ADD: allowed on a fenced ledger (ledger recovery, re-replication)
    FENCE = 2  # READ / READ_LAC: fence the ledger before answering


class Status(enum.IntEnum):
    OK = 0
    NO_SUCH_LEDGER = 1
    NO_SUCH_ENTRY = 2
    FENCED = 3
    BAD_REQUEST = 4
    TOO_LARGE = 5
    CORRUPT = 6
    ERROR = 7
    FAULT_DISABLED = 8


_LENGTH = struct.Struct(">I")
_HEADER = struct.Struct(">BBBBQ")
HEADER_BYTES = _HEADER.size
_LEDGER_ENTRY = struct.Struct(">Qq")
_LEDGER = struct.Struct(">Q")
_LAC = struct.Struct(">qq")


@dataclass(slots=True)
class Message:
    """A decoded frame. Subclasses declare their op and body layout."""

    op: ClassVar[OpCode]
    is_response: ClassVar[bool]
    request_id: int

    def encode_body(self) -> bytes:
        return b""

    @classmethod
    def decode_body(cls, request_id: int, flags: int, status: int, body: memoryview) -> Message:
        raise NotImplementedError


@dataclass(slots=True)
class Request(Message):
    is_response: ClassVar[bool] = False


@dataclass(slots=True)
class Response(Message):
    is_response: ClassVar[bool] = True
    status: Status = Status.OK
    error: str = ""


@dataclass(slots=True)
class AddRequest(Request):
    op: ClassVar[OpCode] = OpCode.ADD
    ledger_id: int = 0
    entry_id: int = 0
    recovery: bool = False
    data: bytes = b""

    def encode_body(self) -> bytes:
        return _LEDGER_ENTRY.pack(self.ledger_id, self.entry_id) + self.data

    @classmethod
    def decode_body(cls, request_id: int, flags: int, status: int, body: memoryview) -> Self:
        ledger_id, entry_id = _unpack(_LEDGER_ENTRY, body, "ADD")
        return cls(
            request_id,
            ledger_id,
            entry_id,
            bool(flags & Flag.RECOVERY),
            bytes(body[_LEDGER_ENTRY.size :]),
        )

    @property
    def flags(self) -> int:
        return Flag.RECOVERY if self.recovery else Flag.NONE


@dataclass(slots=True)
class AddResponse(Response):
    op: ClassVar[OpCode] = OpCode.ADD
    ledger_id: int = 0
    entry_id: int = 0

    def encode_body(self) -> bytes:
        return _LEDGER_ENTRY.pack(self.ledger_id, self.entry_id)

    @classmethod
    def decode_body(cls, request_id: int, flags: int, status: int, body: memoryview) -> Self:
        ledger_id, entry_id = _unpack(_LEDGER_ENTRY, body, "ADD response")
        return cls(request_id, Status.OK, "", ledger_id, entry_id)


@dataclass(slots=True)
class ReadRequest(Request):
    op: ClassVar[OpCode] = OpCode.READ
    ledger_id: int = 0
    entry_id: int = 0
    fence: bool = False

    def encode_body(self) -> bytes:
        return _LEDGER_ENTRY.pack(self.ledger_id, self.entry_id)

    @classmethod
    def decode_body(cls, request_id: int, flags: int, status: int, body: memoryview) -> Self:
        ledger_id, entry_id = _unpack(_LEDGER_ENTRY, body, "READ")
        return cls(request_id, ledger_id, entry_id, bool(flags & Flag.FENCE))

    @property
    def flags(self) -> int:
        return Flag.FENCE if self.fence else Flag.NONE


@dataclass(slots=True)
class ReadResponse(Response):
    op: ClassVar[OpCode] = OpCode.READ
    data: bytes = b""

    def encode_body(self) -> bytes:
        return self.data

    @classmethod
    def decode_body(cls, request_id: int, flags: int, status: int, body: memoryview) -> Self:
        return cls(request_id, Status.OK, "", bytes(body))


@dataclass(slots=True)
class ReadLacRequest(Request):
    op: ClassVar[OpCode] = OpCode.READ_LAC
    ledger_id: int = 0
    fence: bool = False

    def encode_body(self) -> bytes:
        return _LEDGER.pack(self.ledger_id)

    @classmethod
    def decode_body(cls, request_id: int, flags: int, status: int, body: memoryview) -> Self:
        (ledger_id,) = _unpack(_LEDGER, body, "READ_LAC")
        return cls(request_id, ledger_id, bool(flags & Flag.FENCE))

    @property
    def flags(self) -> int:
        return Flag.FENCE if self.fence else Flag.NONE


@dataclass(slots=True)
class ReadLacResponse(Response):
    op: ClassVar[OpCode] = OpCode.READ_LAC
    last_add_confirmed: int = -1
    last_entry_id: int = -1

    def encode_body(self) -> bytes:
        return _LAC.pack(self.last_add_confirmed, self.last_entry_id)

    @classmethod
    def decode_body(cls, request_id: int, flags: int, status: int, body: memoryview) -> Self:
        lac, last = _unpack(_LAC, body, "READ_LAC response")
        return cls(request_id, Status.OK, "", lac, last)


@dataclass(slots=True)
class HealthRequest(Request):
    op: ClassVar[OpCode] = OpCode.HEALTH

    @classmethod
    def decode_body(cls, request_id: int, flags: int, status: int, body: memoryview) -> Self:
        return cls(request_id)


@dataclass(slots=True)
class HealthResponse(Response):
    op: ClassVar[OpCode] = OpCode.HEALTH
    stats_json: bytes = b"{}"

    def encode_body(self) -> bytes:
        return self.stats_json

    @classmethod
    def decode_body(cls, request_id: int, flags: int, status: int, body: memoryview) -> Self:
        return cls(request_id, Status.OK, "", bytes(body))


@dataclass(slots=True)
class FaultRequest(Request):
    op: ClassVar[OpCode] = OpCode.FAULT
    spec_json: bytes = b"{}"

    def encode_body(self) -> bytes:
        return self.spec_json

    @classmethod
    def decode_body(cls, request_id: int, flags: int, status: int, body: memoryview) -> Self:
        return cls(request_id, bytes(body))


@dataclass(slots=True)
class FaultResponse(Response):
    op: ClassVar[OpCode] = OpCode.FAULT

    @classmethod
    def decode_body(cls, request_id: int, flags: int, status: int, body: memoryview) -> Self:
        return cls(request_id)


REQUESTS: dict[OpCode, type[Request]] = {
    cls.op: cls for cls in (AddRequest, ReadRequest, ReadLacRequest, HealthRequest, FaultRequest)
}
RESPONSES: dict[OpCode, type[Response]] = {
    cls.op: cls
    for cls in (AddResponse, ReadResponse, ReadLacResponse, HealthResponse, FaultResponse)
}


def _unpack(layout: struct.Struct, body: memoryview, what: str) -> tuple[Any, ...]:
    if len(body) < layout.size:
        raise ProtocolError(f"{what} body of {len(body)} bytes, need at least {layout.size}")
    return layout.unpack_from(body, 0)


def encode(message: Message) -> bytes:
    """One frame (length prefix included) for ``message``."""
    body = message.encode_body()
    status: int
    if isinstance(message, Response):
        status = message.status
        flags = 0
        if status != Status.OK:
            body = message.error.encode("utf-8", "replace")
    else:
        status = 0
        flags = int(getattr(message, "flags", 0))
    frame_length = HEADER_BYTES + len(body)
    if frame_length > limits.bookie_frame_bytes_max:
        raise ProtocolError(
            f"frame of {frame_length} bytes exceeds {limits.bookie_frame_bytes_max}"
        )
    return b"".join(
        (
            _LENGTH.pack(frame_length),
            _HEADER.pack(PROTOCOL_VERSION, message.op, flags, status, message.request_id),
            body,
        )
    )


def error_response(request: Message, status: Status, error: str) -> Response:
    """The response to ``request`` that reports ``status`` with a message."""
    return RESPONSES[request.op](request.request_id, status, error)


_REQUESTS_BY_CODE = {int(op): cls for op, cls in REQUESTS.items()}
_RESPONSES_BY_CODE = {int(op): cls for op, cls in RESPONSES.items()}
_STATUS_BY_CODE = {int(status): status for status in Status}


def decode_frame(frame: memoryview, *, responses: bool) -> Message:
    """Decode one frame body (without its length prefix).

    Lookups go through int-keyed tables rather than enum constructors: this runs once
    per request on both sides, tens of thousands of times a second.
    """
    if len(frame) < HEADER_BYTES:
        raise ProtocolError(f"frame of {len(frame)} bytes is shorter than the header")
    version, op, flags, status, request_id = _HEADER.unpack_from(frame, 0)
    if version != PROTOCOL_VERSION:
        raise ProtocolError(f"unsupported protocol version {version}")
    body = frame[HEADER_BYTES:]
    if not responses:
        request_cls = _REQUESTS_BY_CODE.get(op)
        if request_cls is None:
            raise ProtocolError(f"unknown op code {op}")
        if status != 0:
            raise ProtocolError("request frame carries a status")
        return request_cls.decode_body(request_id, flags, status, body)
    response_cls = _RESPONSES_BY_CODE.get(op)
    if response_cls is None:
        raise ProtocolError(f"unknown op code {op}")
    if status == 0:
        return response_cls.decode_body(request_id, flags, status, body)
    code = _STATUS_BY_CODE.get(status)
    if code is None:
        raise ProtocolError(f"unknown status {status}")
    return response_cls(request_id, code, bytes(body).decode("utf-8", "replace"))


class FrameDecoder:
    """Feed bytes in any split; take whole messages out.

    Sans-I/O: knows nothing of sockets. Raises :class:`ProtocolError` on the first bad
    frame, after which the decoder (and the connection) must not be used again.
    """

    __slots__ = ("_buffer", "_frame_bytes_max", "_responses")

    def __init__(self, *, responses: bool, frame_bytes_max: int = limits.bookie_frame_bytes_max):
        self._buffer = bytearray()
        self._responses = responses
        self._frame_bytes_max = frame_bytes_max

    def feed(self, data: bytes) -> list[Message]:
        buffer = self._buffer
        buffer += data
        messages: list[Message] = []
        offset = 0
        available = len(buffer)
        view = memoryview(buffer)
        try:
            while available - offset >= 4:
                (length,) = _LENGTH.unpack_from(buffer, offset)
                if length > self._frame_bytes_max:
                    raise ProtocolError(
                        f"frame length {length} exceeds the maximum {self._frame_bytes_max}"
                    )
                if length < HEADER_BYTES:
                    raise ProtocolError(f"frame length {length} is shorter than the header")
                end = offset + 4 + length
                if end > available:
                    break
                messages.append(decode_frame(view[offset + 4 : end], responses=self._responses))
                offset = end
        finally:
            view.release()
        if offset:
            del buffer[:offset]
        return messages

    @property
    def buffered_bytes(self) -> int:
        return len(self._buffer)
