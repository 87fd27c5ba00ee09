"""Waiting with a time limit, and where a task waits.

:func:`within` is the project's ``asyncio.wait_for``. Python 3.11's ``wait_for`` loses a
cancellation that arrives in the same event-loop turn as the awaited result (CPython
gh-86296, fixed in 3.12): it returns the result and the cancelled task runs on. A
replicator cancelling its reader, sender and sampler after a topic moved then waited
for ever on a sampler that had been woken by the entry read just before: the topic
stopped replicating, connected to nothing and saying nothing. ``asyncio.timeout`` counts
cancellations and keeps the caller's; ``asyncio.wait_for`` is refused by the linter
(ruff TID251, pyproject.toml).

:func:`awaiting`: ``Task.get_stack()`` gives only the outermost frame of a suspended
task; following each coroutine's ``cr_await`` down gives every frame to the awaitable it
waits for.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import Any, TypeVar

log = logging.getLogger(__name__)
_T = TypeVar("_T")


async def within(awaitable: Awaitable[_T], timeout_s: float | None) -> _T:
    """``awaitable``'s result, or TimeoutError once ``timeout_s`` passed (None: no
    limit); a cancellation of the caller is never lost, whatever the awaitable did."""
    async with asyncio.timeout(timeout_s):
        return await awaitable


async def stopped_within(
    stopping: Awaitable[None], task: asyncio.Task[Any] | None, owner: object, timeout_s: float
) -> bool:
    """Await ``stopping`` (which cancels ``task`` and waits for it) at most ``timeout_s``;
    False when it did not end: a task that does not end when cancelled is a bug, said at
    ERROR with where it waits."""
    try:
        await within(stopping, timeout_s)
    except TimeoutError:
        where = awaiting(task) if task is not None else "nothing"
        log.error("%s: did not stop within %g s; it waits in: %s", owner, timeout_s, where)
        return False
    return True


def awaiting(task: asyncio.Task[Any], limit: int = 20) -> str:
    """``file:line in function`` for each coroutine ``task`` waits in, outermost first,
    then what the innermost awaits.

    >>> async def inner(event): await event.wait()
    >>> async def outer(event): await inner(event)
    >>> async def main():
    ...     event = asyncio.Event()
    ...     task = asyncio.create_task(outer(event))
    ...     await asyncio.sleep(0)
    ...     text = awaiting(task)
    ...     task.cancel()
    ...     return text
    >>> print(asyncio.run(main()))  # doctest: +ELLIPSIS
    <doctest ...>:1 in outer <- <doctest ...>:1 in inner <- ...locks.py:... in wait <- FutureIter
    """
    parts: list[str] = []
    waited: Any = task.get_coro()
    while waited is not None and len(parts) < limit:
        frame = getattr(waited, "cr_frame", None) or getattr(waited, "gi_frame", None)
        if frame is None:
            parts.append(type(waited).__name__)
            break
        parts.append(f"{frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}")
        waited = getattr(waited, "cr_await", None) or getattr(waited, "gi_yieldfrom", None)
    return " <- ".join(parts)
