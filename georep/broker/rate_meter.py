"""Message and byte rates over a sliding window, for topic stats (``msgRateIn``, ...).

A :class:`RateMeter` is fed at the same place as the exact counters it shadows (a
producer's ``messages_in``/``bytes_in``, a consumer's ``messages_out``/``bytes_out``),
with the same increments, into one-second buckets keyed by the whole second of a
monotonic clock. Its rate is what the buckets of the last ``window_s`` seconds (the
current second included) hold, divided by ``window_s``: a count over the last N seconds,
not a decaying average, so it reads exactly 0.0 once a whole window has passed without
traffic.

Worked example, ``window_s`` = 10: 50 messages of 1 KiB recorded in second 100, 30 in
second 104. At 105.5 the window is seconds 96..105: 80 messages, so 8.0 msg/s and
8,192 B/s. At 110.2 it is 101..110: only the 30, 3.0 msg/s. From 114.0 on it is 0.0.
"""

from __future__ import annotations

import collections
import math
import time
from collections.abc import Callable

from georep import limits

Clock = Callable[[], float]


class RateMeter:
    __slots__ = ("_buckets", "_clock", "bytes_total", "messages_total", "window_s")

    def __init__(
        self, window_s: int = int(limits.stats_rate_window_s_default), clock: Clock = time.monotonic
    ) -> None:
        if not (
            isinstance(window_s, int)
            and not isinstance(window_s, bool)
            and 1 <= window_s <= limits.stats_rate_buckets_max
        ):
            raise ValueError(
                f"window_s must be an int in 1..{limits.stats_rate_buckets_max}, got {window_s!r}"
            )
        self.window_s = window_s
        self._clock = clock
        #: [second, messages, bytes], oldest first, seconds strictly increasing
        self._buckets: collections.deque[list[int]] = collections.deque()
        #: Everything recorded since the meter was made (Pulsar's ``*Counter`` stats).
        self.messages_total = 0
        self.bytes_total = 0

    def record(self, messages: int, size_bytes: int) -> None:
        self.messages_total += messages
        self.bytes_total += size_bytes
        second = math.floor(self._clock())
        buckets = self._buckets
        if buckets and buckets[-1][0] == second:
            bucket = buckets[-1]
            bucket[1] += messages
            bucket[2] += size_bytes
        else:
            buckets.append([second, messages, size_bytes])
            self._drop_before(second)

    def rates(self) -> tuple[float, float]:
        """(messages per second, bytes per second) over the window ending now."""
        self._drop_before(math.floor(self._clock()))
        messages = sum(bucket[1] for bucket in self._buckets)
        size_bytes = sum(bucket[2] for bucket in self._buckets)
        return messages / self.window_s, size_bytes / self.window_s

    def _drop_before(self, now_second: int) -> None:
        """Forget buckets that left the window ``now_second - window_s + 1 ..
        now_second``; at most ``window_s`` buckets remain."""
        first = now_second - self.window_s + 1
        buckets = self._buckets
        while buckets and buckets[0][0] < first:
            buckets.popleft()
