"""The snapshot cache: bounded, spread over the backlog, never stalls a slow MDP."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from georep.domain.position import Position
from georep.snapshots.snapshot_cache import CachedSnapshot, SnapshotCache, position_distance


def snap(ledger: int, entry: int) -> CachedSnapshot:
    return CachedSnapshot(
        f"s-{ledger}-{entry}", Position(ledger, entry), {"b": Position(ledger + 100, entry)}
    )


def test_docstring_example():
    cache = SnapshotCache(3)
    for entry in (10, 20, 30, 31):
        cache.add(snap(1, entry))
    assert cache.positions() == [(1, 10), (1, 20), (1, 31)]
    assert cache.evicted == 1


def test_advance_hands_out_the_newest_reached_and_drops_older():
    cache = SnapshotCache(5)
    for entry in (10, 20, 30):
        cache.add(snap(1, entry))
    assert cache.advance(Position(1, 9)) is None
    reached = cache.advance(Position(1, 25))
    assert reached is not None
    assert reached.local_position == (1, 20)
    assert reached.remote_positions == {"b": (101, 20)}
    assert cache.positions() == [(1, 30)]


def test_a_slow_subscription_is_not_stalled_by_newer_snapshots():
    """Keeping only the newest snapshots would leave nothing near a slow MDP."""
    cache = SnapshotCache(10)
    for entry in range(0, 100_000, 100):  # a snapshot every 100 entries
        cache.add(snap(1, entry))
    assert len(cache) == 10
    assert cache.positions()[0] == (1, 0)
    reached = cache.advance(Position(1, 150))  # the MDP moved a little
    assert reached is not None and reached.local_position == (1, 0)


def test_position_distance_orders_ledgers_after_entries():
    assert position_distance(Position(1, 5), Position(1, 9)) == 4
    assert position_distance(Position(1, 10**6), Position(2, 0)) > position_distance(
        Position(1, 0), Position(1, 10**6)
    )


positions = st.tuples(st.integers(1, 5), st.integers(0, 10_000))


@given(
    st.integers(2, 12),
    st.lists(
        st.one_of(st.tuples(st.just("add"), positions), st.tuples(st.just("advance"), positions)),
        max_size=80,
    ),
)
def test_invariants_under_any_sequence(capacity, operations):
    cache = SnapshotCache(capacity)
    oldest_since_advance = None
    for action, position in operations:
        before = cache.positions()
        if action == "add":
            cache.add(snap(*position))
            if oldest_since_advance is None or position < oldest_since_advance:
                oldest_since_advance = position
            assert position in cache.positions() or position in before or (len(before) >= capacity)
        else:
            reached = cache.advance(position)
            at_or_below = [p for p in before if p <= position]
            if at_or_below:
                assert reached is not None
                assert reached.local_position == max(at_or_below)
            else:
                assert reached is None
            assert all(p > position for p in cache.positions())
            oldest_since_advance = min(cache.positions(), default=None)
        keys = cache.positions()
        assert len(keys) <= capacity
        assert keys == sorted(set(keys))
        if keys:
            assert keys[0] == oldest_since_advance  # the oldest is never evicted
