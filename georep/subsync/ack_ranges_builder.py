"""Building a subscription's acknowledged-ranges marker on the source cluster.

The cursor's acknowledged state above its mark-delete position is in local positions.
Its messages have different origins: our own (published here) and copies of other
clusters' messages (replicated here). The marker groups them by origin, in each
origin's own positions, so every receiver can translate them (subsync/ack_sync.py):

- own origin: the local ranges as they are (a receiver maps them through its copies;
  positions of copies inside them simply map to nothing there);
- origin X: the local ranges mapped through the *reverse* index of X's copies
  (local position -> X's position: the same increasing structure as OriginIndex, keyed
  by local position), which lands them on X's own positions.

Everything at or below the mark-delete position is acknowledged too, and is sent as
one leading range per origin, from the origin's start: ``(0,0)..MDP`` for our own
messages, and ``(0,0)..F`` for origin X, where F is X's position of the last copy of
X's at or below the MDP. Every message of X up to F was replicated here before that
copy (replication keeps order and skips nothing of X's own), so all of them lie below
the MDP: the range is exact in X's terms, and a receiver maps it only onto entries
whose origin is X (ack_sync.py), never onto a third cluster's copies.

At most ``marker_ranges_count_max`` ranges are sent: the lowest first (nearest the
mark-delete position, what a failover needs first); the rest follow in later markers
once the mark-delete position moves. ``truncated`` in the result says so.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from georep import limits
from georep.domain.position import Position
from georep.snapshots import markers_pb2 as pb
from georep.snapshots.markers import batch_words, position
from georep.subsync.range_mapping import OriginIndex, Range, merge


@dataclass(frozen=True, slots=True)
class BuiltMarker:
    marker: pb.SubscriptionAckRanges
    truncated: bool


def build_ack_ranges(
    *,
    subscription: str,
    source_cluster: str,
    sequence: int,
    mark_delete: Position,
    acknowledged: Iterable[Range],
    partial_batches: Mapping[Position, tuple[int, set[int]]],
    reverse_indexes: Mapping[str, OriginIndex],
    own_index: OriginIndex | None = None,
) -> BuiltMarker:
    """``acknowledged``: local ranges above the MDP; ``partial_batches``: local entry ->
    (batch size, acknowledged indexes); ``reverse_indexes``: origin -> local->origin;
    ``own_index``: this cluster's own data entries (each as itself), when known."""
    local_ranges = merge(acknowledged)
    budget = limits.marker_ranges_count_max
    truncated = False

    def take(ranges: list[Range]) -> list[Range]:
        nonlocal budget, truncated
        kept = ranges[: max(budget, 0)]
        truncated = truncated or len(kept) < len(ranges)
        budget -= len(kept)
        return kept

    below = _at_or_below(mark_delete)
    own_end = below
    if own_index is not None and below is not None:
        # The last own message at or below the MDP: the same messages, and a marker that
        # does not change when the MDP only steps over markers (or copies).
        own_end = own_index.floor(below)
    own_prefix: list[Range] = [(Position(0, 0), own_end)] if own_end is not None else []
    own = take(local_ranges)
    on_copies: set[Position] = set()
    others: list[pb.OriginAcks] = []
    for origin_cluster, index in sorted(reverse_indexes.items()):
        floor = index.floor(below) if below is not None else None
        mapped: list[Range] = [(Position(0, 0), floor)] if floor is not None else []
        for first, last in own:
            ranges, _ = index.map_range(first, last)  # the pending tail: not X's copies
            mapped.extend(ranges)
        batches = {}
        for where, batch in partial_batches.items():
            origin_position = index.lookup(where)
            if origin_position is not None:
                batches[origin_position] = batch
                on_copies.add(where)
        mapped = take(merge(mapped))
        if mapped or batches:
            others.append(_origin(origin_cluster, mapped, batches))
    own_batches = {w: b for w, b in partial_batches.items() if w not in on_copies}
    origins = [_origin(source_cluster, merge([*own_prefix, *own]), own_batches), *others]
    marker = pb.SubscriptionAckRanges(
        subscription_name=subscription,
        source_cluster=source_cluster,
        sequence=sequence,
        origins=origins,
    )
    if below is not None:
        marker.mark_delete_position.CopyFrom(position(*below))
    return BuiltMarker(marker, truncated)


def _at_or_below(position: Position) -> Position | None:
    """``position`` as a range end: an MDP of ``(l, -1)`` (nothing of ledger l yet)
    means everything of the ledgers before l."""
    ledger_id, entry_id = position
    if entry_id >= 0:
        return position
    return Position.end_of_ledger(ledger_id - 1) if ledger_id > 0 else None


def _origin(
    cluster: str, ranges: list[Range], batches: Mapping[Position, tuple[int, set[int]]]
) -> pb.OriginAcks:
    return pb.OriginAcks(
        origin_cluster=cluster,
        ranges=[pb.PositionRange(first=position(*f), last=position(*t)) for f, t in ranges],
        partial_batches=[
            pb.PartialBatch(
                position=position(*where),
                batch_size=size,
                acknowledged_words=batch_words(acked, size),
            )
            for where, (size, acked) in sorted(batches.items())
            if acked
        ],
    )
