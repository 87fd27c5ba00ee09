"""Key hashes and the hash ranges Key_Shared consumers own.

A message's key (ordering key, else partition key) is hashed with Murmur3 x86 32-bit,
seed 0, as Pulsar does, and taken as ``(hash & 0x7fffffff) % range_size`` with
``range_size = limits.key_shared_hash_range_size`` (65,536), so hash ranges that a client
states for sticky Key_Shared mean what they mean on a Pulsar broker.

Auto-split (the default mode): the first consumer owns the whole range [0, 65535]. Each
new consumer takes the upper half of the biggest range (ties: the lowest); a leaving
consumer's range goes to the consumer of the range above it (or below it, if it held the
top). Worked example: A owns [0, 65535]; B joins and takes [32768, 65535]; C joins and
takes [16384, 32767] of A's [0, 32767]; B leaves and C's range grows to [16384, 65535].

Sticky: each consumer states its ranges; a range overlapping another consumer's is
refused with ConsumerAssignError; hashes nobody owns are not dispatched.
"""

from __future__ import annotations

import bisect
from collections.abc import Hashable, Sequence
from typing import Generic, TypeVar

from georep import limits
from georep.broker.errors import ConsumerAssignError

#: Whoever owns a range: a consumer, in the dispatcher.
Owner = TypeVar("Owner", bound=Hashable)

_MASK32 = 0xFFFFFFFF


def murmur3_32(data: bytes, seed: int = 0) -> int:
    """MurmurHash3 x86 32-bit of ``data`` as an unsigned int."""
    c1, c2 = 0xCC9E2D51, 0x1B873593
    h = seed & _MASK32
    length = len(data)
    rounded = length & ~3
    for offset in range(0, rounded, 4):
        k = int.from_bytes(data[offset : offset + 4], "little")
        k = (k * c1) & _MASK32
        k = ((k << 15) | (k >> 17)) & _MASK32
        k = (k * c2) & _MASK32
        h ^= k
        h = ((h << 13) | (h >> 19)) & _MASK32
        h = (h * 5 + 0xE6546B64) & _MASK32
    tail = data[rounded:]
    k = 0
    if len(tail) == 3:
        k ^= tail[2] << 16
    if len(tail) >= 2:
        k ^= tail[1] << 8
    if len(tail) >= 1:
        k ^= tail[0]
        k = (k * c1) & _MASK32
        k = ((k << 15) | (k >> 17)) & _MASK32
        k = (k * c2) & _MASK32
        h ^= k
    h ^= length
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _MASK32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _MASK32
    h ^= h >> 16
    return h


def key_hash(key: bytes, range_size: int = limits.key_shared_hash_range_size) -> int:
    return (murmur3_32(key) & 0x7FFFFFFF) % range_size


class AutoSplitRanges(Generic[Owner]):
    """Hash ranges split among consumers as they come and go (see module docstring)."""

    def __init__(self, range_size: int = limits.key_shared_hash_range_size) -> None:
        self.range_size = range_size
        #: (end, owner) sorted by end; range i spans (end of i-1) + 1 .. end of i
        self._ends: list[int] = []
        self._owners: list[Owner] = []

    def ranges(self) -> list[tuple[int, int, Owner]]:
        out, start = [], 0
        for end, owner in zip(self._ends, self._owners, strict=True):
            out.append((start, end, owner))
            start = end + 1
        return out

    def add(self, owner: Owner) -> None:
        if not self._ends:
            self._ends, self._owners = [self.range_size - 1], [owner]
            return
        start, end, index = 0, 0, -1
        for candidate, (low, high, _) in enumerate(self.ranges()):
            if index < 0 or high - low > end - start:
                start, end, index = low, high, candidate
        if end == start:
            raise ConsumerAssignError("no hash range left to split for another consumer")
        middle = start + (end - start) // 2
        self._ends.insert(index, middle)
        self._owners.insert(index + 1, owner)

    def remove(self, owner: Owner) -> None:
        if owner not in self._owners:
            return
        index = self._owners.index(owner)
        if len(self._owners) == 1:
            self._ends, self._owners = [], []
        elif index == len(self._owners) - 1:
            del self._ends[index - 1]  # the range below extends to the top
            del self._owners[index]
        else:
            del self._ends[index]  # the range above extends down
            del self._owners[index]

    def owner_of(self, hash_value: int) -> Owner | None:
        if not self._ends:
            return None
        return self._owners[bisect.bisect_left(self._ends, hash_value)]


class StickyRanges(Generic[Owner]):
    """Hash ranges each consumer states; overlaps are refused."""

    def __init__(self, range_size: int = limits.key_shared_hash_range_size) -> None:
        self.range_size = range_size
        self._starts: list[int] = []
        self._spans: list[tuple[int, int, Owner]] = []

    def add(self, owner: Owner, ranges: Sequence[tuple[int, int]]) -> None:
        if not ranges:
            raise ConsumerAssignError("a sticky Key_Shared consumer must state hash ranges")
        wanted = sorted(ranges)
        for index, (start, end) in enumerate(wanted):
            if not 0 <= start <= end < self.range_size:
                raise ConsumerAssignError(
                    f"hash range [{start}, {end}] is outside [0, {self.range_size - 1}]"
                )
            if index and start <= wanted[index - 1][1]:
                raise ConsumerAssignError(
                    f"hash ranges {wanted[index - 1]} and {(start, end)} overlap"
                )
            other = self._overlapping(start, end)
            if other is not None:
                raise ConsumerAssignError(
                    f"hash range [{start}, {end}] overlaps [{other[0]}, {other[1]}] of"
                    " another consumer"
                )
        for start, end in wanted:
            index = bisect.bisect_left(self._starts, start)
            self._starts.insert(index, start)
            self._spans.insert(index, (start, end, owner))

    def remove(self, owner: Owner) -> None:
        kept = [span for span in self._spans if span[2] is not owner]
        self._spans = kept
        self._starts = [span[0] for span in kept]

    def _overlapping(self, start: int, end: int) -> tuple[int, int, Owner] | None:
        for span in self._spans:
            if span[0] <= end and start <= span[1]:
                return span
        return None

    def owner_of(self, hash_value: int) -> Owner | None:
        index = bisect.bisect_right(self._starts, hash_value) - 1
        if index < 0:
            return None
        start, end, owner = self._spans[index]
        return owner if start <= hash_value <= end else None
