"""The one retry policy (georep/runtime/retry.py): its waits, its reset, tenacity driving a call."""

from __future__ import annotations

import pytest

from georep.client.errors import LinkError, MessageTooLarge
from georep.replicator.errors import ReplicationStalled
from georep.runtime.retry import Backoff, Retriable, RetryPolicy


@pytest.mark.parametrize(
    ("failures", "low_s", "high_s"),
    [
        (1, 0.5, 1.0),
        (2, 1.0, 2.0),
        (3, 2.0, 4.0),
        (5, 8.0, 16.0),
        (6, 15.0, 30.0),
        (60, 15.0, 30.0),
    ],
)
def test_waits_double_from_the_initial_delay_to_the_maximum(
    failures: int, low_s: float, high_s: float
) -> None:
    policy = RetryPolicy(1.0, 30.0, jitter_fraction=0.5)
    for _ in range(50):
        assert low_s <= policy.delay_s(failures) <= high_s


def test_an_error_that_cannot_be_retried_soon_waits_the_maximum() -> None:
    policy = RetryPolicy(1.0, 30.0, jitter_fraction=0.0)
    assert policy.delay_s(1, LinkError("down")) == 1.0
    assert policy.delay_s(1, MessageTooLarge("big")) == 30.0
    assert policy.delay_s(1, ReplicationStalled("id")) == 30.0
    assert isinstance(ReplicationStalled("id"), Retriable)


def test_a_loop_that_attached_again_starts_from_the_initial_delay() -> None:
    backoff = Backoff(RetryPolicy(1.0, 30.0, jitter_fraction=0.0))
    assert [backoff.next_delay_s() for _ in range(3)] == [1.0, 2.0, 4.0]
    backoff.reset()
    assert backoff.next_delay_s() == 1.0


def test_limits_are_checked() -> None:
    with pytest.raises(ValueError):
        RetryPolicy(2.0, 1.0)
    with pytest.raises(ValueError):
        RetryPolicy(1.0, 2.0, jitter_fraction=1.5)


async def test_tenacity_retries_a_call_until_it_succeeds() -> None:
    failures: list[BaseException | None] = []
    attempts = 0

    async def flaky() -> str:
        nonlocal attempts
        attempts += 1
        if attempts < 3:
            raise LinkError("not yet")
        return "open"

    retrying = RetryPolicy(0.001, 0.002).retrying((LinkError,), before_sleep=failures.append)
    assert await retrying(flaky) == "open"
    assert attempts == 3 and len(failures) == 2


async def test_tenacity_passes_other_errors_through() -> None:
    async def broken() -> None:
        raise KeyError("a bug")

    with pytest.raises(KeyError):
        await RetryPolicy(0.001, 0.002).retrying((LinkError,))(broken)
