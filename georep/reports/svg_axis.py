"""Round axis ticks for the reports' SVG charts (the drill page, the reconcile page), and
the value axis both draw: round counts from 0 up, labelled along a panel's left edge.

A tick step is 1, 2 or 5 times a power of ten, the smallest that gives at most about
``count`` ticks over the range and no longer than the range (so that one multiple at
least lies inside it), and ticks are its multiples, so that 0 is a tick whenever the
range holds it. Worked example: ``nice_ticks(-4.2, -0.1)`` has a range of 4.1, a raw
step of 4.1 / 5 = 0.82, so the step is 1 and the ticks are -4, -3, -2, -1;
``nice_ticks(0, 599)`` gives the step 200 (100 would make 6 ticks beyond 5): 0, 200,
400. ``tick_label`` prints a tick with as many decimals as its step needs (-0.5, 1,
0.25), never ``-0``.
"""

from __future__ import annotations

import math
from collections.abc import Callable


def nice_step(span: float, count: int = 5) -> float:
    if span <= 0 or not math.isfinite(span):
        return 1.0
    raw = span / max(count, 1)
    magnitude: float = 10 ** math.floor(math.log10(raw))
    smaller = magnitude
    for factor in (1, 2, 5, 10):
        step = factor * magnitude
        if step >= raw:
            # A step longer than the span may have no multiple inside it (span 4,000,001
            # over 2 ticks rounds up to 5,000,000): the next smaller one, below raw, has.
            return step if step <= span else smaller
        smaller = step
    return 10 * magnitude  # not reached: factor 10 always covers raw


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Multiples of a round step within [low, high] (both included when round)."""
    if high < low:
        low, high = high, low
    step = nice_step(high - low, count)
    first = math.ceil(low / step - 1e-9)
    last = math.floor(high / step + 1e-9)
    return [round(i * step, 12) + 0.0 for i in range(first, last + 1)]


def tick_label(value: float, step: float) -> str:
    decimals = max(0, -math.floor(math.log10(step) + 1e-9))  # 1, 2 or 5 x 10^-decimals
    text = f"{value:.{decimals}f}"
    return "0" if float(text) == 0 else text


def value_labels(
    high: float,
    count: int,
    right: float,
    y: Callable[[float], float],
    *,
    font_size: int = 11,
    label: Callable[[float, float], str] = tick_label,
) -> str:
    """SVG text for the round ticks from 0 to ``high`` (about ``count`` of them), each
    ending at x = ``right`` on its own height ``y(value)``; ``label(value, step)`` prints
    one (a count may say 1.5k). Example: ``high=600, count=3`` labels 0, 200, 400, 600."""
    step = nice_step(high, count)
    return "".join(
        f'<text x="{right}" y="{y(value) + 4:.1f}" font-size="{font_size}" '
        f'text-anchor="end">{label(value, step)}</text>'
        for value in nice_ticks(0, high, count)
    )
