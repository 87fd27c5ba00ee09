"""Ledger metadata: the value stored per ledger and changed only by compare-and-set.

A ledger's ensembles are a list of segments, each ``(first entry id, bookies)``. Entry
``e`` lives in the last segment whose first entry id is <= e. Example: ensembles
``[(0, (b1, b2, b3)), (40, (b1, b4, b3))]`` say that entries 0..39 were written to
b1/b2/b3 and entries from 40 on to b1/b4/b3 (b2 failed after entry 39 was confirmed).

``version`` is the compare-and-set token: the store accepts an update only when the
caller's version equals the stored one, and returns the metadata with version + 1.
"""

from __future__ import annotations

import bisect
import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from georep.invariant import invariant


class LedgerState(enum.StrEnum):
    OPEN = "OPEN"
    IN_RECOVERY = "IN_RECOVERY"
    CLOSED = "CLOSED"


Ensemble = tuple[str, ...]


@dataclass(frozen=True, slots=True)
class LedgerMetadata:
    ledger_id: int
    ensemble_size: int
    write_quorum: int
    ack_quorum: int
    ensembles: tuple[tuple[int, Ensemble], ...]
    state: LedgerState = LedgerState.OPEN
    #: Last entry of a CLOSED ledger; -1 for an empty one, and while not CLOSED.
    last_entry_id: int = -1
    #: Payload bytes of a CLOSED ledger.
    length: int = 0
    custom: Mapping[str, str] = field(default_factory=dict)
    version: int = 0
    created_at: float = 0.0

    def __post_init__(self) -> None:
        invariant(
            self.ensemble_size >= self.write_quorum >= self.ack_quorum >= 1,
            f"ledger {self.ledger_id}: need E >= Qw >= Qa >= 1",
        )
        invariant(len(self.ensembles) >= 1, f"ledger {self.ledger_id}: no ensemble")
        firsts = [first for first, _ in self.ensembles]
        invariant(
            firsts == sorted(set(firsts)) and firsts[0] == 0,
            f"ledger {self.ledger_id}: segments must start at 0 and increase: {firsts}",
        )
        for _, bookies in self.ensembles:
            invariant(
                len(bookies) == self.ensemble_size and len(set(bookies)) == len(bookies),
                f"ledger {self.ledger_id}: ensemble {bookies} is not {self.ensemble_size}"
                " distinct bookies",
            )

    # --- segments ------------------------------------------------------------------
    def segment_index(self, entry_id: int) -> int:
        firsts = [first for first, _ in self.ensembles]
        return max(0, bisect.bisect_right(firsts, entry_id) - 1)

    def ensemble_for(self, entry_id: int) -> Ensemble:
        return self.ensembles[self.segment_index(entry_id)][1]

    @property
    def last_ensemble(self) -> Ensemble:
        return self.ensembles[-1][1]

    @property
    def last_segment_first_entry(self) -> int:
        return self.ensembles[-1][0]

    def segment_range(self, index: int) -> tuple[int, int]:
        """Entry ids ``[first, last]`` of segment ``index`` (last = -1 + first when empty).

        The last segment of a ledger that is not CLOSED ends at ``last_entry_id`` which
        is unknown; callers must only ask that for CLOSED ledgers.
        """
        first = self.ensembles[index][0]
        if index + 1 < len(self.ensembles):
            return first, self.ensembles[index + 1][0] - 1
        invariant(self.state == LedgerState.CLOSED, "open segment has no known end")
        return first, self.last_entry_id

    def bookies(self) -> set[str]:
        return {bookie for _, ensemble in self.ensembles for bookie in ensemble}

    @property
    def is_closed(self) -> bool:
        return self.state == LedgerState.CLOSED

    def replace(self, **changes: Any) -> LedgerMetadata:
        return dataclasses.replace(self, **changes)

    def with_segment(self, first_entry_id: int, ensemble: Ensemble) -> LedgerMetadata:
        """A copy whose ensembles end with a segment starting at ``first_entry_id``.

        A segment starting at the same entry as the last one replaces it (an ensemble
        change before any entry reached the new segment).
        """
        kept = tuple((f, e) for f, e in self.ensembles if f < first_entry_id)
        return self.replace(ensembles=(*kept, (first_entry_id, tuple(ensemble))))

    def with_bookie_replaced(self, segment: int, old: str, new: str) -> LedgerMetadata:
        first, ensemble = self.ensembles[segment]
        invariant(old in ensemble and new not in ensemble, "bad bookie replacement")
        updated = tuple(new if b == old else b for b in ensemble)
        segments = list(self.ensembles)
        segments[segment] = (first, updated)
        return self.replace(ensembles=tuple(segments))
