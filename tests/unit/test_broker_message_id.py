"""Message ids on the wire (uint64 ids, -1 and latest) and batch ack bitsets."""

from __future__ import annotations

import pytest

from georep.broker.message_id import (
    bits_from_words,
    message_id,
    position_of,
    to_int64,
    unacknowledged_bits,
    words_from_bits,
)
from georep.domain.position import Position


def test_negative_ids_travel_as_uint64() -> None:
    data = message_id(Position(-1, -1))
    assert data.ledger_id == 2**64 - 1 and data.entry_id == 2**64 - 1
    assert position_of(data) == Position.EARLIEST
    assert position_of(message_id(Position.LATEST)) == Position.LATEST
    assert to_int64(2**63) == -(2**63)


def test_partition_and_batch_index_only_when_set() -> None:
    plain = message_id(Position(5, 7))
    assert not plain.HasField("partition") and not plain.HasField("batch_index")
    full = message_id(Position(5, 7), partition=2, batch_index=3)
    assert (full.partition, full.batch_index) == (2, 3)


@pytest.mark.parametrize(
    ("bits", "size", "words"),
    [
        (0b101, 3, [5]),
        ((1 << 64) - 1, 64, [-1]),
        (1 << 64, 65, [0, 1]),
        ((1 << 63) | 1, 64, [-(2**63) + 1]),
    ],
)
def test_bitset_words(bits: int, size: int, words: list[int]) -> None:
    assert words_from_bits(bits, size) == words
    assert bits_from_words(words) == bits


def test_unacknowledged_bits() -> None:
    assert unacknowledged_bits([]) is None  # no bitset: the whole entry
    assert unacknowledged_bits([0]) is None  # every member acknowledged
    assert unacknowledged_bits([0b110]) == 0b110
    assert unacknowledged_bits([0b1110], size=3) == 0b110
