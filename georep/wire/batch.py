"""Batched payloads: many messages in one entry, each with its own small header.

A producer that batches sends one SEND whose MessageMetadata has
``num_messages_in_batch = n`` and whose (uncompressed) payload is ``n`` times::

    [u32 size][SingleMessageMetadata of `size` bytes][payload_size bytes of payload]

Worked example: two messages ``b"ab"`` and ``b""`` with no keys or properties. Their
SingleMessageMetadata hold only ``payload_size`` (2, then 0) and encode to 2 bytes each
(``18 02`` and ``18 00``), so the batch is the 14 bytes
``00000002 1802 6162 00000002 1800``.

Compression applies to the whole batched payload: decompress before :func:`split_batch`,
compress after :func:`build_batch`. Both enforce ``limits.pulsar_batch_messages_count_max``;
:func:`build_batch` also ``limits.pulsar_message_bytes_max``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from georep import limits
from georep.wire import pulsar_wire_pb2 as pb
from georep.wire.errors import BatchTooLarge, MalformedBatch
from georep.wire.frames import parse_untrusted

_U32 = struct.Struct(">I")


def split_batch(
    payload: bytes,
    messages_count: int,
    *,
    messages_count_max: int = limits.pulsar_batch_messages_count_max,
) -> list[tuple[pb.SingleMessageMetadata, bytes]]:
    """The ``messages_count`` (metadata, payload) pairs of a batched payload.

    Raises :class:`MalformedBatch` unless the payload holds exactly that many messages.
    """
    if not 1 <= messages_count <= messages_count_max:
        raise MalformedBatch(f"batch of {messages_count} messages; allowed 1..{messages_count_max}")
    messages: list[tuple[pb.SingleMessageMetadata, bytes]] = []
    offset = 0
    view = memoryview(payload)
    for index in range(messages_count):
        if len(payload) - offset < _U32.size:
            raise MalformedBatch(f"batch message {index}: no room for its header size")
        (size,) = _U32.unpack_from(payload, offset)
        offset += _U32.size
        if size > len(payload) - offset:
            raise MalformedBatch(f"batch message {index}: header size {size} overruns")
        metadata = pb.SingleMessageMetadata()
        problem = parse_untrusted(metadata, view[offset : offset + size])
        if problem is not None:
            raise MalformedBatch(f"batch message {index}: header {problem}")
        offset += size
        payload_size = metadata.payload_size
        if not 0 <= payload_size <= len(payload) - offset:
            raise MalformedBatch(f"batch message {index}: payload size {payload_size} overruns")
        messages.append((metadata, bytes(view[offset : offset + payload_size])))
        offset += payload_size
    if offset != len(payload):
        raise MalformedBatch(
            f"{len(payload) - offset} bytes left after the {messages_count} announced messages"
        )
    return messages


def build_batch(
    messages: Iterable[tuple[pb.SingleMessageMetadata, bytes]],
    *,
    messages_count_max: int = limits.pulsar_batch_messages_count_max,
    bytes_max: int = limits.pulsar_message_bytes_max,
) -> tuple[bytes, int]:
    """The batched payload of ``messages`` and how many it holds (for
    ``num_messages_in_batch``). Each header's ``payload_size`` is set from its payload."""
    parts: list[bytes] = []
    count = 0
    total = 0
    for metadata, payload in messages:
        count += 1
        if count > messages_count_max:
            raise BatchTooLarge(f"more than {messages_count_max} messages in one batch")
        header = pb.SingleMessageMetadata()
        header.CopyFrom(metadata)
        header.payload_size = len(payload)
        encoded = header.SerializeToString()
        total += _U32.size + len(encoded) + len(payload)
        if total > bytes_max:
            raise BatchTooLarge(f"batch exceeds {bytes_max} bytes")
        parts += (_U32.pack(len(encoded)), encoded, payload)
    if count == 0:
        raise MalformedBatch("a batch holds at least one message")
    return b"".join(parts), count
