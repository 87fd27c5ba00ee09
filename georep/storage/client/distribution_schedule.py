"""Quorum arithmetic for a ledger, apart from the ops that ask it questions.

Write set. Entry ``e`` of a segment with ensemble size E and write quorum Qw goes to the
ensemble indices ``(e + i) % E`` for ``i`` in ``0..Qw-1``. For E=3, Qw=2::

    entry 0 -> (0, 1)     entry 1 -> (1, 2)     entry 2 -> (2, 0)     entry 3 -> (0, 1)

so each bookie holds 2/3 of the entries and the load is striped.

Ack set. An add is durable once Qa distinct bookies of its write set confirmed it.

Coverage set. Recovery fences the last segment's bookies and needs, in *every* write
quorum (the Qw consecutive indices starting at each of the E positions), at least
``Qw - Qa + 1`` answers. Then at most ``Qa - 1`` bookies of any write quorum are
unfenced, so no writer can still collect Qa acks for a new entry. For E=3, Qw=2, Qa=2
the write quorums are {0,1}, {1,2} and {2,0}, and each needs one answer: answers from
indices {0, 1} cover all three, while an answer from {1} alone leaves {2,0} uncovered.

Missing entry. During recovery an entry is declared missing once ``Qw - Qa + 1``
bookies of its write set said "no such entry": had it been acknowledged, at least Qa
of its Qw bookies would have it, leaving at most ``Qw - Qa`` that could say no.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from georep import limits
from georep.invariant import invariant
from georep.storage.errors import InvalidArgument


@dataclass(frozen=True, slots=True)
class Quorums:
    ensemble_size: int
    write_quorum: int
    ack_quorum: int
    _write_sets: tuple[tuple[int, ...], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not (self.ensemble_size >= self.write_quorum >= self.ack_quorum >= 1):
            raise InvalidArgument(
                f"need E >= Qw >= Qa >= 1, got E={self.ensemble_size} "
                f"Qw={self.write_quorum} Qa={self.ack_quorum}"
            )
        if self.ensemble_size > limits.ensemble_size_max:
            raise InvalidArgument(
                f"ensemble size {self.ensemble_size} exceeds {limits.ensemble_size_max}"
            )
        # Write sets repeat with period E: computed once, looked up per entry.
        size = self.ensemble_size
        table = tuple(
            tuple((start + i) % size for i in range(self.write_quorum)) for start in range(size)
        )
        object.__setattr__(self, "_write_sets", table)

    def write_set(self, entry_id: int) -> tuple[int, ...]:
        invariant(entry_id >= 0, f"write set of negative entry {entry_id}")
        return self._write_sets[entry_id % self.ensemble_size]

    @property
    def missing_quorum(self) -> int:
        """ "No such entry" answers that prove an entry was never acknowledged."""
        return self.write_quorum - self.ack_quorum + 1

    def ack_set(self) -> AckSet:
        return AckSet(self.ack_quorum)

    def coverage_set(self) -> CoverageSet:
        return CoverageSet(self)


class AckSet:
    """Which ensemble indices confirmed one entry; met at Qa distinct ones.

    A bitmask of indices and a count: one is made per add, tens of thousands a second.
    """

    __slots__ = ("_ack_quorum", "_count", "_mask")

    def __init__(self, ack_quorum: int) -> None:
        self._ack_quorum = ack_quorum
        self._mask = 0
        self._count = 0

    def add(self, index: int) -> bool:
        """Record a confirmation; True when the quorum is met."""
        bit = 1 << index
        if not self._mask & bit:
            self._mask |= bit
            self._count += 1
        return self._count >= self._ack_quorum

    def remove(self, index: int) -> None:
        """Forget a confirmation (its bookie was replaced by an ensemble change)."""
        bit = 1 << index
        if self._mask & bit:
            self._mask &= ~bit
            self._count -= 1

    def __contains__(self, index: int) -> bool:
        return bool(self._mask & (1 << index))

    @property
    def met(self) -> bool:
        return self._count >= self._ack_quorum

    def __len__(self) -> int:
        return self._count


class CoverageSet:
    """Answers from a segment's bookies; covered when every write quorum has
    ``Qw - Qa + 1`` of them."""

    __slots__ = ("_answered", "_quorums")

    def __init__(self, quorums: Quorums) -> None:
        self._quorums = quorums
        self._answered: set[int] = set()

    def add(self, index: int) -> bool:
        self._answered.add(index)
        return self.covered

    @property
    def covered(self) -> bool:
        q = self._quorums
        need = q.missing_quorum
        for start in range(q.ensemble_size):
            quorum = q.write_set(start)
            if sum(1 for index in quorum if index in self._answered) < need:
                return False
        return True
