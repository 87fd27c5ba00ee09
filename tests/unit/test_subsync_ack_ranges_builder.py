"""Acknowledged ranges built on A and applied on B: the whole translation, end to end."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from georep import limits
from georep.domain.position import Position
from georep.snapshots import markers_pb2 as pb
from georep.snapshots.markers import MarkerKind, decode, encode
from georep.subsync.ack_ranges_builder import build_ack_ranges
from georep.subsync.ack_sync import AckRangesReceiver
from georep.subsync.range_mapping import OriginIndex


@st.composite
def two_clusters(draw):
    """A and B replicate both ways. A's log holds A's own messages and copies of B's;
    B's log holds B's own and copies of A's (those replicated so far)."""
    a_items = draw(st.lists(st.sampled_from(["own", "copy"]), min_size=1, max_size=30))
    b_own_count = draw(st.integers(a_items.count("copy"), a_items.count("copy") + 5))
    a_own_count = a_items.count("own")
    replicated_to_b = draw(st.integers(0, a_own_count))
    # B's log: its own entries interleaved with the first copies of A's
    b_items = ["own"] * b_own_count + ["copy"] * replicated_to_b
    b_items = draw(st.permutations(b_items))
    b_positions = [(20, i) for i in range(len(b_items))]
    b_own = [p for p, kind in zip(b_positions, b_items, strict=True) if kind == "own"]
    b_copies = [p for p, kind in zip(b_positions, b_items, strict=True) if kind == "copy"]
    a_positions = [(10, i) for i in range(len(a_items))]
    a_own = [p for p, kind in zip(a_positions, a_items, strict=True) if kind == "own"]
    a_copies = [p for p, kind in zip(a_positions, a_items, strict=True) if kind == "copy"]
    copy_on_b = dict(zip(a_own, b_copies, strict=False))  # A's own -> its copy on B
    origin_on_b = dict(zip(a_copies, b_own, strict=False))  # A's copy of B's -> B's own
    acked = sorted(draw(st.sets(st.sampled_from(a_positions))))
    mark_delete = (10, draw(st.integers(-1, len(a_positions) - 1)))
    acked = sorted(set(acked) | {p for p in a_positions if p <= mark_delete})
    return a_positions, b_positions, b_own, copy_on_b, origin_on_b, mark_delete, acked


def ranges_of(positions):
    out: list[tuple[tuple[int, int], tuple[int, int]]] = []
    for p in positions:
        if out and out[-1][1][0] == p[0] and out[-1][1][1] + 1 == p[1]:
            out[-1] = (out[-1][0], p)
        else:
            out.append((p, p))
    return out


@settings(max_examples=300)
@given(two_clusters())
def test_acks_on_a_land_exactly_on_the_corresponding_entries_of_b(case):
    _, b_positions, b_own, copy_on_b, origin_on_b, mark_delete, acked = case
    reverse_b = OriginIndex()  # on A: local position of a copy -> B's position
    for a_pos, b_pos in sorted(origin_on_b.items()):
        reverse_b.record(a_pos, b_pos)
    forward_a = OriginIndex()  # on B: A's position -> local position of its copy
    for a_pos, b_pos in sorted(copy_on_b.items()):
        forward_a.record(a_pos, b_pos)

    built = build_ack_ranges(
        subscription="s",
        source_cluster="a",
        sequence=1,
        mark_delete=mark_delete,
        acknowledged=ranges_of([p for p in acked if p > mark_delete]),
        partial_batches={},
        reverse_indexes={"b": reverse_b},
    )
    _, marker = decode(
        MarkerKind.SUBSCRIPTION_ACK_RANGES, encode(MarkerKind.SUBSCRIPTION_ACK_RANGES, built.marker)
    )
    own_b = OriginIndex()  # on B: its own entries, each as itself
    for b_pos in b_own:
        own_b.record(b_pos, b_pos)
    assert isinstance(marker, pb.SubscriptionAckRanges)
    plan = AckRangesReceiver("b").on_marker(marker, {"a": forward_a, "b": own_b})
    assert plan is not None
    applied = {p for p in b_positions if any(f <= p <= t for f, t in plan.ranges)}

    expected = {copy_on_b[p] for p in acked if p in copy_on_b}
    expected |= {origin_on_b[p] for p in acked if p in origin_on_b}
    assert applied == expected


def test_partial_batches_go_to_their_origin():
    reverse_b = OriginIndex()
    reverse_b.record(Position(10, 3), Position(20, 7))  # A's (10,3) is a copy of B's (20,7)
    built = build_ack_ranges(
        subscription="s",
        source_cluster="a",
        sequence=1,
        mark_delete=Position(10, 0),
        acknowledged=[],
        partial_batches={Position(10, 3): (4, {1}), Position(10, 5): (8, {0, 7})},
        reverse_indexes={"b": reverse_b},
    )
    by_origin = {o.origin_cluster: o for o in built.marker.origins}
    assert [b.position.entry_id for b in by_origin["a"].partial_batches] == [5]
    assert [b.position.entry_id for b in by_origin["b"].partial_batches] == [7]


def test_ranges_past_the_limit_are_left_for_later_lowest_first():
    count = limits.marker_ranges_count_max + 5
    acknowledged = [(Position(10, 2 * i), Position(10, 2 * i)) for i in range(count)]
    built = build_ack_ranges(
        subscription="s",
        source_cluster="a",
        sequence=1,
        mark_delete=Position(10, 0),
        acknowledged=acknowledged,
        partial_batches={},
        reverse_indexes={},
    )
    assert built.truncated
    (own,) = built.marker.origins
    assert len(own.ranges) == limits.marker_ranges_count_max
    assert own.ranges[0].first.entry_id == 0
    encode(MarkerKind.SUBSCRIPTION_ACK_RANGES, built.marker)
