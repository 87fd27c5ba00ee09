"""What a subscription has acknowledged: mark-delete position plus individually deleted
ranges above it, plus the partially acknowledged batch entries. Pure arithmetic, no I/O:
the cursor asks it, persists it, and restores it.

Everything <= ``mark_delete_position`` (MDP) is acknowledged; so is every position in
``individually_deleted``, whose ranges all lie above the MDP. After each change the MDP
swallows the lowest range when no entry of the log lies between the two, so the MDP
always stands just before the first unacknowledged entry. Whether an entry lies between
two positions is the log's knowledge (where ledgers end), asked through :class:`LogShape`.

Worked example, ledger 4 with entries 0..2 then ledger 6 with 0..4, MDP (4, -1):

- acknowledge (6,0), (4,1): ranges [(4,1)], [(6,0)]; MDP stays (entry (4,0) is open);
- acknowledge (4,0): (4,0) touches (4,1), one range [(4,0),(4,1)]; nothing lies between
  MDP (4,-1) and (4,0), so MDP -> (4,1); entry (4,2) is still open;
- acknowledge (4,2): MDP -> (4,2); no entry between (4,2) and (6,0) (ledger 4 ends at 2),
  so MDP -> (6,0); ranges empty.

Partially acknowledged batches (Pulsar's ``batchDeletedIndexes``): entry -> the bits of
its members still unacknowledged (member i is bit i). Each partial acknowledgement ANDs
its bits in; when none remain the entry is acknowledged whole and leaves the map, as it
does when it is acknowledged whole or falls at or below the MDP. Example, a batch of 3
at (6,1): members 0 then 2 acknowledged leave 0b110 then 0b010; member 1 acknowledged
leaves 0, so (6,1) is acknowledged like any entry. At most ``batch_entries_max`` entries
are kept: a partial acknowledgement of one more is dropped (``batch_entries_dropped``)
and that batch stays wholly unacknowledged, to be delivered again.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from typing import Protocol

from georep import limits
from georep.domain.position import Position
from georep.storage.managed_ledger.range_set import RangeSet


class LogShape(Protocol):
    def entries_between(self, after: Position, before: Position) -> int:
        """How many entries p of the log have ``after < p < before``."""
        ...


class AckState:
    __slots__ = (
        "_batch_keys",
        "_batches",
        "batch_entries_dropped",
        "batch_entries_max",
        "individually_deleted",
        "mark_delete_position",
    )

    def __init__(
        self,
        mark_delete_position: Position,
        individually_deleted: RangeSet,
        batches: Iterable[tuple[Position, int]] = (),
        *,
        batch_entries_max: int = limits.cursor_batch_entries_count_max,
    ) -> None:
        self.mark_delete_position = mark_delete_position
        self.individually_deleted = individually_deleted
        individually_deleted.remove_below(mark_delete_position)
        self.batch_entries_max = batch_entries_max
        self.batch_entries_dropped = 0
        #: entry -> bits of its members still unacknowledged; keys also sorted in a list
        self._batches: dict[Position, int] = {}
        self._batch_keys: list[Position] = []
        for position, bits in sorted(batches):
            if bits and not self.is_acknowledged(position):
                self._batches[position] = bits
                self._batch_keys.append(position)

    def is_acknowledged(self, position: Position) -> bool:
        return position <= self.mark_delete_position or position in self.individually_deleted

    # --- partially acknowledged batches -------------------------------------------------
    def batch_bits(self, position: Position) -> int | None:
        """The bits of the members of entry ``position`` still unacknowledged, or None
        when no member is acknowledged on its own."""
        return self._batches.get(position)

    def batches(self) -> list[tuple[Position, int]]:
        """The partially acknowledged entries, lowest first."""
        return [(position, self._batches[position]) for position in self._batch_keys]

    @property
    def batch_entries(self) -> int:
        return len(self._batch_keys)

    def acknowledge_members(self, position: Position, remaining: int, log: LogShape) -> bool:
        """Members of the batch at ``position`` acknowledged: ``remaining`` holds the
        bits of those still unacknowledged as the acknowledger sees them. True when the
        state changed (the entry is acknowledged whole once no bit remains)."""
        if self.is_acknowledged(position):
            return False
        known = self._batches.get(position)
        merged = remaining if known is None else known & remaining
        if merged == 0:
            return self.acknowledge([position], log)
        if merged == known:
            return False
        if known is None:
            if len(self._batch_keys) >= self.batch_entries_max:
                self.batch_entries_dropped += 1
                return False
            bisect.insort(self._batch_keys, position)
        self._batches[position] = merged
        return True

    def _forget_batch(self, position: Position) -> None:
        if self._batches.pop(position, None) is not None:
            del self._batch_keys[bisect.bisect_left(self._batch_keys, position)]

    def _forget_batches_through(self, position: Position) -> None:
        cut = bisect.bisect_right(self._batch_keys, position)
        if cut:
            for key in self._batch_keys[:cut]:
                del self._batches[key]
            del self._batch_keys[:cut]

    # --- changes ------------------------------------------------------------------------
    def acknowledge(self, positions: Iterable[Position], log: LogShape) -> bool:
        """Individual acknowledgements; True when the state changed."""
        changed = False
        for position in positions:
            if not self.is_acknowledged(position):
                self.individually_deleted.add(position, position)
                self._forget_batch(position)
                changed = True
        if changed:
            self._advance(log)
        return changed

    def acknowledge_range(self, low: Position, high: Position, log: LogShape) -> bool:
        """Acknowledge every entry p with ``low <= p <= high`` (entry ids >= 0; the range
        may span ledgers and its ends need not be entries) without listing them: one
        range added, batches inside it forgotten. True when the state changed. Example,
        MDP (4,-1), ledger 4 of 3 entries: ``acknowledge_range((4,1), (6,3))`` adds
        [(4,1),(6,3)]; (4,0) is still open, so the MDP stays."""
        if high <= self.mark_delete_position:
            return False
        low = max(low, self.mark_delete_position.next_in_ledger())
        covering = self.individually_deleted.range_of(low)
        if covering is not None and covering[1] >= high:
            return False
        self.individually_deleted.add(low, high)
        first = bisect.bisect_left(self._batch_keys, low)
        last = bisect.bisect_right(self._batch_keys, high)
        for key in self._batch_keys[first:last]:
            del self._batches[key]
        del self._batch_keys[first:last]
        self._advance(log)
        return True

    def mark_delete(self, position: Position, log: LogShape) -> bool:
        """Cumulative acknowledgement up to ``position``; never moves the MDP back. True
        when the state changed."""
        if position <= self.mark_delete_position:
            return False
        self.mark_delete_position = position
        self.individually_deleted.remove_below(position)
        self._forget_batches_through(position)
        self._advance(log)
        return True

    def reset(self, position: Position) -> None:
        """Everything before ``position`` acknowledged, nothing from it on (may move the
        MDP back)."""
        self.mark_delete_position = position.predecessor()
        self.individually_deleted.clear()
        self._batches.clear()
        self._batch_keys.clear()

    def _advance(self, log: LogShape) -> None:
        ranges = self.individually_deleted
        mark_delete = self.mark_delete_position
        for low, high in ranges:
            if log.entries_between(mark_delete, low) != 0:
                break
            mark_delete = high
        if mark_delete != self.mark_delete_position:
            self.mark_delete_position = mark_delete
            ranges.remove_below(mark_delete)  # one slice, however many ranges it ate
            self._forget_batches_through(mark_delete)
