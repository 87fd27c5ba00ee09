"""The one reading of a decimal integer written as text by anyone outside this process.

``str.isdigit()`` accepts characters ``int()`` refuses (a superscript two, say), and
``int()`` accepts more than a decimal (``" 7"``, ``"+7"``, ``"7_0"``, Arabic-Indic digits),
so an ``isdigit()`` check followed by ``int()`` either raises where a None was promised
or lets odd spellings through. :func:`parse_decimal` takes ASCII ``0``-``9`` only, at most
``limits.decimal_digits_max`` of them (so a 5,000-digit string never reaches Python's
int-from-string conversion limit), and returns None for anything else.

Examples: ``"42"`` → 42; ``"007"`` → 7; ``""``, ``"²"``, ``"-1"``, ``" 1"``, ``"1_0"`` and
a 21-digit string → None.
"""

from __future__ import annotations

from georep import limits

_DIGITS = frozenset("0123456789")


def parse_decimal(text: str, *, digits_max: int = limits.decimal_digits_max) -> int | None:
    """``text`` as a non-negative integer if it is 1..digits_max ASCII digits, else None."""
    if not text or len(text) > digits_max or not _DIGITS.issuperset(text):
        return None
    return int(text)
