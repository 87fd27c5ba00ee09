"""Key hashes (Murmur3, as Pulsar) and the hash ranges Key_Shared consumers own."""

from __future__ import annotations

import itertools
import random

import pytest

from georep.broker.errors import ConsumerAssignError
from georep.broker.hash_ranges import AutoSplitRanges, StickyRanges, key_hash, murmur3_32


@pytest.mark.parametrize(
    ("data", "seed", "expected"),
    [
        (b"", 0, 0),
        (b"", 1, 0x514E28B7),
        (b"\xff\xff\xff\xff", 0, 0x76293B50),
        (b"hello", 0, 613153351),
        (b"The quick brown fox jumps over the lazy dog", 0, 0x2E4FF723),
    ],
)
def test_murmur3_reference_vectors(data: bytes, seed: int, expected: int) -> None:
    assert murmur3_32(data, seed) == expected


def test_key_hash_is_in_range() -> None:
    for n in range(1000):
        assert 0 <= key_hash(f"key-{n}".encode()) < 65536


def test_auto_split_worked_example() -> None:
    ranges: AutoSplitRanges[str] = AutoSplitRanges(65536)
    ranges.add("A")
    assert ranges.ranges() == [(0, 65535, "A")]
    ranges.add("B")
    assert ranges.ranges() == [(0, 32767, "A"), (32768, 65535, "B")]
    ranges.add("C")
    assert ranges.ranges() == [(0, 16383, "A"), (16384, 32767, "C"), (32768, 65535, "B")]
    ranges.remove("B")
    assert ranges.ranges() == [(0, 16383, "A"), (16384, 65535, "C")]
    ranges.remove("A")
    assert ranges.ranges() == [(0, 65535, "C")]
    ranges.remove("C")
    assert ranges.ranges() == [] and ranges.owner_of(5) is None


def test_auto_split_covers_everything_whatever_the_order() -> None:
    rng = random.Random(7)
    ranges: AutoSplitRanges[int] = AutoSplitRanges(1024)
    present: list[int] = []
    for step in range(300):
        if present and rng.random() < 0.4:
            ranges.remove(present.pop(rng.randrange(len(present))))
        else:
            ranges.add(step)
            present.append(step)
        spans = ranges.ranges()
        if present:
            assert spans[0][0] == 0 and spans[-1][1] == 1023, f"seed 7 step {step}"
            assert all(a[1] + 1 == b[0] for a, b in itertools.pairwise(spans))
            assert sorted(owner for _, _, owner in spans) == sorted(present)
            for _ in range(20):
                value = rng.randrange(1024)
                owner = ranges.owner_of(value)
                assert any(lo <= value <= hi and o == owner for lo, hi, o in spans)


def test_auto_split_runs_out_of_room() -> None:
    ranges: AutoSplitRanges[str] = AutoSplitRanges(2)
    ranges.add("A")
    ranges.add("B")
    with pytest.raises(ConsumerAssignError):
        ranges.add("C")


def test_sticky_ranges() -> None:
    ranges: StickyRanges[str] = StickyRanges(100)
    ranges.add("A", [(0, 9), (50, 59)])
    ranges.add("B", [(10, 49)])
    assert [ranges.owner_of(v) for v in (0, 9, 10, 49, 50, 59, 60)] == [
        "A",
        "A",
        "B",
        "B",
        "A",
        "A",
        None,
    ]
    for bad in ([(5, 12)], [(59, 70)], [(90, 100)], [(20, 10)], [], [(60, 70), (65, 80)]):
        with pytest.raises(ConsumerAssignError):
            ranges.add("C", bad)
    assert ranges.owner_of(65) is None  # nothing of a refused consumer was kept
    ranges.remove("A")
    assert ranges.owner_of(5) is None and ranges.owner_of(20) == "B"
