"""A count as a share of a whole, printed for a reader (the drill's and the audit's pages
and summaries).

``percent`` never rounds a non-zero share to ``0%``: one duplicate in 100,000 reads
``<0.1%``, not "none". Worked example: 2 of 600 is ``0.3%``, 225 of 288 is ``78%``, 0 of
600 is ``0%``, and a share of nothing (``share(0, 0)``) is ``n/a``.
"""

from __future__ import annotations


def share(count: int, whole: int) -> float | None:
    return None if whole <= 0 else count / whole


def percent(value: float | None) -> str:
    if value is None:
        return "n/a"
    if value == 0:
        return "0%"
    if value < 0.001:
        return "<0.1%"
    return f"{value * 100:.1f}%" if value < 0.1 else f"{value * 100:.0f}%"
