"""Exposure's interval arithmetic and counting against sets of entries, and the worked
example of ``georep/subsync/exposure.py``. The whole (a failover's duplicates equal the
exposure read before it) is in test_subsync_simulation.py."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from georep.domain.position import Position
from georep.snapshots.markers import MarkerKind
from georep.subsync.core import SubscriptionState, SyncCore, WriteMarker
from georep.subsync.exposure import Acked, Interval, difference, exposed, union
from georep.subsync.range_mapping import OriginIndex
from georep.subsync.settings import NamespaceSync, SyncMode, SyncSettings
from georep.wire import pulsar_wire_pb2 as wire

LEDGERS = (3, 5)
ENTRIES = 12
EVERY = [Position(ledger, entry) for ledger in LEDGERS for entry in range(ENTRIES)]


def members(intervals: list[Interval]) -> set[Position]:
    return {p for p in EVERY if any(after < p <= upto for after, upto in intervals)}


@st.composite
def acked(draw: st.DrawFn) -> Acked:
    mark_delete = draw(st.sampled_from([Position.EARLIEST, *EVERY]))
    ends = sorted(draw(st.lists(st.sampled_from(EVERY), max_size=8, unique=True)))
    ranges = tuple(
        (first, last)
        for first, last in zip(ends[::2], ends[1::2], strict=False)
        if first.ledger_id == last.ledger_id
    )
    return Acked(mark_delete, ranges)


def model(state: Acked) -> set[Position]:
    covered = {p for p in EVERY if p <= state.mark_delete}
    for first, last in state.ranges:
        covered |= {p for p in EVERY if first <= p <= last}
    return covered


@given(acked())
def test_intervals_hold_the_acknowledged_entries(state):
    intervals = state.intervals()
    assert members(intervals) == model(state)
    assert all(after < upto for after, upto in intervals)
    assert all(left[1] < right[0] for left, right in itertools.pairwise(intervals))


@given(acked(), acked())
def test_difference_and_union_are_those_of_sets(left, right):
    a, b = left.intervals(), right.intervals()
    assert members(difference(a, b)) == model(left) - model(right)
    assert members(union(a, b)) == model(left) | model(right)


@given(st.sets(st.sampled_from(EVERY)), st.sampled_from(EVERY), st.sampled_from(EVERY))
def test_an_index_counts_its_entries_in_an_interval(recorded, after, upto):
    index = OriginIndex()
    for position in sorted(recorded):
        index.record(position, position)
    assert index.count(after, upto) == len({p for p in recorded if after < p <= upto})


def test_the_worked_example():
    own = OriginIndex()
    for entry in [0, 1, 2, 3, 5, 6, 7, 9]:  # markers at (3,4) and (3,8)
        own.record(Position(3, entry), Position(3, entry))
    now = Acked(Position(3, 2), ((Position(3, 5), Position(3, 6)),))
    stored = {"A": Acked(Position(3, 1)).intervals()}

    def count(delivered: Position) -> int:
        return exposed(
            now, stored, local="A", remote="B", own=own, delivered=delivered, remote_copies=None
        )

    assert count(Position(3, 6)) == 3
    assert count(Position(3, 3)) == 1
    assert count(Position(3, 1)) == 0


# --- beside real Pulsar: markers on the namespace's side topic --------------------------


def side_core(mode: SyncMode) -> SyncCore:
    """A's core beside real Pulsar (markers out of band), own entries (1, 0) to (1, 3)."""
    a = SyncCore(
        "A",
        namespace_sync=NamespaceSync(mode=mode),
        settings=SyncSettings(),
        remotes=frozenset({"B"}),
        in_band=False,
    )
    for entry in range(4):
        own = wire.MessageMetadata(producer_name="p", sequence_id=entry + 1, publish_time=0)
        a.on_entry(Position(1, entry), own, b"x", 0.0)
    return a


def test_beside_pulsar_full_mode_counts_what_the_side_topic_has_not_carried_yet():
    """Three of four entries acknowledged, in an ack-ranges marker stored at (9, 4) of
    the side topic: exposed until B stores the side topic that far, whatever B stores
    of the topic itself; not known where nobody says how far B stores the side topic."""
    a = side_core(SyncMode.FULL)
    state = SubscriptionState(
        mark_delete=Position(1, 1),
        ranges=((Position(1, 3), Position(1, 3)),),
        consumers=1,
        replicated=True,
    )
    written = [
        action
        for action in a.on_state({"s": state}, 1.0)
        if isinstance(action, WriteMarker) and action.kind is MarkerKind.SUBSCRIPTION_ACK_RANGES
    ]
    assert written, "full mode writes the acknowledgements as ack ranges"
    a.marker_written(written[-1].message, Position(9, 4), 1.0)  # its side-topic receipt
    data = {"B": Position(1, 3)}  # B stores every entry of the topic

    def exposed_to_b(side: Position | None) -> int | None:
        figure = a.exposure(5.0, data, {"B": side})["s"]["B"]
        return None if figure is None else figure.messages

    assert exposed_to_b(Position(9, 3)) == 3  # the marker is not on B yet
    assert exposed_to_b(None) is None  # Pulsar replicates the side topic: not known
    assert a.exposure(5.0, data)["s"]["B"] is None
    assert exposed_to_b(Position(9, 4)) == 0  # stored on B: nothing would come twice


def test_beside_pulsar_pulsar_compatible_exposure_is_not_known():
    """Its snapshots travel beside the topic, so where they stand in it is not known."""
    a = side_core(SyncMode.PULSAR_COMPATIBLE)
    a.on_state(
        {"s": SubscriptionState(mark_delete=Position(1, 1), consumers=1, replicated=True)}, 1.0
    )
    assert a.exposure(5.0, {"B": Position(1, 3)}, {"B": Position(9, 9)}) == {"s": {"B": None}}
