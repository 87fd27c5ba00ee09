"""The one retry policy of georep's long-lived loops: a replicator's local and remote
sides, a topic's subscription sync, a namespace's side channel and change watch, the
Pulsar metrics scan.

**The policy.** Exponential from an initial delay, doubling to a maximum, each wait drawn
from the upper part of its delay (``jitter_fraction`` of it random) so that thousands of
loops failing together do not retry together. With initial 1 s, maximum 30 s and jitter
0.5, the n-th wait after a failure is drawn from:

    n:      1          2        3        4        5         6 ...
    delay:  1 s        2 s      4 s      8 s      16 s      30 s (capped)
    wait:   [0.5, 1]   [1, 2]   [2, 4]   [4, 8]   [8, 16]   [15, 30]

An error that says trying again soon cannot help (:class:`Retriable` with ``retriable``
False: an authentication refused, an entry the remote never accepts) waits the maximum
at once. The limits (initial, maximum, jitter) are ``georep/limits.py``'s.

**Two shapes, one policy.** A call retried until it succeeds (a replicator subscribing,
opening its producer) is driven by tenacity (:meth:`RetryPolicy.retrying`), whose waits
are this policy's. A long-lived loop (attach, serve for hours, fail, attach again) holds a
:class:`Backoff`: it counts failures since the last attach that worked, and a good attach
resets it, so a sync that served an hour waits the initial delay after its next failure.
Tenacity's ``AsyncRetrying`` counts the attempts of one call until it returns and has no
such reset: a loop that never returns would wait ever longer after each later failure.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_never

from georep import limits


@runtime_checkable
class Retriable(Protocol):
    """An operating error that says whether trying again later may succeed
    (``client.errors.LinkError`` and its kinds, ``replicator.errors.ReplicationStalled``)."""

    @property
    def retriable(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    initial_s: float
    max_s: float
    #: The random part of each wait: 0.5 draws it from the upper half of its delay.
    jitter_fraction: float = limits.retry_jitter_fraction

    def __post_init__(self) -> None:
        if not 0 < self.initial_s <= self.max_s:
            raise ValueError(f"retry delays must be 0 < initial <= max: {self}")
        if not 0 <= self.jitter_fraction <= 1:
            raise ValueError(f"retry jitter must be within [0, 1]: {self}")

    def delay_s(self, failures: int, error: Retriable | None = None) -> float:
        """The wait after the ``failures``-th failure in a row (1: the first)."""
        if error is not None and not error.retriable:
            return self.max_s
        delay_s = min(self.max_s, self.initial_s * 2.0 ** min(max(failures - 1, 0), 62))
        return delay_s * (1 - self.jitter_fraction * random.random())

    def retrying(
        self,
        retry_on: tuple[type[Exception], ...],
        *,
        before_sleep: Callable[[BaseException | None], None] | None = None,
    ) -> AsyncRetrying:
        """Tenacity, retrying a call that raises one of ``retry_on`` until it returns (never
        giving up), with this policy's waits; ``before_sleep`` is told each failure."""

        def wait(state: RetryCallState) -> float:
            error = state.outcome.exception() if state.outcome else None
            said = error if isinstance(error, Retriable) else None
            return self.delay_s(state.attempt_number, said)

        def told(state: RetryCallState) -> None:
            if before_sleep is not None:
                before_sleep(state.outcome.exception() if state.outcome else None)

        return AsyncRetrying(
            retry=retry_if_exception_type(retry_on),
            wait=wait,
            stop=stop_never,
            before_sleep=told,
            reraise=True,
        )


def sync_policy() -> RetryPolicy:
    """Subscription sync's loops (read when a loop starts, so tests may shorten them)."""
    return RetryPolicy(limits.sync_retry_s_initial, limits.sync_retry_s_max)


class Backoff:
    """The waits of one long-lived loop under ``policy``: :meth:`wait` after a failure,
    :meth:`reset` once the loop attached again."""

    def __init__(self, policy: RetryPolicy) -> None:
        self.policy = policy
        self.failures = 0

    def reset(self) -> None:
        """It worked: the next failure waits the initial delay again."""
        self.failures = 0

    def next_delay_s(self, error: Retriable | None = None) -> float:
        """Counts one failure; the wait it calls for."""
        self.failures += 1
        return self.policy.delay_s(self.failures, error)

    async def wait(self, error: Retriable | None = None) -> None:
        await asyncio.sleep(self.next_delay_s(error))
