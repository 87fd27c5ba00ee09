"""The managed ledger's pure parts: position arithmetic over its list of ledgers
(``ledger_index.py``) and which ledgers trimming may delete (``retention.py``), on the
worked examples of their docstrings."""

from __future__ import annotations

import pytest

from georep.domain.position import Position
from georep.storage.managed_ledger import retention
from georep.storage.managed_ledger.config import ManagedLedgerConfig
from georep.storage.managed_ledger.ledger_index import LedgerIndex
from georep.storage.meta.managed_ledgers import LedgerInfo

P = Position

#: Ledgers 7 (3 entries), 12 (0 entries), 15 (2 entries, being written).
LEDGERS = [
    LedgerInfo(7, entries=3, size_bytes=30, created_at=0.0, closed_at=1.0),
    LedgerInfo(12, entries=0, size_bytes=0, created_at=1.0, closed_at=2.0),
    LedgerInfo(15, entries=2, size_bytes=20, created_at=2.0),
]


def test_the_worked_example() -> None:
    index = LedgerIndex(LEDGERS)
    assert index.bases == [0, 3, 3] and index.total() == 5
    assert index.rank(P(12, 4)) == 3
    assert index.position_at(3) == P(15, 0)
    assert index.next_position(P(7, 2)) == P(15, 0)
    assert index.tail() == P(15, 2) and index.last_entry() == P(15, 1)


@pytest.mark.parametrize(
    ("method", "arguments", "answer"),
    [
        ("first_position", (), P(7, 0)),
        ("position_at_or_after", (P(12, 0),), P(15, 0)),
        ("position_at_or_after", (P(99, 0),), P(15, 2)),  # past the end: the tail
        ("entry_at_or_before", (P(12, 9),), P(7, 2)),
        ("entry_at_or_before", (P(7, -1),), None),
        ("entries_after", (P(7, 1),), 3),
        ("entries_after", (None,), 5),
        ("entries_between", (P(7, 2), P(15, 0)), 0),  # nothing between: joinable
        ("entries_in", (P(7, 1), P(15, 0)), 3),
        ("read_plan", (P(7, 1), 3), [(7, 1, 2), (15, 0, 0)]),
    ],
)
def test_answers(method: str, arguments: tuple, answer: object) -> None:
    assert getattr(LedgerIndex(LEDGERS), method)(*arguments) == answer


def test_the_ledger_being_written_keeps_its_live_counts_across_a_rebuild() -> None:
    index = LedgerIndex(LEDGERS)
    index.confirmed(10)
    index.rebuild(LEDGERS[1:])  # 7 trimmed; 15 still written
    assert index.tail() == P(15, 3) and index.total_bytes() == 30


@pytest.mark.parametrize(
    ("slowest", "config", "count"),
    [
        (P(7, 2), ManagedLedgerConfig(), 2),  # the docstring's example
        (P(7, 1), ManagedLedgerConfig(), 0),  # a cursor still needs 7
        (None, ManagedLedgerConfig(), 2),  # no cursor: never the last ledger
        (P(7, 2), ManagedLedgerConfig(retention_s=60), 0),  # 7 is young
    ],
)
def test_trimmable_count(slowest, config, count) -> None:
    index = LedgerIndex(LEDGERS)
    assert retention.trimmable_count(index, LEDGERS, slowest, config, now=10.0) == count
