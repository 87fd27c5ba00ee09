"""The one way a test waits for something another process does: poll a condition."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_for(condition: Callable[[], Any], timeout_s: float = 60, interval_s: float = 0.1) -> Any:
    """Poll ``condition`` until it returns something truthy; return that. Raises
    :class:`TimeoutError` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"condition not met within {timeout_s} s")
        time.sleep(interval_s)
