"""parse_decimal: ASCII digits only, bounded, None for everything else."""

from __future__ import annotations

import pytest

from georep import limits
from georep.domain.decimal_text import parse_decimal


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", 0),
        ("42", 42),
        ("007", 7),
        ("9" * limits.decimal_digits_max, int("9" * limits.decimal_digits_max)),
        ("", None),
        ("\u00b2", None),  # superscript two: isdigit() says yes, int() says no
        ("\u0663", None),  # Arabic-Indic three: int() would say 3
        ("\U0001d7d7", None),  # mathematical bold nine
        ("-1", None),
        ("+1", None),
        (" 1", None),
        ("1 ", None),
        ("1_0", None),
        ("1.0", None),
        ("9" * (limits.decimal_digits_max + 1), None),
        ("1" * 5000, None),  # past Python's int-from-string limit: never converted
    ],
)
def test_parse_decimal(text, expected) -> None:
    assert parse_decimal(text) == expected
