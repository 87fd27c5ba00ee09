"""The on-wire and on-disk format of a ledger entry.

An entry is a 36-byte header followed by the payload::

    offset  size  field
    0       8     ledger id            (unsigned, big-endian)
    8       8     entry id             (signed: -1 is never stored)
    16      8     LAC at send time     (signed: -1 when nothing is confirmed yet)
    24      8     length               (cumulative payload bytes of the ledger up to and
                                        including this entry)
    32      4     CRC32C over bytes 0..31 and the payload

Example: the third entry (id 2) of ledger 7, payload ``b"abc"``, written when entries 0
and 1 were confirmed and held 10 bytes together, has header fields (7, 2, 1, 13).

The writer builds the bytes once; bookies store and return them verbatim; every reader
(bookie on the way in, client on the way out) checks ids and CRC with :func:`decode`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from crc32c import crc32c

from georep import limits
from georep.invariant import invariant
from georep.storage.errors import CorruptEntry, EntryTooLarge

_FIELDS = struct.Struct(">QqqQ")
_CRC = struct.Struct(">I")
HEADER_BYTES = _FIELDS.size + _CRC.size
invariant(HEADER_BYTES == limits.entry_header_bytes, "entry header size drifted from limits")


@dataclass(frozen=True, slots=True)
class Entry:
    ledger_id: int
    entry_id: int
    last_add_confirmed: int
    length: int
    payload: bytes


def encode(
    ledger_id: int, entry_id: int, last_add_confirmed: int, length: int, payload: bytes
) -> bytes:
    """Build an entry's bytes: header, CRC32C over header fields and payload, payload."""
    if len(payload) > limits.entry_payload_bytes_max:
        raise EntryTooLarge(
            f"entry payload of {len(payload)} bytes exceeds {limits.entry_payload_bytes_max}"
        )
    fields = _FIELDS.pack(ledger_id, entry_id, last_add_confirmed, length)
    checksum = crc32c(payload, crc32c(fields))
    return b"".join((fields, _CRC.pack(checksum), payload))


def peek_ids(data: bytes | memoryview) -> tuple[int, int, int]:
    """(ledger id, entry id, LAC) from the header without checking the CRC."""
    if len(data) < HEADER_BYTES:
        raise CorruptEntry(f"entry of {len(data)} bytes is shorter than its header")
    ledger_id, entry_id, lac, _ = _FIELDS.unpack_from(data, 0)
    return ledger_id, entry_id, lac


def verify(
    data: bytes | memoryview, ledger_id: int | None = None, entry_id: int | None = None
) -> None:
    """Raise :class:`CorruptEntry` unless the CRC holds and the ids are the expected ones."""
    if len(data) < HEADER_BYTES:
        raise CorruptEntry(f"entry of {len(data)} bytes is shorter than its header")
    got_ledger, got_entry, _, _ = _FIELDS.unpack_from(data, 0)
    (stored,) = _CRC.unpack_from(data, _FIELDS.size)
    view = memoryview(data)
    actual = crc32c(view[HEADER_BYTES:], crc32c(view[: _FIELDS.size]))
    if stored != actual:
        raise CorruptEntry(
            f"checksum mismatch in ledger {got_ledger} entry {got_entry}: "
            f"stored {stored:#010x}, computed {actual:#010x}"
        )
    if ledger_id is not None and got_ledger != ledger_id:
        raise CorruptEntry(f"expected ledger {ledger_id}, entry says ledger {got_ledger}")
    if entry_id is not None and got_entry != entry_id:
        raise CorruptEntry(f"expected entry {entry_id}, entry says {got_entry}")


def decode(
    data: bytes | memoryview, ledger_id: int | None = None, entry_id: int | None = None
) -> Entry:
    """Verify and split an entry; the expected ids, when given, must match."""
    verify(data, ledger_id, entry_id)
    got_ledger, got_entry, lac, length = _FIELDS.unpack_from(data, 0)
    return Entry(got_ledger, got_entry, lac, length, bytes(data[HEADER_BYTES:]))
