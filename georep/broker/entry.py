"""A topic entry as the broker sees it: its position, the stored bytes, their metadata.

The stored bytes are the message's *headers and payload* exactly as the producer sent
them behind its SEND (see ``wire/frames.py``)::

    [u16 0x0e01][u32 crc32c][u32 metadata size][MessageMetadata][payload]

so dispatch re-sends them unchanged behind a MESSAGE command and the consumer checks the
producer's CRC32C end to end. The broker only parses the MessageMetadata, to learn what
dispatch needs: the number of messages in the entry (a batch counts that many permits),
whether it is a marker (stored; dispatched to the gateway only), its key (Key_Shared)
and its publish time (seek by time).

Markers are the gateway's: only producers named ``georep.*`` (:data:`GEOREP_NAME_PREFIX`)
may publish them, and only subscriptions named so (its replication subscriptions
``georep.repl.<cluster>`` and its sync reader ``georep.sync``) are dispatched them; every
other subscription steps over them (``subscription.py``).
"""

from __future__ import annotations

import base64
import binascii
import struct
from dataclasses import dataclass

from georep.domain.position import Position
from georep.wire import pulsar_wire_pb2 as pb
from georep.wire.frames import CHECKSUM_MAGIC, parse_untrusted

_MAGIC_AND_CRC = struct.Struct(">HI")
_U32 = struct.Struct(">I")

#: Names of the gateway's own producers and subscriptions: they publish and read markers.
GEOREP_NAME_PREFIX = "georep."

#: Key of messages that have neither an ordering key nor a partition key (as in Pulsar).
NO_KEY = b"NONE_KEY"


def is_georep_name(name: str) -> bool:
    """Whether a producer or subscription ``name`` is the gateway's (see the module doc)."""
    return name.startswith(GEOREP_NAME_PREFIX)


def parse_metadata(stored: bytes) -> pb.MessageMetadata | None:
    """The MessageMetadata of stored headers and payload; None if they do not parse
    (they were checked when published, so this means storage handed back other bytes)."""
    offset = 0
    if len(stored) >= _MAGIC_AND_CRC.size:
        magic, _ = _MAGIC_AND_CRC.unpack_from(stored, 0)
        if magic == CHECKSUM_MAGIC:
            offset = _MAGIC_AND_CRC.size
    if len(stored) - offset < _U32.size:
        return None
    (size,) = _U32.unpack_from(stored, offset)
    start = offset + _U32.size
    if start + size > len(stored):
        return None
    metadata = pb.MessageMetadata()
    if parse_untrusted(metadata, memoryview(stored)[start : start + size]) is not None:
        return None
    return metadata


def messages_in(metadata: pb.MessageMetadata | None) -> int:
    """Messages an entry holds: ``num_messages_in_batch`` for a batch, else 1."""
    if metadata is None or not metadata.HasField("num_messages_in_batch"):
        return 1
    return max(1, metadata.num_messages_in_batch)


def key_of(metadata: pb.MessageMetadata | None) -> bytes:
    """The key Key_Shared dispatch hashes: ordering key, else partition key, else NO_KEY."""
    if metadata is None:
        return NO_KEY
    if metadata.HasField("ordering_key") and metadata.ordering_key:
        return metadata.ordering_key
    if metadata.HasField("partition_key") and metadata.partition_key:
        if metadata.partition_key_b64_encoded:
            try:
                return base64.b64decode(metadata.partition_key, validate=True)
            except (binascii.Error, ValueError):
                pass
        return metadata.partition_key.encode()
    return NO_KEY


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry read from a topic's managed ledger."""

    position: Position
    data: bytes
    metadata: pb.MessageMetadata | None

    @classmethod
    def of(cls, position: Position, data: bytes) -> Entry:
        return cls(position, data, parse_metadata(data))

    @property
    def messages(self) -> int:
        return messages_in(self.metadata)

    @property
    def is_batch(self) -> bool:
        return self.metadata is not None and self.metadata.HasField("num_messages_in_batch")

    @property
    def is_marker(self) -> bool:
        return self.metadata is not None and self.metadata.HasField("marker_type")

    @property
    def key(self) -> bytes:
        return key_of(self.metadata)

    @property
    def publish_time_ms(self) -> int:
        return self.metadata.publish_time if self.metadata is not None else 0
