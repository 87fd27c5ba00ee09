"""Invariants that ``python -O`` cannot strip.

A broken invariant is a bug: the process must stop rather than carry on with state it
no longer understands. Operating errors (a bookie down, bad input) are typed exceptions
instead, handled by callers.
"""

from __future__ import annotations

from typing import TypeVar

_T = TypeVar("_T")


class InvariantViolation(AssertionError):
    """A condition the code relies on does not hold: a bug, not an operating error."""


def invariant(condition: object, message: str = "invariant violated") -> None:
    if not condition:
        raise InvariantViolation(message)


def present(value: _T | None, message: str = "invariant violated") -> _T:
    """``value``, which the code relies on being set: ``invariant(value is not None)``
    that also tells the type checker so. Example: ``reader = present(self._reader, "index
    not open")``."""
    if value is None:
        raise InvariantViolation(message)
    return value
