"""A bounded set of closed ranges of positions: a cursor's individually deleted entries.

Ranges are kept sorted and disjoint in two parallel lists (lows, highs), so membership
and insertion are a binary search. Two ranges merge when they overlap or touch inside one
ledger: [(5,0),(5,3)] + [(5,4),(5,6)] -> [(5,0),(5,6)]. Ranges in different ledgers stay
apart even when no entry lies between them, because this class knows nothing of where a
ledger ends; the cursor joins them when they reach its mark-delete position (see
``ack_state``). Positions need not name entries: ``remove_below((5, 9))`` turns
[(5,7),(6,2)] into [(5,10),(6,2)], which holds the same entries whether or not (5,10)
exists.

Bounded: at most ``ranges_max`` ranges. An ``add`` that would make one more forgets the
highest range instead (the one farthest from the mark-delete position, the last a
consumer would miss). The forgotten entries count as unacknowledged again, which means
redelivery, never loss; ``dropped_ranges`` counts them. Example, ranges_max = 2, ranges
[(1,1)], [(1,5)]: ``add((1,3), (1,3))`` makes three, so [(1,5)] is dropped.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator

from georep import limits
from georep.domain.position import Position
from georep.invariant import invariant
from georep.storage.errors import InvalidArgument


class RangeSet:
    __slots__ = ("_highs", "_lows", "dropped_ranges", "ranges_max")

    def __init__(self, ranges_max: int = limits.cursor_ranges_count_max) -> None:
        if not 1 <= ranges_max <= limits.cursor_ranges_count_max:
            raise InvalidArgument(
                f"ranges_max must be 1..{limits.cursor_ranges_count_max}, got {ranges_max}"
            )
        self.ranges_max = ranges_max
        self._lows: list[Position] = []
        self._highs: list[Position] = []
        #: Ranges forgotten because the set was full (each one's acks will be redelivered).
        self.dropped_ranges = 0

    @classmethod
    def of(
        cls,
        ranges: list[tuple[Position, Position]],
        ranges_max: int = limits.cursor_ranges_count_max,
    ) -> RangeSet:
        result = cls(ranges_max)
        for low, high in ranges:
            result.add(low, high)
        return result

    def add(self, low: Position, high: Position) -> None:
        """Add the closed range [low, high] (entry ids >= 0), merging as the module
        docstring says; past ``ranges_max`` the highest range is dropped."""
        if not (low.is_entry_id and high.is_entry_id and low <= high):
            raise InvalidArgument(f"bad range [{low}, {high}]")
        before = Position(low.ledger_id, low.entry_id - 1)  # touching from below
        after = Position(high.ledger_id, high.entry_id + 1)  # touching from above
        first = bisect.bisect_left(self._highs, before)
        last = bisect.bisect_right(self._lows, after)  # ranges [first, last) merge
        if first < last:
            low = min(low, self._lows[first])
            high = max(high, self._highs[last - 1])
        self._lows[first:last] = [low]
        self._highs[first:last] = [high]
        if len(self._lows) > self.ranges_max:
            self._lows.pop()
            self._highs.pop()
            self.dropped_ranges += 1
        self._check()

    def contains(self, position: Position) -> bool:
        return self.range_of(position) is not None

    __contains__ = contains

    def range_of(self, position: Position) -> tuple[Position, Position] | None:
        """The range holding ``position``, or None."""
        index = bisect.bisect_right(self._lows, position) - 1
        if index >= 0 and self._highs[index] >= position:
            return self._lows[index], self._highs[index]
        return None

    def remove_below(self, position: Position) -> None:
        """Forget every position <= ``position``."""
        cut = bisect.bisect_right(self._highs, position)
        del self._lows[:cut]
        del self._highs[:cut]
        if self._lows and self._lows[0] <= position:
            self._lows[0] = Position(position.ledger_id, position.entry_id + 1)
        self._check()

    def first(self) -> tuple[Position, Position] | None:
        return (self._lows[0], self._highs[0]) if self._lows else None

    def clear(self) -> None:
        self._lows.clear()
        self._highs.clear()

    def ranges(self, count_max: int | None = None) -> list[tuple[Position, Position]]:
        """The ranges in order; the lowest ``count_max`` when given."""
        end = len(self._lows) if count_max is None else min(count_max, len(self._lows))
        return list(zip(self._lows[:end], self._highs[:end], strict=True))

    def __iter__(self) -> Iterator[tuple[Position, Position]]:
        """Lazily, lowest first; do not change the set while iterating."""
        return zip(self._lows, self._highs, strict=True)

    def __len__(self) -> int:
        return len(self._lows)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RangeSet):
            return NotImplemented
        return self._lows == other._lows and self._highs == other._highs

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        shown = ", ".join(f"[{low}, {high}]" for low, high in self.ranges(8))
        more = f", ... {len(self) - 8} more" if len(self) > 8 else ""
        return f"RangeSet({shown}{more})"

    def _check(self) -> None:
        # Cheap checks at the ends; the property tests check the whole order.
        invariant(len(self._lows) == len(self._highs), "range set lists out of step")
        invariant(len(self._lows) <= self.ranges_max, "range set over its bound")
