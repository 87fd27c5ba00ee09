"""Message ids on the wire, and the batch acknowledgement bitsets they carry.

A MessageId is (ledger id, entry id, partition, batch index). On the wire ledger and entry
ids are ``uint64`` while clients hold them as ``int64``: -1 travels as 2**64-1, and the
client's ``MessageId.latest`` as 2**63-1. :func:`position_of` maps both back.

Batch bitsets (``ack_set``): bit i of the batch is bit ``i % 64`` of word ``i // 64``; a
set bit means message i is still unacknowledged. Worked example, a batch of 3 whose
message 1 was acknowledged: bits 0b101, one word ``[5]``. Words are signed int64 on the
wire, so a word with bit 63 set travels negative.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from georep.domain.position import ID_MAX, Position
from georep.wire import pulsar_wire_pb2 as pb

_U64 = 2**64
_I64_MAX = ID_MAX
_WORD_BITS = 64
_WORD_MASK = _U64 - 1


def to_int64(value: int) -> int:
    return value - _U64 if value > _I64_MAX else value


def to_uint64(value: int) -> int:
    return value + _U64 if value < 0 else value


def message_id(position: Position, partition: int = -1, batch_index: int = -1) -> pb.MessageIdData:
    ledger_id, entry_id = position
    data = pb.MessageIdData(ledger_id=to_uint64(ledger_id), entry_id=to_uint64(entry_id))
    if partition >= 0:
        data.partition = partition
    if batch_index >= 0:
        data.batch_index = batch_index
    return data


def position_of(data: pb.MessageIdData) -> Position:
    """(ledger id, entry id) of a wire id, as the client's signed values."""
    return Position(to_int64(data.ledger_id), to_int64(data.entry_id))


def bits_from_words(words: Iterable[int]) -> int:
    """The bitset as a non-negative int."""
    bits = 0
    for index, word in enumerate(words):
        bits |= (word & _WORD_MASK) << (_WORD_BITS * index)
    return bits


def words_from_bits(bits: int, size: int) -> list[int]:
    """The signed int64 words of ``bits`` for a batch of ``size`` messages."""
    words = []
    for index in range((size + _WORD_BITS - 1) // _WORD_BITS):
        words.append(to_int64((bits >> (_WORD_BITS * index)) & _WORD_MASK))
    return words


def all_bits(size: int) -> int:
    return (1 << size) - 1


def unacknowledged_bits(ack_set: Sequence[int], size: int | None = None) -> int | None:
    """The still-unacknowledged bits an ack carries, or None when it acknowledges the whole
    entry (no bitset, or an empty one)."""
    if not ack_set:
        return None
    bits = bits_from_words(ack_set)
    if size is not None:
        bits &= all_bits(size)
    return bits or None
