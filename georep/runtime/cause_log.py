"""Log lines said once per cause, with a count: for events that many subjects meet at
once (every cursor of a store whose bookies are gone, every topic of a namespace).

The first event of a cause is said at once, naming its subject. Further events of that
cause within ``window_s`` are counted, and when the window ends one line says how many
there were, among how many subjects, with a few of them as examples. A cause is what
the events share (a kind of failure and the error's type), never a subject: 10,000
cursors failing the same way are one cause and two lines, not 10,000.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from georep import limits

#: Subjects named as examples in a summary line.
EXAMPLES_MAX = 3


@dataclass
class _Window:
    opened_at: float
    level: int
    message: str
    events: int = 0
    subjects: set[str] = field(default_factory=set)
    examples: list[str] = field(default_factory=list)


class CauseLog:
    """Says ``logger`` lines once per cause and window (see the module docstring)."""

    def __init__(
        self,
        logger: logging.Logger,
        window_s: float = limits.log_cause_window_s,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger = logger
        self._window_s = window_s
        self._clock = clock
        self._open: dict[tuple[str, ...], _Window] = {}

    def say(
        self, level: int, cause: tuple[str, ...], subject: str, message: str, *args: object
    ) -> None:
        """``message % args``, about ``subject``, said now if ``cause`` was not said in the
        last window, else counted into the window's summary."""
        now = self._clock()
        window = self._open.get(cause)
        if window is not None and now - window.opened_at >= self._window_s:
            self._close(cause)
            window = None
        if window is None:
            text = message % args if args else message
            self._open[cause] = _Window(now, level, text)
            self._logger.log(level, "%s: %s", subject, text)
            self._close_later(cause)
            return
        window.events += 1
        window.level = max(window.level, level)
        if subject not in window.subjects:
            window.subjects.add(subject)
            if len(window.examples) < EXAMPLES_MAX:
                window.examples.append(subject)

    def flush(self) -> None:
        """Say every open window's summary now (at shutdown; tests)."""
        for cause in list(self._open):
            self._close(cause)

    def _close_later(self, cause: tuple[str, ...]) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop: summarised by the next event after the window
            return
        loop.call_later(self._window_s, self._close_if_due, cause)

    def _close_if_due(self, cause: tuple[str, ...]) -> None:
        window = self._open.get(cause)
        if window is not None and self._clock() - window.opened_at >= self._window_s:
            self._close(cause)

    def _close(self, cause: tuple[str, ...]) -> None:
        window = self._open.pop(cause)
        if window.events == 0:
            return
        more = len(window.subjects) - len(window.examples)
        examples = ", ".join(window.examples) + (f" and {more} more" if more > 0 else "")
        self._logger.log(
            window.level,
            "%d more in %g s, from %d (%s), like the first: %s",
            window.events,
            self._window_s,
            len(window.subjects),
            examples,
            window.message,
        )
