"""Completed snapshots a subscription can still use, bounded, spread over the backlog.

A completed snapshot says: "once this subscription's mark-delete position (MDP) passes
local position P, everything up to position R_x of each remote x has been consumed
here". The cache keeps such snapshots ordered by P. When the MDP moves,
:meth:`SnapshotCache.advance` hands out the newest snapshot at or below it (the one
that moves the remotes furthest) and drops every older one.

The cache is bounded (default 10). Keeping only the newest snapshots would stall a
slow subscription: all cached snapshots would sit far above its MDP and none would
ever be reached, while new ones keep replacing each other. So a full cache evicts the
snapshot whose removal leaves the smallest gap: the one (never the first or the last)
whose neighbours are closest together, keeping snapshots spread from the MDP up to
the newest. Distances are measured in entries where positions share a ledger and by
ledger otherwise (``position_distance``).

Example, capacity 3, snapshots at entries 10, 20, 30 of one ledger, then 31 arrives:
removing 20 leaves a gap of 20 (10..30), removing 30 a gap of 11 (20..31), so 30 goes
and the cache holds 10, 20, 31.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from dataclasses import dataclass, field

from georep import limits
from georep.domain.position import Position
from georep.invariant import invariant, present

#: Distance counted for a step between ledgers: later ledgers are further than any
#: entry offset inside one.
_LEDGER_STEP = 1 << 40


def position_distance(a: Position, b: Position) -> int:
    """A monotone distance between positions ``a <= b`` (see the module docstring)."""
    invariant(a <= b, f"{a} after {b}")
    if a[0] == b[0]:
        return b[1] - a[1]
    return (b[0] - a[0]) * _LEDGER_STEP + b[1]


@dataclass(frozen=True, slots=True)
class CachedSnapshot:
    snapshot_id: str
    local_position: Position
    remote_positions: Mapping[str, Position] = field(default_factory=dict)


class SnapshotCache:
    def __init__(self, capacity: int = limits.snapshot_cache_count_default) -> None:
        invariant(
            2 <= capacity <= limits.snapshot_cache_count_max, f"snapshot cache capacity {capacity}"
        )
        self.capacity = capacity
        self._snapshots: list[CachedSnapshot] = []
        self._keys: list[Position] = []
        self.evicted = 0

    def __len__(self) -> int:
        return len(self._snapshots)

    def positions(self) -> list[Position]:
        return list(self._keys)

    def add(self, snapshot: CachedSnapshot) -> None:
        """Cache a completed snapshot; a full cache evicts as the docstring says."""
        key = snapshot.local_position
        at = bisect.bisect_left(self._keys, key)
        if at < len(self._keys) and self._keys[at] == key:
            return  # one snapshot per position is enough
        self._snapshots.insert(at, snapshot)
        self._keys.insert(at, key)
        if len(self._snapshots) > self.capacity:
            self._evict_closest()

    def _evict_closest(self) -> None:
        keys = self._keys
        best, best_gap = None, None
        for i in range(1, len(keys) - 1):
            gap = position_distance(keys[i - 1], keys[i + 1])
            if best_gap is None or gap < best_gap:
                best, best_gap = i, gap
        best = present(best, "eviction needs at least three snapshots")
        del self._snapshots[best]
        del keys[best]
        self.evicted += 1

    def advance(self, mark_delete: Position) -> CachedSnapshot | None:
        """The newest snapshot at or below ``mark_delete``, removing it and every older
        one; None when the MDP has not reached any."""
        at = bisect.bisect_right(self._keys, mark_delete)
        if at == 0:
            return None
        reached = self._snapshots[at - 1]
        del self._snapshots[:at]
        del self._keys[:at]
        return reached
