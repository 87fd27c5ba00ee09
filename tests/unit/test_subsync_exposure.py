"""Exposure's interval arithmetic and counting against sets of entries, and the worked
example of ``georep/subsync/exposure.py``. The whole (a failover's duplicates equal the
exposure read before it) is in test_subsync_simulation.py."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from georep.position import Position
from georep.subsync.exposure import Acked, Interval, difference, exposed, union
from georep.subsync.range_mapping import OriginIndex

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
