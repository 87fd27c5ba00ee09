"""Waiting with a time limit, where a task waits, and the discovery pass that says so
when it runs too long."""

import asyncio
import logging
from typing import cast

import pytest

from georep import limits
from georep.runtime.awaiting import awaiting, stopped_within, within


async def _inner(event: asyncio.Event) -> None:
    await event.wait()


async def _outer(event: asyncio.Event) -> None:
    await _inner(event)


async def test_the_chain_of_coroutines_a_task_waits_in_is_named_outermost_first():
    event = asyncio.Event()
    task = asyncio.create_task(_outer(event))
    await asyncio.sleep(0)
    text = awaiting(task)
    event.set()
    await task
    names = [part.rsplit(" in ", 1)[-1] for part in text.split(" <- ")]
    assert names[:3] == ["_outer", "_inner", "wait"], text


async def test_a_discovery_pass_that_hangs_is_said_with_where_it_waits(monkeypatch, caplog):
    from georep.gateway.manager import ReplicationManager

    release = asyncio.Event()

    class Hanging:
        async def discover(self) -> None:
            await _outer(release)

    monkeypatch.setattr(limits, "gateway_discovery_pass_slow_s", 0.05)
    caplog.set_level(logging.WARNING, logger="georep.gateway.manager")
    running = asyncio.create_task(
        ReplicationManager._watched_pass(cast(ReplicationManager, Hanging()))
    )
    await asyncio.sleep(0.2)
    release.set()
    await running
    said = [r.getMessage() for r in caplog.records if "still running" in r.getMessage()]
    assert said and "_outer" in said[0] and "_inner" in said[0], said


async def test_a_cancellation_that_arrives_with_the_result_is_kept():
    """asyncio.wait_for of Python 3.11 returns the result instead (gh-86296)."""
    event = asyncio.Event()
    woken: list[bool] = []

    async def waiter() -> None:
        woken.append(await within(event.wait(), 10))
        await asyncio.sleep(3600)  # ran on: the cancellation was lost

    task = asyncio.create_task(waiter())
    await asyncio.sleep(0)
    event.set()  # the awaited finishes in the turn the task is cancelled in
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await within(task, 5)
    assert woken == []


async def test_a_time_limit_raises_timeout_error_and_none_is_no_limit():
    with pytest.raises(TimeoutError):
        await within(asyncio.Event().wait(), 0.01)
    assert await within(asyncio.sleep(0, "done"), None) == "done"


async def test_a_task_that_does_not_end_when_cancelled_is_said_with_where_it_waits(caplog):
    release = asyncio.Event()

    async def stubborn() -> None:
        while not release.is_set():
            try:
                await _outer(release)
            except asyncio.CancelledError:
                continue  # a bug: it swallows its cancellation

    task = asyncio.create_task(stubborn())
    await asyncio.sleep(0)

    async def stop() -> None:
        task.cancel()
        await asyncio.shield(task)

    caplog.set_level(logging.ERROR, logger="georep.runtime.awaiting")
    assert not await stopped_within(stop(), task, "Stubborn(x)", 0.05)
    (line,) = [r.getMessage() for r in caplog.records]
    assert line.startswith("Stubborn(x): did not stop within 0.05 s; it waits in:"), line
    assert "_outer" in line and "_inner" in line, line
    release.set()
    await task
    done = asyncio.create_task(asyncio.sleep(0))
    assert await stopped_within(done, done, "Quick", 1)
