"""Pulsar's spelling of a cursor in ``internalStats``, read.

``markDeletePosition`` is ``"L:E"``; ``individuallyDeletedMessages`` lists the ranges
acknowledged above it, each open below and closed above: ``"[(3:5..3:7], (3:9..4:0]]"``
holds entries 3:6 and 3:7, then every entry after 3:9 up to 4:0. The lower end is the
entry before the range (it may be the last entry of an earlier ledger), so a range is
kept as its two ends, as Pulsar writes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from georep.domain.position import Position

Range = tuple[Position, Position]


def parse_position(text: str) -> Position:
    """``"L:E"`` -> ``Position(L, E)``; ValueError on anything else.

    >>> parse_position("7:-1")
    Position(ledger_id=7, entry_id=-1)
    """
    ledger, colon, entry = str(text).strip().partition(":")
    if not colon:
        raise ValueError(f"position {text!r} is not ledger:entry")
    return Position(int(ledger), int(entry))


def parse_ranges(text: str) -> list[Range]:
    """``individuallyDeletedMessages`` -> ``[(lower, upper), ...]`` (lower excluded).

    >>> parse_ranges("[(3:5..3:7], (3:9..4:0]]")
    [(Position(ledger_id=3, entry_id=5), Position(ledger_id=3, entry_id=7)), \
(Position(ledger_id=3, entry_id=9), Position(ledger_id=4, entry_id=0))]
    >>> parse_ranges("[]")
    []
    """
    body = str(text).strip()
    if not (body.startswith("[") and body.endswith("]")):
        raise ValueError(f"ranges {text!r} are not [(L:E..L:E], ...]")
    body = body[1:-1].strip()
    ranges: list[Range] = []
    if not body:
        return ranges
    for part in body.split(","):
        part = part.strip()
        if not (part.startswith("(") and part.endswith("]")):
            raise ValueError(f"range {part!r} is not (L:E..L:E]")
        lower, dots, upper = part[1:-1].partition("..")
        if not dots:
            raise ValueError(f"range {part!r} is not (L:E..L:E]")
        ranges.append((parse_position(lower), parse_position(upper)))
    return ranges


def parse_cursor(cursor: Mapping[str, Any]) -> tuple[Position, list[Range]]:
    """One cursor of ``internalStats``: (mark-delete position, ranges above it);
    KeyError, TypeError or ValueError when it is not one.

    >>> parse_cursor({"markDeletePosition": "3:4", "individuallyDeletedMessages": "[]"})
    (Position(ledger_id=3, entry_id=4), [])
    """
    return (
        parse_position(cursor["markDeletePosition"]),
        parse_ranges(cursor.get("individuallyDeletedMessages") or "[]"),
    )


def acknowledged(position: Position, mark_delete: Position, ranges: list[Range]) -> bool:
    """Whether a cursor at ``mark_delete`` with ``ranges`` holds ``position`` as acked.

    >>> acknowledged(Position(3, 6), Position(3, 4), parse_ranges("[(3:5..3:7]]"))
    True
    >>> acknowledged(Position(3, 5), Position(3, 4), parse_ranges("[(3:5..3:7]]"))
    False
    """
    return position <= mark_delete or any(lower < position <= upper for lower, upper in ranges)
