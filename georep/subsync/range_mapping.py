"""Translating acknowledged ranges from an origin cluster's positions to local ones.

A replicated copy carries its origin position (``georep.origin.position``), and
replication keeps order, so for one origin cluster and topic partition the map from
origin positions to local positions is increasing. :class:`OriginIndex` stores it as
*runs*: stretches where consecutive origin entries landed on consecutive local entries
of one local ledger. Example, origin entries (7,0)..(7,9) replicated to local ledger 3
with a local marker written after the fifth::

    origin (7,0)..(7,4) -> local (3,10)..(3,14)     run 1
    origin (7,5)..(7,9) -> local (3,16)..(3,20)     run 2 (local (3,15) is the marker)

An acknowledged origin range (7,2)..(7,6) then maps to local (3,12)..(3,14) and
(3,16)..(3,17). The part of a range beyond the last replicated entry has not arrived
yet: :meth:`OriginIndex.map_range` returns it as *pending*, to be applied when it does.

Positions are :class:`~georep.domain.position.Position`. Within one ledger entry ids are
consecutive; across ledgers nothing is assumed except order, so a range is kept as its
two ends, and "the entry after (l, e)" is only known inside a run.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass

from georep.domain.position import Position
from georep.invariant import invariant

Range = tuple[Position, Position]


@dataclass(slots=True)
class Run:
    origin_first: Position
    local_first: Position
    count: int

    @property
    def origin_last(self) -> Position:
        return _shifted(self.origin_first, self.count - 1)

    @property
    def local_last(self) -> Position:
        return _shifted(self.local_first, self.count - 1)


class OriginIndex:
    """Origin position -> local position, for one origin cluster and partition."""

    def __init__(self) -> None:
        self._runs: list[Run] = []
        self._firsts: list[Position] = []  # origin_first of each run, for bisect

    def __len__(self) -> int:
        return len(self._runs)

    @property
    def last_origin(self) -> Position | None:
        return self._runs[-1].origin_last if self._runs else None

    def record(self, origin: Position, local: Position) -> None:
        """A replicated entry arrived: ``origin`` was stored at ``local``. Entries must be
        recorded in replication order (both positions increasing)."""
        if self._runs:
            run = self._runs[-1]
            invariant(
                origin > run.origin_last and local > run.local_last,
                f"replication order broken: {origin}->{local} after "
                f"{run.origin_last}->{run.local_last}",
            )
            if origin == _shifted(run.origin_first, run.count) and local == _shifted(
                run.local_first, run.count
            ):
                run.count += 1
                return
        self._runs.append(Run(origin, local, 1))
        self._firsts.append(origin)

    def lookup(self, origin: Position) -> Position | None:
        """The local position of one origin entry, or None if it has no copy here."""
        index = bisect.bisect_right(self._firsts, origin) - 1
        if index < 0:
            return None
        run = self._runs[index]
        if origin[0] != run.origin_first[0] or origin[1] >= run.origin_first[1] + run.count:
            return None
        return _shifted(run.local_first, origin[1] - run.origin_first[1])

    def map_range(self, first: Position, last: Position) -> tuple[list[Range], Range | None]:
        """Local ranges holding the copies of origin entries ``first..last``, and the
        part of the range past the last recorded entry (pending), if any."""
        invariant(first <= last, f"range {first}..{last} ends before it starts")
        mapped: list[Range] = []
        start = max(0, bisect.bisect_right(self._firsts, first) - 1)
        for run in self._runs[start:]:
            if run.origin_first > last:
                break
            if run.origin_last < first:
                continue
            lo = max(first, run.origin_first)
            hi = min(last, run.origin_last)
            offset_lo = lo[1] - run.origin_first[1]
            offset_hi = hi[1] - run.origin_first[1]
            mapped.append(
                (_shifted(run.local_first, offset_lo), _shifted(run.local_first, offset_hi))
            )
        pending = None
        tail = self.last_origin
        if tail is None or last > tail:
            pending = (first if tail is None or first > tail else _after(tail), last)
        return merge(mapped), pending

    def count(self, after: Position, upto: Position) -> int:
        """How many recorded entries are keyed above ``after`` and at or below ``upto``:
        the runs touched are found by bisection, so the cost follows the runs inside the
        interval, not the index's size."""
        if upto <= after:
            return 0
        total = 0
        start = max(0, bisect.bisect_right(self._firsts, after) - 1)
        for run in self._runs[start:]:
            if run.origin_first > upto:
                break
            last = run.origin_last
            if last <= after:
                continue
            lo = run.origin_first if run.origin_first > after else after.next_in_ledger()
            hi = upto if upto < last else last
            if lo <= hi:  # both in the run's ledger
                total += hi[1] - lo[1] + 1
        return total

    def floor(self, origin: Position) -> Position | None:
        """The local position of the last recorded entry at or below ``origin``."""
        index = bisect.bisect_right(self._firsts, origin) - 1
        if index < 0:
            return None
        run = self._runs[index]
        if origin >= run.origin_last:
            return run.local_last
        return _shifted(run.local_first, origin[1] - run.origin_first[1])

    def drop_oldest(self, runs: int) -> None:
        """Forget the ``runs`` oldest runs (the index's memory bound)."""
        del self._runs[:runs]
        del self._firsts[:runs]

    def forget_before(self, origin: Position) -> None:
        """Drop runs wholly below ``origin`` (already applied and below the MDP)."""
        keep = 0
        while keep < len(self._runs) and self._runs[keep].origin_last < origin:
            keep += 1
        del self._runs[:keep]
        del self._firsts[:keep]


def _after(position: Position) -> Position:
    return _shifted(position, 1)


def _shifted(position: Position, entries: int) -> Position:
    """``entries`` further in the same ledger: (l, e) -> (l, e + entries). By index: a
    plain (ledger, entry) pair from a caller outside the checker works too."""
    return Position(position[0], position[1] + entries)


def merge(ranges: Iterable[Range]) -> list[Range]:
    """Sorted, non-overlapping ranges covering the same entries; ranges that touch
    inside one ledger (``..(l, e)`` and ``(l, e+1)..``) are joined."""
    result: list[Range] = []
    for first, last in sorted(ranges):
        invariant(first <= last, f"range {first}..{last} ends before it starts")
        if result:
            prev_first, prev_last = result[-1]
            touches = first[0] == prev_last[0] and first[1] <= prev_last[1] + 1
            if first <= prev_last or touches:
                result[-1] = (prev_first, max(prev_last, last))
                continue
        result.append((first, last))
    return result
