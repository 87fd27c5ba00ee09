"""Pure parts of the broker's subscription sync: acknowledging a range without listing its
entries (``AckState.acknowledge_range``), ranges clamped and joined onto entries, batch
bits and acknowledged indexes (the cursor taking ranges as ranges:
``test_managed_cursor_persistence.py``)."""

from __future__ import annotations

import bisect
from typing import cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from georep.broker import subscription_sync
from georep.broker.ports import TopicLog
from georep.domain.position import Position
from georep.storage.managed_ledger import RangeSet
from georep.storage.managed_ledger.ack_state import AckState

P = Position


class Log:
    """A log of ledgers ``{ledger id: entries}``, answering what ``AckState`` and
    ``subscription_sync`` ask of a managed ledger."""

    def __init__(self, ledgers: dict[int, int]) -> None:
        self.entries = [
            P(ledger, e) for ledger, count in sorted(ledgers.items()) for e in range(count)
        ]

    def _rank(self, position) -> int:
        return bisect.bisect_right(self.entries, tuple(position))

    def entries_between(self, after, before) -> int:
        return max(0, bisect.bisect_left(self.entries, tuple(before)) - self._rank(after))

    def position_at_or_after(self, position):
        index = bisect.bisect_left(self.entries, tuple(position))
        last = self.entries[-1]
        return self.entries[index] if index < len(self.entries) else P(last[0], last[1] + 1)

    def entry_at_or_before(self, position):
        rank = self._rank(position)
        return self.entries[rank - 1] if rank else None


#: Ledger 4 of entries 0..2, ledger 6 of 0..4, ledger 9 of 0..1.
LOG = Log({4: 3, 6: 5, 9: 2})
#: LOG where a TopicLog is asked for: it answers the position questions _entry_ranges asks.
LOG_AS_TOPIC_LOG = cast(TopicLog, LOG)


@pytest.mark.parametrize(
    ("mark_delete", "ranges", "low", "high", "changed", "mark_delete_after", "ranges_after"),
    [
        # the docstring's example: (4,0) is open, nothing moves
        (P(4, -1), [], P(4, 1), P(6, 3), True, P(4, -1), [(P(4, 1), P(6, 3))]),
        # from the entry after the MDP: the MDP swallows it, and what touches it
        (P(4, 0), [], P(4, 1), P(6, 3), True, P(6, 3), []),
        (P(4, 0), [(P(6, 4), P(6, 4))], P(4, 1), P(6, 3), True, P(6, 4), []),
        # across the end of a ledger, no entry between: joined into the MDP too
        (P(4, 0), [(P(9, 0), P(9, 0))], P(4, 1), P(6, 4), True, P(9, 0), []),
        # below the MDP: nothing; straddling it: clipped
        (P(6, 2), [], P(4, 0), P(6, 1), False, P(6, 2), []),
        (P(6, 2), [], P(4, 0), P(6, 3), True, P(6, 3), []),
        # already inside a range: nothing
        (P(4, -1), [(P(6, 0), P(6, 4))], P(6, 1), P(6, 3), False, P(4, -1), [(P(6, 0), P(6, 4))]),
        # overlapping ranges joined into one
        (P(4, -1), [(P(6, 0), P(6, 1)), (P(6, 3), P(6, 3))], P(6, 1), P(6, 4), True, P(4, -1),
         [(P(6, 0), P(6, 4))]),
    ],
)  # fmt: skip
def test_acknowledge_range(
    mark_delete, ranges, low, high, changed, mark_delete_after, ranges_after
) -> None:
    acks = AckState(mark_delete, RangeSet.of(ranges))
    assert acks.acknowledge_range(low, high, LOG) is changed
    assert acks.mark_delete_position == mark_delete_after
    assert acks.individually_deleted.ranges() == ranges_after


def test_acknowledge_range_forgets_the_batches_inside_it() -> None:
    acks = AckState(P(4, -1), RangeSet(), [(P(6, 0), 0b10), (P(6, 2), 0b1), (P(9, 1), 0b11)])
    acks.acknowledge_range(P(6, 0), P(6, 2), LOG)
    assert acks.batches() == [(P(9, 1), 0b11)]


@given(
    st.integers(-1, 6).flatmap(
        lambda mdp: st.tuples(
            st.just(mdp),
            st.lists(st.tuples(st.integers(0, 9), st.integers(0, 9)), max_size=6),
        )
    )
)
def test_acknowledge_range_is_acknowledging_each_entry(case) -> None:
    """Against ``acknowledge`` of every entry inside: the same entries acknowledged."""
    mdp_entry, pairs = case
    log = Log({4: 3, 6: 5})
    mark_delete = log.entries[mdp_entry] if mdp_entry >= 0 else P(4, -1)
    by_range = AckState(mark_delete, RangeSet())
    by_entry = AckState(mark_delete, RangeSet())
    for a, b in pairs:
        low, high = sorted((log.entries[a % 8], log.entries[b % 8]))
        by_range.acknowledge_range(low, high, log)
        by_entry.acknowledge([e for e in log.entries if low <= e <= high], log)
    for entry in log.entries:
        assert by_range.is_acknowledged(entry) == by_entry.is_acknowledged(entry), entry
    assert by_range.mark_delete_position == by_entry.mark_delete_position


def test_reported_ranges_are_clamped_to_entries_and_joined_across_ledgers() -> None:
    ranges = RangeSet.of(
        [(P(4, 1), P(4, 9)), (P(6, 0), P(6, 1)), (P(6, 3), P(6, 3)), (P(7, 0), P(7, 5))]
    )
    shown, truncated = subscription_sync._entry_ranges(LOG_AS_TOPIC_LOG, ranges, 10)
    # (4,1)..(4,9) ends at (4,2); nothing between it and (6,0): one range; ledger 7 is
    # not in the log: dropped
    assert shown == [((4, 1), (6, 1)), ((6, 3), (6, 3))] and not truncated
    assert subscription_sync._entry_ranges(LOG_AS_TOPIC_LOG, ranges, 1) == (
        [((4, 1), (6, 1))],
        True,
    )


@given(st.integers(1, 300).flatmap(lambda n: st.tuples(st.just(n), st.sets(st.integers(0, n - 1)))))
def test_acked_indexes_and_unacked_bits_are_inverse(case) -> None:
    size, indexes = case
    bits = subscription_sync.unacked_bits(indexes, size)
    assert subscription_sync.acked_indexes(bits, size) == sorted(indexes)
    assert bits == sum(1 << i for i in range(size) if i not in indexes)


def test_acked_indexes_example() -> None:
    assert subscription_sync.acked_indexes(0b101, 3) == [1]
    assert subscription_sync.acked_indexes(0, 2) == [0, 1]
