"""A managed ledger's appends in flight (:class:`PendingAppendOp`), and the room they
take: its backpressure.

An append takes room (one of ``limits.managed_ledger_pending_appends_count_max``, and
its bytes of ``limits.managed_ledger_pending_appends_bytes_max``) before it is handed to
a ledger and gives it back once confirmed or failed. Room is granted first come first
served: a small append never overtakes a large one waiting, so positions follow call
order. One append always gets room when none is in flight, however large. Because this
admits fewer appends than a ledger handle would, the handle never makes an admitted
append wait.

Example, count max 2: appends a and b take the room; c waits; a is confirmed and gives
its room back, which goes to c, not to a d that arrives meanwhile (d waits behind c).
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable

from georep import limits
from georep.domain.position import Position
from georep.invariant import invariant


class PendingAppendOp:
    """One admitted append: its bytes, and the future its caller holds."""

    __slots__ = ("data", "future")

    def __init__(self, data: bytes, future: asyncio.Future[Position]) -> None:
        self.data = data
        self.future = future


class AppendRoom:
    """Room for appends in flight; ``failure()`` is the log's error once it stops
    taking appends (those waiting get it)."""

    def __init__(self, failure: Callable[[], BaseException | None]) -> None:
        self._failure = failure
        self.pending_count = 0
        self.pending_bytes = 0
        self._waiters: collections.deque[tuple[int, asyncio.Future[None]]] = collections.deque()

    def _has_room(self, size: int) -> bool:
        return self.pending_count == 0 or (
            self.pending_count < limits.managed_ledger_pending_appends_count_max
            and self.pending_bytes + size <= limits.managed_ledger_pending_appends_bytes_max
        )

    async def reserve(self, size: int) -> None:
        """Take room for one append of ``size`` bytes, first come first served."""
        if not self._waiters and self._has_room(size):
            self.pending_count += 1
            self.pending_bytes += size
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((size, future))
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled() and future.exception() is None:
                self.release(size)  # room was granted, then we were cancelled
            raise

    def release(self, size: int) -> None:
        self.pending_count -= 1
        self.pending_bytes -= size
        invariant(self.pending_count >= 0 and self.pending_bytes >= 0, "room underflow")
        self.grant()

    def grant(self) -> None:
        """Hand freed room to those waiting, in order (the log's error, once it has one)."""
        waiters = self._waiters
        while waiters:
            size, future = waiters[0]
            if future.done():  # cancelled while waiting
                waiters.popleft()
                continue
            error = self._failure()
            if error is not None:
                waiters.popleft()
                future.set_exception(error)
                continue
            if not self._has_room(size):
                return
            waiters.popleft()
            self.pending_count += 1
            self.pending_bytes += size
            future.set_result(None)
