"""How late the event loop runs what is due (runtime/loop_lag.py)."""

from __future__ import annotations

import asyncio
import logging
import time

from georep.runtime.loop_lag import LoopLag


def test_the_worst_within_the_window_and_stalls_said_once_per_interval(caplog) -> None:
    now = [0.0]
    lag = LoopLag(window_s=10.0, stall_s=1.0, say_every_s=60.0, clock=lambda: now[0])
    caplog.set_level(logging.WARNING, logger="georep.runtime.loop_lag")

    def note(late_s: float, at: float) -> None:
        now[0] = at
        lag.note(late_s)

    note(0.002, at=5.0)
    assert lag.worst_s() == 0.002 and lag.stalls == 0
    note(2.4, at=7.4)  # due at 5.0, ran at 7.4
    assert lag.worst_s() == 2.4 and lag.stalls == 1
    note(1.5, at=9.0)
    note(0.001, at=17.0)
    assert lag.worst_s() == 2.4  # 7.4 is still within the last 10 s
    note(0.001, at=17.5)
    assert lag.worst_s() == 1.5  # it is not now
    assert lag.stalls == 2
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and said[0].startswith("event loop: ran 2.4 s late")
    note(3.0, at=70.0)  # a minute after the first line: the one since, counted, then this
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 3
    assert said[1].startswith("1 more in 60 s") and said[2].startswith("event loop: ran 3.0 s")


async def test_a_held_loop_is_seen_late() -> None:
    lag = LoopLag(interval_s=0.01, stall_s=0.2, say_every_s=0.0)
    lag.start()
    try:
        await asyncio.sleep(0.05)
        # the loop held on purpose: the probe due meanwhile runs at least 0.4 s late
        time.sleep(0.5)  # noqa: ASYNC251
        for _ in range(100):
            if lag.stalls:
                break
            await asyncio.sleep(0.01)
        assert lag.stalls >= 1 and lag.worst_s() >= 0.4
    finally:
        await lag.stop()
