"""The entry cache of managed ledgers (storage/managed_ledger/entry_cache.py): what it
keeps, what it serves, and its bound shared by every managed ledger of a factory."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from georep.storage.managed_ledger.entry_cache import EntryCache


def fill(tail, ledger_id, first, count, size=10):
    for entry_id in range(first, first + count):
        tail.confirmed(ledger_id, entry_id, bytes([entry_id % 256]) * size)


def test_a_read_inside_the_run_is_served_and_one_outside_is_not():
    cache = EntryCache(bytes_max=1_000, entries_max=100)
    tail = cache.tail()
    fill(tail, 7, 0, 5)
    assert tail.get(7, 1, 3) == [bytes([i]) * 10 for i in (1, 2, 3)]
    assert tail.get(7, 3, 5) is None  # entry 5 is not confirmed yet
    assert tail.get(8, 0, 0) is None  # another ledger
    assert cache.snapshot() == {"bytes": 50, "entries": 5, "hit_reads": 1, "missed_reads": 2}


def test_the_earliest_confirmed_go_first_whichever_ledger_holds_them():
    cache = EntryCache(bytes_max=100, entries_max=1_000)
    one, two = cache.tail(), cache.tail()
    fill(one, 1, 0, 5)
    fill(two, 9, 0, 5)
    fill(one, 1, 5, 3)  # 130 bytes: entries 0..2 of ledger 1 go
    assert (cache.bytes, cache.entries) == (100, 10)
    assert one.get(1, 2, 2) is None
    assert one.get(1, 3, 7) is not None
    assert two.get(9, 0, 4) is not None
    assert cache.stats["evicted_entries"] == 3


def test_the_entry_bound_holds_as_the_byte_bound_does():
    cache = EntryCache(bytes_max=10**9, entries_max=4)
    tail = cache.tail()
    fill(tail, 1, 0, 10)
    assert cache.entries == 4
    assert tail.get(1, 6, 9) is not None and tail.get(1, 5, 5) is None


def test_a_forgotten_ledger_and_a_cleared_tail_give_their_bytes_back():
    cache = EntryCache(bytes_max=1_000, entries_max=100)
    tail, other = cache.tail(), cache.tail()
    fill(tail, 1, 0, 3)
    fill(tail, 2, 0, 4)
    fill(other, 3, 0, 2)
    tail.forget(1)
    assert (cache.bytes, cache.entries) == (60, 6)
    tail.clear()
    assert (cache.bytes, cache.entries) == (20, 2)
    assert other.get(3, 0, 1) is not None


def test_an_entry_out_of_sequence_starts_the_run_afresh():
    cache = EntryCache(bytes_max=1_000, entries_max=100)
    tail = cache.tail()
    fill(tail, 1, 0, 3)
    fill(tail, 1, 10, 2)
    assert tail.get(1, 0, 0) is None
    assert tail.get(1, 10, 11) is not None
    assert (cache.bytes, cache.entries) == (20, 2)


def test_an_entry_larger_than_the_whole_cache_is_not_kept():
    cache = EntryCache(bytes_max=100, entries_max=100)
    tail = cache.tail()
    tail.confirmed(1, 0, b"x" * 101)
    assert (cache.bytes, cache.entries) == (0, 0)
    assert tail.get(1, 0, 0) is None


@given(
    st.lists(
        st.tuples(st.integers(0, 2), st.integers(0, 3), st.integers(1, 40)),
        max_size=200,
    ),
    st.integers(1, 300),
    st.integers(1, 30),
)
def test_the_bounds_hold_and_every_kept_entry_is_the_one_confirmed(steps, bytes_max, entries_max):
    """Random confirms, forgets and clears on three tails: the totals match what the tails
    hold, stay within both bounds, and a read serves exactly what was confirmed."""
    cache = EntryCache(bytes_max=bytes_max, entries_max=entries_max)
    tails = [cache.tail() for _ in range(3)]
    confirmed: dict[tuple[int, int, int], bytes] = {}
    next_id: dict[tuple[int, int], int] = {}
    for which, ledger_id, size in steps:
        tail = tails[which]
        if size == 40:
            tail.clear()
            continue
        if size == 39:
            tail.forget(ledger_id)
            continue
        entry_id = next_id.get((which, ledger_id), 0)
        next_id[(which, ledger_id)] = entry_id + 1
        payload = bytes([which, ledger_id, entry_id % 256]) * size
        confirmed[(which, ledger_id, entry_id)] = payload
        tail.confirmed(ledger_id, entry_id, payload)
        assert cache.bytes <= bytes_max and cache.entries <= entries_max
    held_bytes = held = 0
    for which, tail in enumerate(tails):
        for ledger_id in range(4):
            top = next_id.get((which, ledger_id), 0)
            for entry_id in range(top):
                kept = tail.get(ledger_id, entry_id, entry_id)
                if kept is not None:
                    assert kept == [confirmed[(which, ledger_id, entry_id)]]
                    held += 1
                    held_bytes += len(kept[0])
    assert (held, held_bytes) == (cache.entries, cache.bytes)
