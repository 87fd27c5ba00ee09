"""RateMeter: counts over the last N seconds, on an injected clock."""

from __future__ import annotations

import pytest

from georep import limits
from georep.broker.rate_meter import RateMeter


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_worked_example() -> None:
    """The example of rate_meter's docstring."""
    clock = Clock(100.0)
    meter = RateMeter(10, clock)
    for _ in range(50):
        meter.record(1, 1024)
    clock.now = 104.3
    meter.record(30, 30 * 1024)
    clock.now = 105.5
    assert meter.rates() == (8.0, 8.0 * 1024)
    clock.now = 110.2
    assert meter.rates() == (3.0, 3.0 * 1024)
    clock.now = 113.99
    assert meter.rates() == (3.0, 3.0 * 1024)
    clock.now = 114.0
    assert meter.rates() == (0.0, 0.0)


def test_a_busy_meter_keeps_at_most_one_bucket_per_second_of_its_window() -> None:
    clock = Clock(0.0)
    meter = RateMeter(3, clock)
    for tick in range(100):
        clock.now = tick / 4
        meter.record(2, 10)
    assert len(meter._buckets) <= 3
    assert meter.rates() == (3 * 4 * 2 / 3, 3 * 4 * 10 / 3)  # seconds 22..24, 4 records each


@pytest.mark.parametrize("window_s", [0, 1.5, True, limits.stats_rate_buckets_max + 1])
def test_window_is_checked(window_s) -> None:
    with pytest.raises(ValueError):
        RateMeter(window_s)


def test_totals_count_everything_recorded_however_old() -> None:
    clock = Clock(100.0)
    meter = RateMeter(2, clock)
    meter.record(3, 30)
    clock.now = 200.0
    meter.record(1, 10)
    assert meter.rates() == (0.5, 5.0)
    assert (meter.messages_total, meter.bytes_total) == (4, 40)
