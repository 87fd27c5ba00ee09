"""Range mapping and merging against a brute-force model (Hypothesis)."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from georep.domain.position import Position
from georep.subsync.range_mapping import OriginIndex, merge


def test_docstring_example():
    index = OriginIndex()
    for e in range(5):
        index.record(Position(7, e), Position(3, 10 + e))
    for e in range(5, 10):  # local (3,15) is a local marker
        index.record(Position(7, e), Position(3, 11 + e))
    assert len(index) == 2
    assert index.map_range(Position(7, 2), Position(7, 6)) == (
        [((3, 12), (3, 14)), ((3, 16), (3, 17))],
        None,
    )
    assert index.map_range(Position(7, 8), Position(9, 0)) == (
        [((3, 19), (3, 20))],
        ((7, 10), (9, 0)),
    )
    assert index.lookup(Position(7, 5)) == (3, 16)
    assert index.lookup(Position(7, 10)) is None


@st.composite
def replication_streams(draw):
    """(origin, local) pairs in replication order, plus every local position (copies
    and local-only entries: markers, local producers), with rollovers on both sides."""
    origin_ledger, origin_entry = 1, 0
    local_ledger, local_entry = 100, 0
    pairs, local_positions = [], []
    for _ in range(draw(st.integers(0, 60))):
        step = draw(
            st.sampled_from(
                ["copy", "copy", "copy", "local-only", "roll-origin", "roll-local", "origin-gap"]
            )
        )
        if step == "copy":
            pairs.append(((origin_ledger, origin_entry), (local_ledger, local_entry)))
            local_positions.append((local_ledger, local_entry))
            origin_entry += 1
            local_entry += 1
        elif step == "local-only":
            local_positions.append((local_ledger, local_entry))
            local_entry += 1
        elif step == "roll-origin":
            origin_ledger += draw(st.integers(1, 3))
            origin_entry = 0
        elif step == "roll-local":
            local_ledger += draw(st.integers(1, 3))
            local_entry = 0
        else:  # an origin entry that is not replicated (a local snapshot marker there)
            origin_entry += 1
    return pairs, local_positions


positions = st.tuples(st.integers(0, 12), st.integers(0, 70))


def covered(ranges, universe):
    return {p for p in universe if any(first <= p <= last for first, last in ranges)}


@settings(max_examples=300)
@given(replication_streams(), positions, positions)
def test_map_range_equals_the_brute_force_map(stream, a, b):
    pairs, local_positions = stream
    first, last = min(a, b), max(a, b)
    index = OriginIndex()
    for origin, local in pairs:
        index.record(origin, local)
    mapped, pending = index.map_range(first, last)

    expected_local = {local for origin, local in pairs if first <= origin <= last}
    assert covered(mapped, local_positions) == expected_local
    # mapped ranges are normalized and hold nothing but copies of the range
    assert mapped == merge(mapped)
    tail = pairs[-1][0] if pairs else None
    if tail is None or last > tail:
        assert pending is not None and pending[1] == last
        assert pending[0] > (tail or (-1, -1))
        assert pending[0] >= first
    else:
        assert pending is None
    for origin, local in pairs:
        assert index.lookup(origin) == local


@given(replication_streams(), positions)
def test_forget_before_keeps_later_mappings(stream, cut):
    pairs, _ = stream
    index = OriginIndex()
    for origin, local in pairs:
        index.record(origin, local)
    index.forget_before(cut)
    for origin, local in pairs:
        if origin >= cut:
            assert index.lookup(origin) == local


ranges = st.lists(st.tuples(positions, positions).map(lambda r: (min(r), max(r))), max_size=12)


@given(ranges)
def test_merge_preserves_coverage_and_normalizes(rs):
    universe = [(ledger, entry) for ledger in range(13) for entry in range(72)]
    merged = merge(rs)
    assert covered(merged, universe) == covered(rs, universe)
    for (_, l1), (f2, _) in itertools.pairwise(merged):
        assert l1 < f2, "overlap"
        assert not (f2[0] == l1[0] and f2[1] == l1[1] + 1), "touching ranges not joined"
    assert merge(merged) == merged
