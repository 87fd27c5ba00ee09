"""A position in a topic's log: (ledger id, entry id), ordered as a tuple. The one
position type of georep: the managed ledger, the broker (message ids), the admin REST,
snapshots, subscription sync, the gateway's client and the drill all use it, and
``Position.EARLIEST`` / ``Position.LATEST`` are the client's earliest and latest.

Ledger ids only grow (the metadata store never reuses one), and a managed ledger's
ledgers are listed in id order, so tuple order is log order: (7, 12) < (9, 0) < (9, 1).

Not every position names an entry. ``(L, -1)`` means "before the first entry of ledger
L" and is what a mark-delete position looks like when nothing of L is acknowledged yet;
``(L, n)`` for a ledger L of n entries means "after the last entry of L". Such positions
still order correctly against every entry, which is all cursors need. The sentinels
``Position.EARLIEST`` and ``Position.LATEST`` lie before and after every entry.
"""

from __future__ import annotations

from typing import ClassVar, NamedTuple


class InvalidPosition(ValueError):
    """Text or ids that are not a position (``Position.parse``, ``Position.checked``)."""


#: Largest ledger or entry id: the int64 maximum of the wire protocol.
ID_MAX = 2**63 - 1


class _Ids(NamedTuple):
    ledger_id: int
    entry_id: int


class Position(_Ids):
    """(ledger id, entry id); a tuple, so it unpacks, orders and hashes as one."""

    __slots__ = ()

    #: Before and after every entry: the client's MessageId.earliest and .latest.
    EARLIEST: ClassVar[Position]
    LATEST: ClassVar[Position]

    def __str__(self) -> str:
        return f"{self.ledger_id}:{self.entry_id}"

    @classmethod
    def parse(cls, text: str) -> Position:
        """``"12:5"`` -> Position(12, 5); InvalidPosition otherwise."""
        ledger, sep, entry = text.partition(":")
        try:
            if not sep:
                raise ValueError(text)
            return cls.checked(int(ledger), int(entry))
        except ValueError:
            raise InvalidPosition(f"not a position (ledger:entry): {text!r}") from None

    @classmethod
    def checked(cls, ledger_id: object, entry_id: object) -> Position:
        """A position from untrusted ints: both within -1..2**63-1."""
        return cls(_checked_id(ledger_id), _checked_id(entry_id))

    def predecessor(self) -> Position:
        """The position just before this one in the same ledger: (L, e) -> (L, e - 1).
        For e = 0 that is (L, -1), "before ledger L", which is after every entry of
        earlier ledgers."""
        return Position(self.ledger_id, self.entry_id - 1)

    @classmethod
    def end_of_ledger(cls, ledger_id: int) -> Position:
        """After every entry of ledger ``ledger_id``, before the next ledger's first."""
        return cls(ledger_id, ID_MAX)

    def next_in_ledger(self) -> Position:
        """(L, e) -> (L, e + 1), whether or not ledger L has that entry."""
        return Position(self.ledger_id, self.entry_id + 1)

    @property
    def is_entry_id(self) -> bool:
        """Whether this can name an entry (ids >= 0), not whether the entry exists."""
        return self.ledger_id >= 0 and self.entry_id >= 0


Position.EARLIEST = Position(-1, -1)
Position.LATEST = Position(ID_MAX, ID_MAX)


def _checked_id(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not -1 <= value <= ID_MAX:
        raise InvalidPosition(f"position ids must be ints in -1..2**63-1: {value!r}")
    return value
