"""Token buckets of a replicator's rate limits, on a manual clock (no waiting)."""

from __future__ import annotations

import pytest

from georep.replicator.rate_limiter import RateLimiter, TokenBucket


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("takes", "waits"),
    [
        ([1000], [0.0]),  # a full bucket
        ([1000, 500], [0.0, 0.5]),  # the docstring's example
        ([2500], [1.5]),  # larger than the burst: passes, pays later
        ([200, 200, 200], [0.0, 0.0, 0.0]),
    ],
)
def test_bucket_waits(takes, waits) -> None:
    bucket = TokenBucket(1000, clock=Clock())
    assert [bucket.take(t) for t in takes] == pytest.approx(waits)


def test_bucket_refills_up_to_its_burst() -> None:
    clock = Clock()
    bucket = TokenBucket(100, burst=50, clock=clock)
    assert bucket.take(50) == 0
    clock.now += 10
    assert bucket.tokens == pytest.approx(50)


async def test_limiter_waits_for_the_slower_limit() -> None:
    clock = Clock()
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock.now += seconds

    limiter = RateLimiter(messages_per_s=1000, bytes_per_s=10_000, clock=clock, sleep=sleep)
    await limiter.acquire(10, 10_000)  # full buckets
    await limiter.acquire(10, 5_000)  # bytes: 0.5 s of debt; messages: none
    assert slept == pytest.approx([0.5])
    assert RateLimiter().unlimited
