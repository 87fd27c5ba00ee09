"""RangeSet and AckState against simple models (hypothesis): ranges merge only inside a
ledger, the MDP swallows the acknowledged prefix across ledger boundaries, and past the
bound the set forgets its highest ranges, never acknowledging anything unacknowledged."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from georep.domain.position import Position
from georep.storage.errors import InvalidArgument
from georep.storage.managed_ledger.ack_state import AckState
from georep.storage.managed_ledger.range_set import RangeSet

P = Position


# --- RangeSet alone -----------------------------------------------------------------
@pytest.mark.parametrize(
    ("adds", "expected"),
    [
        ([((1, 0), (1, 3)), ((1, 4), (1, 6))], [((1, 0), (1, 6))]),  # touching: merged
        ([((1, 0), (1, 3)), ((1, 5), (1, 6))], [((1, 0), (1, 3)), ((1, 5), (1, 6))]),
        ([((1, 5), (1, 6)), ((1, 0), (1, 3)), ((1, 4), (1, 4))], [((1, 0), (1, 6))]),
        ([((1, 0), (1, 9)), ((1, 2), (1, 3))], [((1, 0), (1, 9))]),  # inside
        ([((1, 2), (1, 3)), ((1, 0), (1, 9))], [((1, 0), (1, 9))]),  # around
        ([((1, 8), (1, 9)), ((2, 0), (2, 1))], [((1, 8), (1, 9)), ((2, 0), (2, 1))]),  # ledgers
        (
            [((1, 1), (1, 1)), ((1, 5), (1, 5)), ((1, 3), (1, 3)), ((1, 2), (1, 4))],
            [((1, 1), (1, 5))],
        ),
    ],
)
def test_add_merges(adds, expected) -> None:
    ranges = RangeSet()
    for low, high in adds:
        ranges.add(P(*low), P(*high))
    assert ranges.ranges() == [(P(*low), P(*high)) for low, high in expected]
    assert len(ranges) == len(expected)


def test_contains_range_of_and_remove_below() -> None:
    ranges = RangeSet.of([(P(1, 2), P(1, 4)), (P(1, 7), P(2, 3))])
    assert P(1, 3) in ranges and P(1, 8) in ranges and P(2, 0) in ranges
    assert P(1, 5) not in ranges and P(1, 1) not in ranges and P(2, 4) not in ranges
    assert ranges.range_of(P(1, 9)) == (P(1, 7), P(2, 3))
    ranges.remove_below(P(1, 9))
    # (1, 10) need not exist: the range still holds the same entries above (1, 9)
    assert ranges.ranges() == [(P(1, 10), P(2, 3))]
    ranges.remove_below(P(2, 3))
    assert ranges.ranges() == [] and len(ranges) == 0


@pytest.mark.parametrize(("low", "high"), [((1, 2), (1, 1)), ((1, -1), (1, 2)), ((-1, 0), (1, 2))])
def test_add_refuses_bad_ranges(low, high) -> None:
    with pytest.raises(InvalidArgument):
        RangeSet().add(P(*low), P(*high))


def test_bound_forgets_the_highest_range() -> None:
    ranges = RangeSet(ranges_max=2)
    ranges.add(P(1, 1), P(1, 1))
    ranges.add(P(1, 5), P(1, 5))
    ranges.add(P(1, 3), P(1, 3))  # three ranges: (1, 5) goes
    assert ranges.ranges() == [(P(1, 1), P(1, 1)), (P(1, 3), P(1, 3))]
    assert ranges.dropped_ranges == 1
    ranges.add(P(1, 9), P(1, 9))  # the new one is the highest: it goes itself
    assert ranges.ranges() == [(P(1, 1), P(1, 1)), (P(1, 3), P(1, 3))]
    assert ranges.dropped_ranges == 2


LEDGERS = (1, 2, 4)
ENTRIES = 12


def _runs(members: set[Position]) -> list[tuple[Position, Position]]:
    """Maximal runs of consecutive entries inside one ledger: the ranges a RangeSet of
    single-ledger ranges must hold."""
    runs: list[tuple[Position, Position]] = []
    for position in sorted(members):
        if runs and runs[-1][1] == P(position.ledger_id, position.entry_id - 1):
            runs[-1] = (runs[-1][0], position)
        else:
            runs.append((position, position))
    return runs


single_ledger_ranges = st.builds(
    lambda ledger, a, b: (P(ledger, min(a, b)), P(ledger, max(a, b))),
    st.sampled_from(LEDGERS),
    st.integers(0, ENTRIES - 1),
    st.integers(0, ENTRIES - 1),
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("add"), single_ledger_ranges),
            st.tuples(
                st.just("remove_below"),
                st.builds(P, st.sampled_from(LEDGERS), st.integers(-1, ENTRIES)),
            ),
        ),
        max_size=40,
    )
)
def test_range_set_matches_a_set_of_positions(operations) -> None:
    ranges = RangeSet()
    model: set[Position] = set()
    universe = [P(ledger, entry) for ledger in LEDGERS for entry in range(ENTRIES)]
    for operation, argument in operations:
        if operation == "add":
            low, high = argument
            ranges.add(low, high)
            model |= {p for p in universe if low <= p <= high}
        else:
            ranges.remove_below(argument)
            model = {p for p in model if p > argument}
        assert {p for p in universe if p in ranges} == model
        assert ranges.ranges() == _runs(model)
        assert len(ranges) == len(_runs(model))


# --- AckState over a log ------------------------------------------------------------
class ListLog:
    """A log as the list of its entries (the LogShape the cursor gets from a managed
    ledger)."""

    def __init__(self, positions: list[Position]) -> None:
        self.positions = positions

    def entries_between(self, after: Position, before: Position) -> int:
        return sum(1 for p in self.positions if after < p < before)


layouts = st.lists(st.tuples(st.integers(1, 3), st.integers(0, 5)), min_size=1, max_size=4).map(
    # (gap to the previous ledger id, entries): ids increase with gaps, some ledgers empty
    lambda steps: [
        (sum(gap for gap, _ in steps[: i + 1]), entries) for i, (_, entries) in enumerate(steps)
    ]
)


def _model_state(
    positions: list[Position], start: Position, acknowledged: set[Position]
) -> tuple[Position, list[tuple[Position, Position]]]:
    mark_delete = start
    for position in positions:
        if position not in acknowledged:
            break
        mark_delete = position
    return mark_delete, _runs({p for p in acknowledged if p > mark_delete})


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_random_acks_in_random_order_match_the_model(data) -> None:
    layout = data.draw(layouts)
    positions = [P(ledger, entry) for ledger, count in layout for entry in range(count)]
    log = ListLog(positions)
    start = P(layout[0][0], -1)
    state = AckState(start, RangeSet())
    acknowledged: set[Position] = set()
    order = data.draw(st.permutations(positions))
    for position in order[: data.draw(st.integers(0, len(order)))]:
        if data.draw(st.integers(0, 4)) == 0:
            state.mark_delete(position, log)
            acknowledged |= {p for p in positions if p <= position}
        else:
            state.acknowledge([position], log)
            acknowledged.add(position)
        mark_delete, ranges = _model_state(positions, start, acknowledged)
        assert state.mark_delete_position == mark_delete
        assert state.individually_deleted.ranges() == ranges
        assert {p for p in positions if state.is_acknowledged(p)} == acknowledged


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_past_the_bound_only_the_highest_acks_are_forgotten(data) -> None:
    """With room for few ranges: nothing unacknowledged is ever acknowledged; what is
    forgotten is above everything kept that lies below it (the lowest ranges are exact)."""
    ranges_max = data.draw(st.integers(1, 3))
    layout = data.draw(layouts)
    positions = [P(ledger, entry) for ledger, count in layout for entry in range(count)]
    log = ListLog(positions)
    start = P(layout[0][0], -1)
    state = AckState(start, RangeSet(ranges_max))
    acknowledged: set[Position] = set()
    lowest_forgotten = P.LATEST
    order = data.draw(st.permutations(positions))
    for position in order[: data.draw(st.integers(0, len(order)))]:
        before = {p for p in positions if state.is_acknowledged(p)} | {position}
        state.acknowledge([position], log)
        acknowledged.add(position)
        after = {p for p in positions if state.is_acknowledged(p)}
        forgotten = before - after
        if forgotten:
            kept = {p for p in after if p > state.mark_delete_position}
            assert min(forgotten) > max(kept, default=P.EARLIEST), "forgot a low range"
            lowest_forgotten = min(lowest_forgotten, *forgotten)
        assert after <= acknowledged
        assert len(state.individually_deleted) <= ranges_max
        assert {p for p in after if p < lowest_forgotten} == {
            p for p in acknowledged if p < lowest_forgotten
        }
        if state.individually_deleted.dropped_ranges == 0:
            assert after == acknowledged


def test_ack_state_worked_example() -> None:
    """The example of ack_state's docstring."""
    log = ListLog([P(4, 0), P(4, 1), P(4, 2), *(P(6, e) for e in range(5))])
    state = AckState(P(4, -1), RangeSet())
    state.acknowledge([P(6, 0), P(4, 1)], log)
    assert state.mark_delete_position == P(4, -1)
    assert state.individually_deleted.ranges() == [(P(4, 1), P(4, 1)), (P(6, 0), P(6, 0))]
    state.acknowledge([P(4, 0)], log)
    assert state.mark_delete_position == P(4, 1)
    state.acknowledge([P(4, 2)], log)
    assert state.mark_delete_position == P(6, 0)
    assert len(state.individually_deleted) == 0
    assert not state.mark_delete(P(4, 2), log)  # never backwards
    state.reset(P(4, 1))
    assert state.mark_delete_position == P(4, 0) and len(state.individually_deleted) == 0


def test_ack_state_batch_example() -> None:
    """The batch example of ack_state's docstring, and what clears partial entries."""
    log = ListLog([P(6, e) for e in range(5)])
    state = AckState(P(6, -1), RangeSet())
    assert state.acknowledge_members(P(6, 1), 0b110, log)  # member 0
    assert state.acknowledge_members(P(6, 1), 0b011, log)  # member 2: 0b110 & 0b011
    assert state.batch_bits(P(6, 1)) == 0b010 and not state.is_acknowledged(P(6, 1))
    assert not state.acknowledge_members(P(6, 1), 0b111, log)  # nothing new
    assert state.acknowledge_members(P(6, 1), 0b101, log)  # member 1, the last
    assert state.batch_bits(P(6, 1)) is None and state.is_acknowledged(P(6, 1))
    state.acknowledge_members(P(6, 2), 0b10, log)
    state.acknowledge_members(P(6, 4), 0b10, log)
    state.acknowledge_members(P(6, 3), 0b10, log)
    assert state.batches() == [(P(6, 2), 0b10), (P(6, 3), 0b10), (P(6, 4), 0b10)]
    state.acknowledge([P(6, 3)], log)  # whole
    assert state.batches() == [(P(6, 2), 0b10), (P(6, 4), 0b10)]
    state.acknowledge([P(6, 0)], log)  # the MDP moves to (6,1): nothing partial below it
    assert state.mark_delete_position == P(6, 1) and state.batch_entries == 2
    state.mark_delete(P(6, 2), log)  # the MDP swallows (6,2) and the range (6,3)
    assert state.mark_delete_position == P(6, 3) and state.batches() == [(P(6, 4), 0b10)]
    assert not state.acknowledge_members(P(6, 0), 0, log)  # below the MDP: ignored
    state.reset(P(6, 0))
    assert state.batches() == []


def test_ack_state_batch_bound() -> None:
    log = ListLog([P(1, e) for e in range(5)])
    state = AckState(P(1, -1), RangeSet(), [(P(1, 3), 0b1), (P(1, 1), 0b1)], batch_entries_max=2)
    assert state.batches() == [(P(1, 1), 0b1), (P(1, 3), 0b1)]  # restored, sorted
    assert not state.acknowledge_members(P(1, 2), 0b1, log)  # full: dropped
    assert state.batch_entries_dropped == 1 and state.batch_bits(P(1, 2)) is None
    assert state.acknowledge_members(P(1, 1), 0b0, log)  # whole: room again
    assert state.acknowledge_members(P(1, 2), 0b1, log)
    assert state.batches() == [(P(1, 2), 0b1), (P(1, 3), 0b1)]
