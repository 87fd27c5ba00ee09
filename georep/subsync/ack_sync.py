"""Applying a remote subscription's acknowledged ranges on this cluster.

A SubscriptionAckRanges marker (snapshots/markers.py) carries the source cluster's
whole acknowledged set above its mark-delete position, grouped by the origin cluster
of the messages: ranges in each origin's own positions, plus partially acknowledged
batches. Applying one is therefore idempotent, and a newer marker supersedes an older
one. For each origin:

- another cluster X: mapped through the OriginIndex of X (the copies of X's messages
  in our topic); the part of a range not replicated here yet is kept *pending* and
  applied when the copies arrive (:meth:`AckRangesReceiver.on_replicated`);
- our own cluster: mapped the same way through the *identity* index of our own
  messages (each own data entry recorded as itself). A range in our positions may
  span copies of a third cluster's messages and markers; only our own messages in it
  were acknowledged as ours, so only they are mapped (the copies are governed by their
  own origin's group), and own entries the reader has not seen yet wait as pending.

The receiver never produces an acknowledgement for a position that was not
acknowledged at the source: ranges map only onto copies of acknowledged origin
entries, and a partial batch maps only its acknowledged indexes.

Example: source A sends origins {A: (7,0)..(7,4)}; here A's (7,0)..(7,2) were copied
to (3,10)..(3,12) so far. The plan acknowledges (3,10)..(3,12) and keeps
(7,3)..(7,4) pending; when (7,3) arrives as (3,13), on_replicated acknowledges it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from georep.domain.position import Position
from georep.snapshots import markers_pb2 as pb
from georep.snapshots.markers import batch_indexes, key
from georep.subsync.range_mapping import OriginIndex, Range, merge


@dataclass(slots=True)
class AckPlan:
    """Local acknowledgements to make: whole ranges, and batch indexes per entry."""

    ranges: list[Range] = field(default_factory=list)
    batches: dict[Position, set[int]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.ranges or self.batches)

    def absorb(self, other: AckPlan) -> None:
        self.ranges = merge([*self.ranges, *other.ranges])
        for where, indexes in other.batches.items():
            self.batches.setdefault(where, set()).update(indexes)


def _leading_end(
    ranges: list[Range], index: OriginIndex | None, done: Position | None
) -> Position | None:
    """How far everything from the origin's start is now planned: the first range's
    end (or the last copy recorded, if sooner), when that range starts at the origin's
    start or right after what was already done; else None."""
    if not ranges or index is None or index.last_origin is None:
        return None
    first, last = ranges[0]
    start = (0, 0) if done is None else (done[0], done[1] + 1)
    if first != start:
        return None
    end = min(last, index.last_origin)
    return end if end >= first else None


@dataclass(slots=True)
class _Pending:
    ranges: list[Range] = field(default_factory=list)
    batches: dict[Position, set[int]] = field(default_factory=dict)


class AckRangesReceiver:
    """One replicated subscription, one source cluster, one topic partition."""

    def __init__(self, local_cluster: str) -> None:
        self.local_cluster = local_cluster
        self.last_sequence: int | None = None
        self._pending: dict[str, _Pending] = {}
        self.stale_markers = 0
        #: origin -> the origin position up to which everything of the marker's leading
        #: range (the MDP) has been planned already: later markers map only what is above
        #: it, so a marker costs its new ranges, not the whole history of the index.
        self._done: dict[str, Position] = {}

    @property
    def pending_ranges(self) -> int:
        return sum(len(p.ranges) + len(p.batches) for p in self._pending.values())

    def on_marker(
        self, marker: pb.SubscriptionAckRanges, indexes: Mapping[str, OriginIndex]
    ) -> AckPlan | None:
        """The acknowledgements a (checked) marker asks for; None for a stale one."""
        if self.last_sequence is not None and marker.sequence <= self.last_sequence:
            self.stale_markers += 1
            return None
        self.last_sequence = marker.sequence
        self._pending = {}
        plan = AckPlan()
        for origin in marker.origins:
            ranges = self._above_done(
                origin.origin_cluster, [(key(r.first), key(r.last)) for r in origin.ranges]
            )
            lead_done = _leading_end(
                ranges, indexes.get(origin.origin_cluster), self._done.get(origin.origin_cluster)
            )
            batches = {
                key(b.position): set(batch_indexes(b.acknowledged_words))
                for b in origin.partial_batches
            }
            plan.absorb(self._apply(origin.origin_cluster, ranges, batches, indexes))
            if lead_done is not None:
                self._done[origin.origin_cluster] = lead_done
        return plan

    def _above_done(self, origin_cluster: str, ranges: list[Range]) -> list[Range]:
        done = self._done.get(origin_cluster)
        if done is None:
            return ranges
        out = []
        for first, last in ranges:
            if last <= done:
                continue
            out.append((max(first, Position(done[0], done[1] + 1)), last))
        return out

    def on_replicated(self, origin_cluster: str, indexes: Mapping[str, OriginIndex]) -> AckPlan:
        """Copies from ``origin_cluster`` arrived: what pending acknowledgements now
        apply."""
        pending = self._pending.pop(origin_cluster, None)
        if pending is None:
            return AckPlan()
        return self._apply(origin_cluster, pending.ranges, pending.batches, indexes)

    def _apply(
        self,
        origin_cluster: str,
        ranges: list[Range],
        batches: dict[Position, set[int]],
        indexes: Mapping[str, OriginIndex],
    ) -> AckPlan:
        index = indexes.get(origin_cluster)
        plan = AckPlan()
        still = _Pending()
        for first, last in ranges:
            if index is None:
                still.ranges.append((first, last))
                continue
            mapped, pending = index.map_range(first, last)
            plan.ranges.extend(mapped)
            if pending is not None:
                still.ranges.append(pending)
        for where, acked in batches.items():
            local = index.lookup(where) if index is not None else None
            if local is not None:
                plan.batches.setdefault(local, set()).update(acked)
            elif acked and (
                index is None or index.last_origin is None or where > index.last_origin
            ):
                still.batches[where] = set(acked)
        plan.ranges = merge(plan.ranges)
        if still.ranges or still.batches:
            self._pending[origin_cluster] = still
        return plan
