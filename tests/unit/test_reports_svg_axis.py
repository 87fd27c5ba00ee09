"""Round axis ticks: table-driven cases from the drill page's old ticks, and properties."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from georep.reports.svg_axis import nice_step, nice_ticks, tick_label, value_labels


@pytest.mark.parametrize(
    ("low", "high", "ticks"),
    [
        (-4.2, -0.1, [-4, -3, -2, -1]),
        (-4.2, 0.3, [-4, -3, -2, -1, 0]),  # 0 at the failure is a tick
        (0, 599, [0, 200, 400]),
        (0, 449, [0, 100, 200, 300, 400]),
        (0, 0.13, [0, 0.05, 0.1]),
        (0, 1, [0, 0.2, 0.4, 0.6, 0.8, 1]),
        (5, 5, [5]),
    ],
)
def test_ticks_are_round(low, high, ticks):
    assert nice_ticks(low, high) == pytest.approx(ticks)


@pytest.mark.parametrize(
    ("value", "step", "label"),
    [(-4.0, 1, "-4"), (0.1, 0.05, "0.10"), (-0.0, 0.5, "0"), (-1e-13, 0.2, "0"), (400, 100, "400")],
)
def test_labels_have_the_decimals_their_step_needs_and_no_minus_zero(value, step, label):
    assert tick_label(value, step) == label


@given(
    st.floats(-1e7, 1e7, allow_nan=False),
    st.floats(1e-3, 1e7, allow_nan=False),
    st.integers(2, 10),
)
def test_ticks_are_multiples_of_a_1_2_5_step_inside_the_range(low, span, count):
    high = low + span
    step = nice_step(high - low, count)  # what nice_ticks uses (high - low may not be span)
    mantissa = step / 10 ** math.floor(math.log10(step))
    assert round(mantissa, 6) in (1, 2, 5)
    ticks = nice_ticks(low, high, count)
    assert 1 <= len(ticks) <= 2 * count + 1
    for tick in ticks:
        assert low - step * 1e-6 <= tick <= high + step * 1e-6
        assert math.isclose(tick, round(tick / step) * step, rel_tol=1e-9, abs_tol=step * 1e-6)
    if low <= 0 <= high:
        assert 0 in ticks


def test_value_labels_are_round_counts_from_zero_ending_at_the_edge() -> None:
    svg = value_labels(600, 3, 38, lambda value: 100 - value / 6)
    assert re.findall(
        r'<text x="38" y="([\d.]+)" font-size="11" text-anchor="end">(\w+)<', svg
    ) == [("104.0", "0"), ("70.7", "200"), ("37.3", "400"), ("4.0", "600")]
    thousands = value_labels(2000, 2, 0, float, label=lambda v, s: f"{v / 1000:g}k")
    assert re.findall(r">(\w+)</text>", thousands) == ["0k", "1k", "2k"]
