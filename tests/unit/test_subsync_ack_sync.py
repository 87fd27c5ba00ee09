"""Acknowledged-range sync on the receiving side, against a brute-force model."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from georep.domain.position import Position
from georep.snapshots import markers_pb2 as pb
from georep.snapshots.markers import batch_words, position
from georep.subsync.ack_sync import AckRangesReceiver
from georep.subsync.range_mapping import OriginIndex


def marker(sequence, origins, partial=None):
    return pb.SubscriptionAckRanges(
        subscription_name="s",
        source_cluster="a",
        sequence=sequence,
        origins=[
            pb.OriginAcks(
                origin_cluster=name,
                ranges=[pb.PositionRange(first=position(*f), last=position(*t)) for f, t in spans],
                partial_batches=[
                    pb.PartialBatch(
                        position=position(*p),
                        batch_size=size,
                        acknowledged_words=batch_words(acked, size),
                    )
                    for p, size, acked in (partial or {}).get(name, [])
                ],
            )
            for name, spans in origins.items()
        ],
    )


def test_docstring_example():
    index = OriginIndex()
    for e in range(3):
        index.record(Position(7, e), Position(3, 10 + e))
    receiver = AckRangesReceiver("b")
    plan = receiver.on_marker(marker(1, {"a": [((7, 0), (7, 4))]}), {"a": index})
    assert plan is not None
    assert plan.ranges == [((3, 10), (3, 12))]
    assert receiver.pending_ranges == 1
    index.record(Position(7, 3), Position(3, 13))
    replicated = receiver.on_replicated("a", {"a": index})
    assert replicated is not None and replicated.ranges == [((3, 13), (3, 13))]
    index.record(Position(7, 4), Position(3, 15))
    replicated = receiver.on_replicated("a", {"a": index})
    assert replicated is not None and replicated.ranges == [((3, 15), (3, 15))]
    assert receiver.pending_ranges == 0


def test_own_origin_maps_only_own_entries_and_stale_markers_are_ignored():
    own = OriginIndex()  # b's own data entries: (4,1), (4,3), (4,9); (4,2) is a copy
    for entry in (1, 3, 9):
        own.record(Position(4, entry), Position(4, entry))
    receiver = AckRangesReceiver("b")
    plan = receiver.on_marker(
        marker(5, {"b": [((4, 1), (4, 3))]}, {"b": [((4, 9), 3, {0, 2})]}), {"b": own}
    )
    assert plan is not None
    assert plan.ranges == [((4, 1), (4, 1)), ((4, 3), (4, 3))]
    assert plan.batches == {(4, 9): {0, 2}}
    assert receiver.on_marker(marker(5, {"b": [((4, 5), (4, 6))]}), {"b": own}) is None
    assert receiver.on_marker(marker(4, {"b": [((4, 5), (4, 6))]}), {"b": own}) is None
    assert receiver.stale_markers == 2


def test_partial_batches_map_to_their_copy():
    index = OriginIndex()
    index.record(Position(7, 0), Position(3, 10))
    receiver = AckRangesReceiver("b")
    plan = receiver.on_marker(
        marker(1, {"a": []}, {"a": [((7, 0), 5, {1, 3}), ((7, 1), 4, {0})]}), {"a": index}
    )
    assert plan is not None
    assert plan.batches == {(3, 10): {1, 3}}
    index.record(Position(7, 1), Position(3, 11))
    replicated = receiver.on_replicated("a", {"a": index})
    assert replicated is not None and replicated.batches == {(3, 11): {0}}


@st.composite
def scenario(draw):
    """Origin A's entries, their copies on B (B's own entries interleaved), which A
    acknowledged, and how many copies had arrived when the marker did."""
    origin, local, own = [], [], []
    ledger, entry, local_ledger, local_entry = 7, 0, 3, 0
    for _ in range(draw(st.integers(1, 40))):
        if draw(st.integers(0, 9)) == 0:
            ledger, entry = ledger + 1, 0
        if draw(st.integers(0, 9)) == 0:
            local_ledger, local_entry = local_ledger + 1, 0
        for _ in range(draw(st.integers(0, 2))):  # B's own entries in between
            own.append((local_ledger, local_entry))
            local_entry += 1
        origin.append((ledger, entry))
        local.append((local_ledger, local_entry))
        entry += 1
        local_entry += 1
    acked = sorted(draw(st.sets(st.sampled_from(origin))))
    arrived = draw(st.integers(0, len(origin)))
    return origin, local, own, acked, arrived


def as_ranges(positions):
    ranges: list[tuple[tuple[int, int], tuple[int, int]]] = []
    for p in positions:
        if ranges and ranges[-1][1][0] == p[0] and ranges[-1][1][1] + 1 == p[1]:
            ranges[-1] = (ranges[-1][0], p)
        else:
            ranges.append((p, p))
    return ranges


@settings(max_examples=300)
@given(scenario())
def test_applied_acks_are_exactly_the_copies_of_acked_entries(case):
    origin, local, own, acked, arrived = case
    universe = local + own  # B's own entries must never be acknowledged
    copy = dict(zip(origin, local, strict=True))
    index = OriginIndex()
    for o in origin[:arrived]:
        index.record(o, copy[o])
    receiver = AckRangesReceiver("b")
    applied = set()

    def apply(plan):
        for first, last in plan.ranges:
            covered = {p for p in universe if first <= p <= last}
            applied.update(covered)

    apply(receiver.on_marker(marker(1, {"a": as_ranges(acked)}), {"a": index}))
    assert applied <= {copy[o] for o in acked}, "acknowledged something not acked at A"
    for o in origin[arrived:]:
        index.record(o, copy[o])
        apply(receiver.on_replicated("a", {"a": index}))
        assert applied <= {copy[x] for x in acked}
    assert applied == {copy[o] for o in acked}
    assert receiver.pending_ranges == 0


def test_the_leading_range_is_mapped_once_and_lower_ranges_still_apply():
    index = OriginIndex()
    for e in range(10):
        index.record(Position(7, e), Position(3, 10 + e))
    receiver = AckRangesReceiver("b")
    first = receiver.on_marker(marker(1, {"a": [((0, 0), (7, 3)), ((7, 6), (7, 6))]}), {"a": index})
    assert first is not None
    assert first.ranges == [((3, 10), (3, 13)), ((3, 16), (3, 16))]
    # the MDP moved on to (7,6): only what is above the part already planned is mapped
    second = receiver.on_marker(marker(2, {"a": [((0, 0), (7, 6))]}), {"a": index})
    assert second is not None
    assert second.ranges == [((3, 14), (3, 16))]
    # a range that does not start the origin's log marks nothing as done
    third = receiver.on_marker(marker(3, {"a": [((7, 8), (7, 8))]}), {"a": index})
    assert third is not None
    assert third.ranges == [((3, 18), (3, 18))]
    fourth = receiver.on_marker(marker(4, {"a": [((0, 0), (7, 9))]}), {"a": index})
    assert fourth is not None
    assert fourth.ranges == [((3, 17), (3, 19))]
