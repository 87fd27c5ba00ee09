"""Operating errors of the Pulsar wire codec.

Every error the codec raises on bad input is a :class:`PulsarProtocolError`; nothing else
escapes it, whatever the bytes. Each error says whether the byte stream is still usable:

- ``fatal`` errors (a frame too large, sizes that do not add up, a command that does not
  parse) leave the stream out of step or the peer untrustworthy: close the connection,
  naming the error as the reason. A :class:`~georep.wire.frames.FrameDecoder`
  raises the same error again on every later call.
- non-fatal errors concern one whole frame whose command was decoded (a bad checksum, a
  malformed metadata section) or a command outside the subset: the frame is consumed and
  decoding continues with the next one. They carry the decoded ``command`` (or the type
  number) so the broker can answer, e.g. SEND_ERROR with CHECKSUM_ERROR for a SEND.
"""

from __future__ import annotations

from typing import ClassVar

from georep.wire import pulsar_wire_pb2 as pb


class PulsarProtocolError(Exception):
    """Base of every error the Pulsar wire codec raises on bad input."""

    fatal: ClassVar[bool] = True


class FrameTooLarge(PulsarProtocolError):
    """A frame's size prefix exceeds the configured maximum (refused before buffering)."""


class MalformedFrame(PulsarProtocolError):
    """The size fields of a frame are inconsistent; the stream cannot be trusted."""


class MalformedCommand(PulsarProtocolError):
    """The BaseCommand does not parse, or its type's body is missing."""


class UnknownCommand(PulsarProtocolError):
    """A well-framed command whose type is outside the subset the codec declares."""

    fatal: ClassVar[bool] = False

    def __init__(self, message: str, type_number: int | None) -> None:
        super().__init__(message)
        self.type_number = type_number


class FrameContentError(PulsarProtocolError):
    """One well-framed frame with a decoded command is bad past its command."""

    fatal: ClassVar[bool] = False

    def __init__(self, message: str, command: pb.BaseCommand) -> None:
        super().__init__(message)
        self.command = command


class MalformedPayload(FrameContentError):
    """The section after the command (magic, sizes, metadata) is malformed or misplaced."""


class ChecksumMismatch(FrameContentError):
    """The CRC32C over metadata and payload does not match the one the peer sent."""

    def __init__(
        self, message: str, command: pb.BaseCommand, expected_crc: int, actual_crc: int
    ) -> None:
        super().__init__(message, command)
        self.expected_crc = expected_crc
        self.actual_crc = actual_crc


class MalformedBatch(PulsarProtocolError):
    """A batched payload does not split into the messages its metadata announces."""


class BatchTooLarge(PulsarProtocolError):
    """A batch to build exceeds the message count or size limits."""
