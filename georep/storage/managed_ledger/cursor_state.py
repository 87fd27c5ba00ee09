"""The persisted state of a cursor: one entry of the cursor's own ledger.

Layout (big-endian; ids signed 64-bit)::

    offset      size  field
    0           1     format version (1)
    1           16    mark-delete position (ledger id, entry id)
    17          4     n, the number of ranges
    21          32*n  ranges: low (ledger, entry), high (ledger, entry)
    21+32n      4     p, bytes of properties
    25+32n      p     properties: UTF-8 JSON object of strings to strings

Example: MDP (7, 41), ranges [(7,43),(7,45)], no properties is 1+16+4+32+4+2 = 59 bytes,
the last two being ``{}``. The ledger entry around it carries the CRC32C; ``decode``
still checks every length, the order of the ranges (sorted, disjoint, above the MDP) and
the JSON, so a state written by a buggy or foreign writer is refused, not half-read.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field

from georep import limits
from georep.storage.errors import CorruptEntry, InvalidArgument
from georep.storage.managed_ledger.position import Position

FORMAT_VERSION = 1
_HEAD = struct.Struct(">BqqI")
_RANGE = struct.Struct(">qqqq")
_LENGTH = struct.Struct(">I")


@dataclass(frozen=True)
class CursorState:
    mark_delete: Position
    ranges: tuple[tuple[Position, Position], ...] = ()
    properties: Mapping[str, str] = field(default_factory=dict)


def encode_properties(properties: Mapping[str, str]) -> bytes:
    """The properties as stored; InvalidArgument when they are not str -> str or exceed
    ``limits.cursor_properties_bytes_max``."""
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in properties.items()):
        raise InvalidArgument("cursor properties must map strings to strings")
    data = json.dumps(dict(properties), separators=(",", ":"), sort_keys=True).encode()
    if len(data) > limits.cursor_properties_bytes_max:
        raise InvalidArgument(
            f"cursor properties of {len(data)} bytes exceed {limits.cursor_properties_bytes_max}"
        )
    return data


def encode(state: CursorState) -> bytes:
    if len(state.ranges) > limits.cursor_ranges_persisted_max:
        raise InvalidArgument(
            f"{len(state.ranges)} ranges exceed {limits.cursor_ranges_persisted_max}"
        )
    properties = encode_properties(state.properties)
    parts = [_HEAD.pack(FORMAT_VERSION, *state.mark_delete, len(state.ranges))]
    parts += [_RANGE.pack(*low, *high) for low, high in state.ranges]
    parts += [_LENGTH.pack(len(properties)), properties]
    return b"".join(parts)


def decode(data: bytes) -> CursorState:
    view = memoryview(data)
    if len(view) < _HEAD.size + _LENGTH.size:
        raise CorruptEntry(f"cursor state of {len(view)} bytes is too short")
    version, mdp_ledger, mdp_entry, count = _HEAD.unpack_from(view, 0)
    if version != FORMAT_VERSION:
        raise CorruptEntry(f"cursor state format {version}, expected {FORMAT_VERSION}")
    if count > limits.cursor_ranges_persisted_max:
        raise CorruptEntry(f"cursor state holds {count} ranges")
    offset = _HEAD.size + count * _RANGE.size
    if len(view) < offset + _LENGTH.size:
        raise CorruptEntry("cursor state truncated in its ranges")
    (properties_bytes,) = _LENGTH.unpack_from(view, offset)
    if len(view) != offset + _LENGTH.size + properties_bytes:
        raise CorruptEntry("cursor state length does not match its fields")
    mark_delete = Position(mdp_ledger, mdp_entry)
    ranges = []
    previous_high = mark_delete
    for index in range(count):
        low_l, low_e, high_l, high_e = _RANGE.unpack_from(view, _HEAD.size + index * _RANGE.size)
        low, high = Position(low_l, low_e), Position(high_l, high_e)
        if not (previous_high < low <= high):
            raise CorruptEntry(f"cursor state range {index} [{low}, {high}] out of order")
        ranges.append((low, high))
        previous_high = high
    try:
        properties = json.loads(bytes(view[offset + _LENGTH.size :]).decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CorruptEntry(f"cursor state properties: {error}") from None
    if not isinstance(properties, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in properties.items()
    ):
        raise CorruptEntry("cursor state properties are not strings to strings")
    return CursorState(mark_delete, tuple(ranges), properties)
