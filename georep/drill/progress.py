"""A one-line progress bar on stderr (no dependency: georep has no progress library).

On a terminal the line is redrawn in place, at most ten times a second::

    full  consume on A  [##########..........]  150/300  4.2 s

A phase may add a detail after the count, redrawn with it: the drain on B counts the
messages B should deliver on the bar and, beside it, the other deliveries::

    full: drain on B  [####...]  304/304  600 delivered, 296 acked on A came again  0.4 s

Elsewhere (a pipe, a CI log) each phase prints one line when it starts and one when it
ends, so logs stay short. Thread-safe: consumer threads report progress directly.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

_WIDTH = 24
_REDRAW_S = 0.1


class Progress:
    def __init__(self, stream: TextIO | None = None, enabled: bool = True) -> None:
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.live = enabled and bool(getattr(self.stream, "isatty", lambda: False)())
        self._lock = threading.Lock()
        self._label = ""
        self._total: int | None = None
        self._done = 0
        self._detail = ""
        self._started = time.monotonic()
        self._drawn_at = 0.0
        self._drawn = False

    def phase(self, label: str, total: int | None = None) -> None:
        with self._lock:
            self._end_line()
            self._label, self._total, self._done, self._detail = label, total, 0, ""
            self._started = time.monotonic()
            if self.enabled and not self.live:
                self._write(f"{label} ...\n")
            self._draw(force=True)

    def update(self, done: int, detail: str = "") -> None:
        with self._lock:
            self._done = done
            self._detail = detail
            self._draw()

    def note(self, text: str) -> None:
        """A line of its own, kept above the bar."""
        with self._lock:
            self._end_line()
            if self.enabled:
                self._write(text + "\n")

    def close(self) -> None:
        with self._lock:
            self._end_line()

    def line(self) -> str:
        elapsed = time.monotonic() - self._started
        if self._total:
            filled = min(_WIDTH, _WIDTH * self._done // self._total)
            bar = "#" * filled + "." * (_WIDTH - filled)
            detail = f"  {self._detail}" if self._detail else ""
            return f"{self._label}  [{bar}]  {self._done}/{self._total}{detail}  {elapsed:.1f} s"
        return f"{self._label}  {elapsed:.1f} s"

    def _draw(self, force: bool = False) -> None:
        if not self.live:
            return
        now = time.monotonic()
        if not force and now - self._drawn_at < _REDRAW_S:
            return
        self._drawn_at = now
        self._write("\r\x1b[2K" + self.line())
        self._drawn = True

    def _end_line(self) -> None:
        if self._label and self.enabled and not self.live:
            self._write(f"{self.line()}\n")
        if self._drawn:
            self._write("\r\x1b[2K" + self.line() + "\n")
            self._drawn = False
        self._label = ""

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):
            self.enabled = self.live = False
