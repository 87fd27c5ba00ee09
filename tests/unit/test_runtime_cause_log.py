"""runtime/cause_log.py: once per cause, then one counted line per window."""

from __future__ import annotations

import asyncio
import logging

import pytest

from georep.runtime.cause_log import CauseLog


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records]


def test_ten_thousand_subjects_failing_alike_are_two_lines(caplog) -> None:
    clock = Clock()
    said = CauseLog(logging.getLogger("test.cause"), window_s=10.0, clock=clock)
    with caplog.at_level(logging.WARNING, "test.cause"):
        for n in range(10_000):
            said.say(
                logging.WARNING, ("retrying", "BookieError"), f"cursor {n}", "failed: %s", "gone"
            )
        assert messages(caplog) == ["cursor 0: failed: gone"]
        clock.now = 10.0
        said.say(logging.WARNING, ("retrying", "BookieError"), "cursor 0", "failed: %s", "again")
    assert messages(caplog) == [
        "cursor 0: failed: gone",
        "9999 more in 10 s, from 9999 (cursor 1, cursor 2, cursor 3 and 9996 more),"
        " like the first: failed: gone",
        "cursor 0: failed: again",  # a new window: said at once again
    ]


def test_causes_are_apart_and_a_window_takes_its_worst_level(caplog) -> None:
    clock = Clock()
    said = CauseLog(logging.getLogger("test.cause"), window_s=5.0, clock=clock)
    with caplog.at_level(logging.WARNING, "test.cause"):
        said.say(logging.WARNING, ("a",), "x", "first a")
        said.say(logging.WARNING, ("b",), "y", "first b")
        said.say(logging.ERROR, ("a",), "z", "second a")
        said.say(logging.WARNING, ("a",), "z", "third a")
        said.flush()
    assert messages(caplog) == [
        "x: first a",
        "y: first b",
        "2 more in 5 s, from 1 (z), like the first: first a",
    ]
    assert caplog.records[-1].levelno == logging.ERROR
    said.flush()  # nothing left to say
    assert len(caplog.records) == 3


async def test_a_window_is_summarised_when_it_ends_with_no_event_after_it(caplog) -> None:
    said = CauseLog(logging.getLogger("test.cause"), window_s=0.05)
    with caplog.at_level(logging.WARNING, "test.cause"):
        said.say(logging.WARNING, ("c",), "s1", "down")
        said.say(logging.WARNING, ("c",), "s2", "down")
        for _ in range(100):
            await asyncio.sleep(0.02)
            if len(caplog.records) == 2:
                break
    assert messages(caplog) == ["s1: down", "1 more in 0.05 s, from 1 (s2), like the first: down"]
