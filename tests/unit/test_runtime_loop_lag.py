"""How late the event loop runs what is due (runtime/loop_lag.py)."""

from __future__ import annotations

import asyncio
import logging
import time

from georep.runtime.loop_lag import LoopLag


def test_the_worst_within_the_window_and_stalls_said_once_per_interval(caplog) -> None:
    lag = LoopLag(window_s=10.0, stall_s=1.0, say_every_s=60.0, clock=lambda: 0.0)
    caplog.set_level(logging.WARNING, logger="georep.runtime.loop_lag")
    lag.note(0.002, now=5.0)
    assert lag.worst_s(now=5.0) == 0.002 and lag.stalls == 0
    lag.note(2.4, now=7.4)  # due at 5.0, ran at 7.4
    assert lag.worst_s(now=7.4) == 2.4 and lag.stalls == 1
    lag.note(1.5, now=9.0)
    lag.note(0.001, now=17.0)
    assert lag.worst_s(now=17.0) == 2.4  # 7.4 is still within the last 10 s
    lag.note(0.001, now=17.5)
    assert lag.worst_s(now=17.5) == 1.5  # it is not now
    assert lag.stalls == 2
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and said[0].startswith("the event loop ran 2.4 s late (1 times")
    lag.note(3.0, now=70.0)  # a minute after the first line: the two since, worst 3.0
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2 and said[1].startswith("the event loop ran 3.0 s late (2 times")


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
