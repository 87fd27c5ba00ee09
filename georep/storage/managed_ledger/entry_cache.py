"""The entries managed ledgers confirmed last, kept in memory for the readers at the tail.

A consumer that keeps up reads each entry just after it was confirmed. Without a cache
that read goes back to a bookie: a request, a disk read, a checksum and a decode for an
entry the broker held a moment before. Pulsar's managed ledger keeps such entries in its
entry cache; this is ours, in its simplest form:

- each managed ledger's :class:`TailCache` holds, per ledger, a contiguous run of the
  entries confirmed last (appended in the order they are confirmed, so a run never has
  a gap);
- the :class:`EntryCache` of a factory bounds them all together, at most
  ``limits.managed_ledger_cache_bytes_max`` bytes and
  ``limits.managed_ledger_cache_entries_max`` entries: past either, the entries
  confirmed earliest go first, whichever ledger holds them;
- a read that does not start inside a run reads from the bookies, as before.

Only confirmed entries enter (an entry is never served before it is durable), and a
confirmed entry never changes, so the cache never has to be checked against the bookies.
Eviction is normal work, counted in the stats, not a warning.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

from georep import limits


@dataclass(slots=True)
class _Run:
    """Entries ``first``, ``first + 1``, ... of one ledger: ``payloads[head:]``."""

    first: int
    payloads: list[bytes] = field(default_factory=list)
    head: int = 0

    @property
    def count(self) -> int:
        return len(self.payloads) - self.head

    @property
    def next_id(self) -> int:
        return self.first + self.count

    def drop_first(self) -> int:
        """Forget the first entry; returns its size."""
        payload = self.payloads[self.head]
        self.head += 1
        self.first += 1
        if self.head > 1024 and self.head * 2 > len(self.payloads):
            del self.payloads[: self.head]
            self.head = 0
        return len(payload)


class EntryCache:
    """The bound shared by every managed ledger of a factory (module docstring)."""

    def __init__(
        self,
        bytes_max: int = limits.managed_ledger_cache_bytes_max,
        entries_max: int = limits.managed_ledger_cache_entries_max,
    ) -> None:
        self.bytes_max = bytes_max
        self.entries_max = entries_max
        self.bytes = 0
        self.entries = 0
        #: Every entry admitted, earliest first: (its tail, its ledger). An entry whose
        #: tail forgot it meanwhile costs only its place here until it is reached.
        self._order: collections.deque[tuple[TailCache, int]] = collections.deque()
        self.stats: collections.Counter[str] = collections.Counter()

    def tail(self) -> TailCache:
        return TailCache(self)

    def _admitted(self, tail: TailCache, ledger_id: int, size: int) -> None:
        self._order.append((tail, ledger_id))
        self.bytes += size
        self.entries += 1
        while self.bytes > self.bytes_max or len(self._order) > self.entries_max:
            earliest, earliest_ledger = self._order.popleft()
            freed = earliest._drop_first(earliest_ledger)
            if freed is not None:
                self._released(1, freed)
                self.stats["evicted_entries"] += 1

    def _released(self, count: int, size: int) -> None:
        self.entries -= count
        self.bytes -= size

    def snapshot(self) -> dict[str, int]:
        """``bytes`` and ``entries`` kept now; ``hit_reads``, ``missed_reads`` and
        ``evicted_entries`` since the start."""
        return {"bytes": self.bytes, "entries": self.entries, **self.stats}


class TailCache:
    """One managed ledger's part of an :class:`EntryCache`."""

    def __init__(self, cache: EntryCache) -> None:
        self._cache = cache
        self._runs: dict[int, _Run] = {}

    def confirmed(self, ledger_id: int, entry_id: int, payload: bytes) -> None:
        """``entry_id`` of ``ledger_id`` is durable: keep it."""
        if len(payload) > self._cache.bytes_max:
            return
        run = self._runs.get(ledger_id)
        if run is not None and run.next_id != entry_id:  # not the next one: start afresh
            self.forget(ledger_id)
            run = None
        if run is None:
            run = self._runs[ledger_id] = _Run(entry_id)
        run.payloads.append(payload)
        self._cache._admitted(self, ledger_id, len(payload))

    def get(self, ledger_id: int, first: int, last: int) -> list[bytes] | None:
        """Payloads of entries ``first..last`` of ``ledger_id``, or None unless all of
        them are kept."""
        run = self._runs.get(ledger_id)
        if run is None or first < run.first or last >= run.next_id:
            self._cache.stats["missed_reads"] += 1
            return None
        self._cache.stats["hit_reads"] += 1
        start = run.head + first - run.first
        return run.payloads[start : start + last - first + 1]

    def forget(self, ledger_id: int) -> None:
        """``ledger_id`` is deleted (or its run broke): drop its entries."""
        run = self._runs.pop(ledger_id, None)
        if run is not None:
            kept = run.payloads[run.head :]
            self._cache._released(len(kept), sum(len(p) for p in kept))

    def clear(self) -> None:
        """The managed ledger is closed or fenced: drop everything it kept."""
        for ledger_id in list(self._runs):
            self.forget(ledger_id)

    def _drop_first(self, ledger_id: int) -> int | None:
        run = self._runs.get(ledger_id)
        if run is None or run.count == 0:
            return None
        size = run.drop_first()
        if run.count == 0:
            del self._runs[ledger_id]
        return size
