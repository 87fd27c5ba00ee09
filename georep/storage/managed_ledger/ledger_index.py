"""Position arithmetic over a managed ledger's list of ledgers, pure (no I/O).

The log is the list's ledgers in order; an entry's ordinal is the number of stored
entries before it. Per ledger the index keeps its id, entries, bytes and the entries
of every ledger before it (``bases``), so a position's rank and an ordinal's position
are one bisect each. The last ledger's entries and bytes count up live as its appends
are confirmed (:meth:`LedgerIndex.confirmed`); a rebuild from the list keeps them while
that ledger is still being written.

Worked example, ledgers 7 (3 entries), 12 (0 entries), 15 (2 entries): bases [0, 3, 3],
total 5. ``rank((12, 4))`` = 3 (every entry of 7; none of 12), ``position_at(3)`` =
(15, 0), ``next_position((7, 2))`` = (15, 0) (12 is empty), the tail is (15, 2): the
position the next append would get.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from georep.domain.position import Position
from georep.invariant import invariant
from georep.storage.meta.managed_ledgers import LedgerInfo


class LedgerIndex:
    """The list ``ledgers`` indexed for position arithmetic (see the module docstring)."""

    __slots__ = ("bases", "counts", "ids", "sizes")

    def __init__(self, ledgers: Sequence[LedgerInfo]) -> None:
        self.ids: list[int] = []
        self.counts: list[int] = []
        self.sizes: list[int] = []
        self.bases: list[int] = []
        self.rebuild(ledgers)

    def rebuild(self, ledgers: Sequence[LedgerInfo]) -> None:
        """Index ``ledgers`` afresh; the last ledger keeps its live counts while it is
        the same ledger and not closed."""
        live_entries = self.counts[-1] if self.counts else 0
        live_bytes = self.sizes[-1] if self.sizes else 0
        last_id = self.ids[-1] if self.ids else None
        self.ids = [info.ledger_id for info in ledgers]
        self.counts = [info.entries for info in ledgers]
        self.sizes = [info.size_bytes for info in ledgers]
        if self.ids and self.ids[-1] == last_id and ledgers[-1].closed_at is None:
            self.counts[-1], self.sizes[-1] = live_entries, live_bytes  # still written
        self.bases = []
        running = 0
        for count in self.counts:
            self.bases.append(running)
            running += count

    def confirmed(self, size: int) -> None:
        """One more entry of ``size`` bytes confirmed in the last ledger."""
        self.counts[-1] += 1
        self.sizes[-1] += size

    # --- the arithmetic ---------------------------------------------------------------
    def rank(self, position: Position) -> int:
        """How many stored entries are <= ``position``."""
        index = bisect.bisect_right(self.ids, position.ledger_id) - 1
        if index < 0:
            return 0
        if self.ids[index] == position.ledger_id:
            return self.bases[index] + min(max(position.entry_id + 1, 0), self.counts[index])
        return self.bases[index] + self.counts[index]

    def position_at(self, ordinal: int) -> Position:
        """The entry with ``ordinal`` entries before it (0 <= ordinal < total)."""
        invariant(0 <= ordinal < self.total(), f"ordinal {ordinal} out of range")
        index = bisect.bisect_right(self.bases, ordinal) - 1
        return Position(self.ids[index], ordinal - self.bases[index])

    def total(self) -> int:
        return self.bases[-1] + self.counts[-1] if self.ids else 0

    def total_bytes(self) -> int:
        return sum(self.sizes)

    def tail(self) -> Position:
        """The position the next append would get in the last ledger: after every stored
        entry, and <= every entry still to come."""
        return Position(self.ids[-1], self.counts[-1])

    def last_entry(self) -> Position | None:
        """The last entry the list holds; None when it holds none."""
        for ledger_id, count in zip(reversed(self.ids), reversed(self.counts), strict=True):
            if count > 0:
                return Position(ledger_id, count - 1)
        return None

    def first_position(self) -> Position | None:
        """The first entry still stored; None when there is none."""
        return self.position_at(0) if self.total() > 0 else None

    def next_position(self, position: Position) -> Position:
        """The first entry after ``position``; past the last entry, the position the
        next append would get in the last ledger (every later entry is greater)."""
        rank = self.rank(position)
        if rank < self.total():
            return self.position_at(rank)
        return max(self.tail(), _next_in_ledger(position))

    def position_at_or_after(self, position: Position) -> Position:
        """The first entry >= ``position``; past the last entry, the tail (see
        :meth:`next_position`)."""
        rank = self.rank(position.predecessor())
        if rank < self.total():
            return self.position_at(rank)
        return self.tail()

    def entry_at_or_before(self, position: Position) -> Position | None:
        """The last stored entry <= ``position``; None when there is none."""
        rank = self.rank(position)
        return self.position_at(rank - 1) if rank > 0 else None

    def entries_after(self, position: Position | None) -> int:
        """Entries stored after ``position`` (all of them for None), up to the last
        confirmed one: the backlog of a mark-delete position."""
        return self.total() - (0 if position is None else self.rank(position))

    def entries_between(self, after: Position, before: Position) -> int:
        """Entries p with ``after < p < before``."""
        return max(0, self.rank(before.predecessor()) - self.rank(after))

    def entries_in(self, low: Position, high: Position) -> int:
        """Entries p with ``low <= p <= high`` (1 for ``low == high``: an entry still
        stored, confirmed)."""
        return max(0, self.rank(high) - self.rank(low.predecessor()))

    def read_plan(self, start: Position, count_max: int) -> list[tuple[int, int, int]]:
        """The (ledger id, first entry, last entry) spans holding the first
        ``count_max`` entries >= ``start``, in order."""
        first = self.rank(start.predecessor())
        end = min(self.total(), first + count_max)
        plan = []
        ordinal = first
        while ordinal < end:
            index = bisect.bisect_right(self.bases, ordinal) - 1
            base = self.bases[index]
            last = min(base + self.counts[index], end) - 1
            plan.append((self.ids[index], ordinal - base, last - base))
            ordinal = last + 1
        return plan


def _next_in_ledger(position: Position) -> Position:
    if position.entry_id >= Position.LATEST.entry_id:
        return position
    return position.next_in_ledger()
