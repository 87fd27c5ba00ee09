"""Rate limits of one replicator: messages per second and bytes per second.

Each limit is a token bucket that fills at ``rate`` tokens a second up to ``burst``
tokens (one second's worth unless told). Taking ``n`` tokens always succeeds and may
leave the bucket in debt; the taker then waits until the debt is paid back. So an entry
larger than the burst (a big batch) still passes, and the long-run rate holds. Worked
example, 1,000 msg/s with a burst of 1,000: a full bucket lets a batch of 1,000 through
at once; the next batch of 500 finds 0 tokens, goes to -500 and waits 0.5 s.

A rate of None (or 0) means unlimited. The clock and the sleep are injectable, so tests
run without waiting.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from georep.invariant import invariant


class TokenBucket:
    def __init__(
        self,
        rate_per_s: float,
        *,
        burst: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        invariant(rate_per_s > 0, "a token bucket needs a positive rate")
        self.rate_per_s = float(rate_per_s)
        self.burst = float(burst if burst is not None else rate_per_s)
        invariant(self.burst > 0, "a token bucket needs a positive burst")
        self._clock = clock
        self._tokens = self.burst
        self._at = clock()

    @property
    def tokens(self) -> float:
        self._refill()
        return self._tokens

    def take(self, amount: float) -> float:
        """Take ``amount`` tokens; the seconds to wait before going on (0: none)."""
        self._refill()
        self._tokens -= amount
        return 0.0 if self._tokens >= 0 else -self._tokens / self.rate_per_s

    def _refill(self) -> None:
        now = self._clock()
        elapsed = max(0.0, now - self._at)
        self._at = now
        self._tokens = min(self.burst, self._tokens + elapsed * self.rate_per_s)


class RateLimiter:
    """Both limits of one replicator; :meth:`acquire` waits for the slower of the two."""

    def __init__(
        self,
        messages_per_s: float | None = None,
        bytes_per_s: float | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        self.messages = TokenBucket(messages_per_s, clock=clock) if messages_per_s else None
        self.bytes = TokenBucket(bytes_per_s, clock=clock) if bytes_per_s else None
        self._sleep = sleep
        self.waited_s = 0.0

    @property
    def unlimited(self) -> bool:
        return self.messages is None and self.bytes is None

    async def acquire(self, messages: int, size_bytes: int) -> None:
        wait = 0.0
        if self.messages is not None:
            wait = max(wait, self.messages.take(messages))
        if self.bytes is not None:
            wait = max(wait, self.bytes.take(size_bytes))
        if wait > 0:
            self.waited_s += wait
            await self._sleep(wait)
