"""Where a task waits: the chain of coroutines it is suspended in, for a log line.

``Task.get_stack()`` gives only the outermost frame of a suspended task; following each
coroutine's ``cr_await`` down gives every frame to the awaitable it waits for.
"""

from __future__ import annotations

import asyncio
from typing import Any


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
