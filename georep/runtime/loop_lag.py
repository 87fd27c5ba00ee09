"""How late the event loop runs what is due.

One loop runs every replicator, sync, heartbeat and REST answer of a gateway: work that
holds it (a pass over 10,000 partitions, a long answer, a collection of a large heap)
delays all of them at once, and a heartbeat held past its lease reads as a dead store.
:class:`LoopLag` asks to wake every ``limits.loop_lag_probe_interval_s`` and measures how
much later it woke:

- ``worst_s()``: the worst lateness within the last ``limits.loop_lag_window_s``
  (``georep_gateway_event_loop_lag_seconds``);
- ``stalls``: wake-ups later than ``limits.loop_lag_stall_s``
  (``georep_gateway_event_loop_stalls_total``), said at WARNING through a
  :class:`~georep.runtime.cause_log.CauseLog` of ``limits.loop_lag_say_every_s``: the
  first at once, the others of that window in one line with their count.

Example: a wake-up due at t=5.0 that runs at t=7.4 is 2.4 s late: one stall, and
``worst_s()`` is 2.4 until t=17.4.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import Callable

from georep import limits
from georep.runtime.cause_log import CauseLog

log = logging.getLogger(__name__)


class LoopLag:
    def __init__(
        self,
        *,
        interval_s: float = limits.loop_lag_probe_interval_s,
        window_s: float = limits.loop_lag_window_s,
        stall_s: float = limits.loop_lag_stall_s,
        say_every_s: float = limits.loop_lag_say_every_s,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.interval_s = interval_s
        self.window_s = window_s
        self.stall_s = stall_s
        self._clock = clock
        self._said = CauseLog(log, window_s=say_every_s, clock=clock)
        #: (when, lateness) of the wake-ups within the window, oldest first
        self._recent: collections.deque[tuple[float, float]] = collections.deque()
        self.stalls = 0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="loop lag")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        while True:
            due = self._clock() + self.interval_s
            await asyncio.sleep(self.interval_s)
            self.note(max(0.0, self._clock() - due))

    def note(self, late_s: float) -> None:
        """One wake-up, ``late_s`` after it was due."""
        now = self._clock()
        self._recent.append((now, late_s))
        while self._recent and self._recent[0][0] < now - self.window_s:
            self._recent.popleft()
        if late_s < self.stall_s:
            return
        self.stalls += 1
        self._said.say(
            logging.WARNING,
            ("late",),
            "event loop",
            "ran %.1f s late: every timer, heartbeat and answer of this process waited that"
            " long (the worst of the last %g s: georep_gateway_event_loop_lag_seconds)",
            late_s,
            self.window_s,
        )

    def worst_s(self) -> float:
        """The worst lateness within the last window (0 when none was seen)."""
        since = self._clock() - self.window_s
        return max((late for when, late in self._recent if when >= since), default=0.0)
