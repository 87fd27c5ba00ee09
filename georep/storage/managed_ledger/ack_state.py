"""What a subscription has acknowledged: mark-delete position plus individually deleted
ranges above it. Pure arithmetic, no I/O: the cursor asks it, persists it, and restores it.

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
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from georep.storage.managed_ledger.position import Position
from georep.storage.managed_ledger.range_set import RangeSet


class LogShape(Protocol):
    def entries_between(self, after: Position, before: Position) -> int:
        """How many entries p of the log have ``after < p < before``."""
        ...


class AckState:
    __slots__ = ("individually_deleted", "mark_delete_position")

    def __init__(self, mark_delete_position: Position, individually_deleted: RangeSet) -> None:
        self.mark_delete_position = mark_delete_position
        self.individually_deleted = individually_deleted
        individually_deleted.remove_below(mark_delete_position)

    def is_acknowledged(self, position: Position) -> bool:
        return position <= self.mark_delete_position or position in self.individually_deleted

    def acknowledge(self, positions: Iterable[Position], log: LogShape) -> bool:
        """Individual acknowledgements; True when the state changed."""
        changed = False
        for position in positions:
            if not self.is_acknowledged(position):
                self.individually_deleted.add(position, position)
                changed = True
        if changed:
            self._advance(log)
        return changed

    def mark_delete(self, position: Position, log: LogShape) -> bool:
        """Cumulative acknowledgement up to ``position``; never moves the MDP back. True
        when the state changed."""
        if position <= self.mark_delete_position:
            return False
        self.mark_delete_position = position
        self.individually_deleted.remove_below(position)
        self._advance(log)
        return True

    def reset(self, position: Position) -> None:
        """Everything before ``position`` acknowledged, nothing from it on (may move the
        MDP back)."""
        self.mark_delete_position = position.predecessor()
        self.individually_deleted.clear()

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
