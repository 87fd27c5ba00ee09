"""One pipelined connection per bookie.

Requests are written as soon as they are submitted (the transport coalesces them) and
matched to responses by request id. Every request has a deadline; a single sweeper
fails the expired ones with :class:`BookieUnavailable` instead of arming one timer per
request. A lost connection fails everything in flight; the next request reconnects.

The connection's states are a table; any other transition is a bug::

    IDLE --connect--> CONNECTING --made--> CONNECTED --lost/close--> IDLE
    CONNECTING --failed--> IDLE          any --close()--> CLOSED (final)
"""

from __future__ import annotations

import asyncio
import enum
import functools
import itertools
import logging
import time
import typing
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

from georep import limits
from georep.invariant import InvariantViolation, invariant, present
from georep.runtime.awaiting import within
from georep.storage import bookie_protocol
from georep.storage.errors import BookieUnavailable, ProtocolError

log = logging.getLogger(__name__)

#: Called once per request with its response or a BookieUnavailable.
Completion = Callable[[bookie_protocol.Response | BaseException], None]


class State(enum.Enum):
    IDLE = "idle"
    CONNECTING = "connecting"
    CONNECTED = "connected"
    CLOSED = "closed"


_TRANSITIONS = {
    (State.IDLE, State.CONNECTING),
    (State.CONNECTING, State.CONNECTED),
    (State.CONNECTING, State.IDLE),
    (State.CONNECTED, State.IDLE),
    (State.IDLE, State.CLOSED),
    (State.CONNECTING, State.CLOSED),
    (State.CONNECTED, State.CLOSED),
}


def split_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


class _Connection(asyncio.Protocol):
    def __init__(self, owner: BookieClient) -> None:
        self._owner = owner
        self._decoder = bookie_protocol.FrameDecoder(responses=True)
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream connection is always handed a read-write transport.
        self.transport = typing.cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        try:
            messages = self._decoder.feed(data)
        except ProtocolError as error:
            log.warning("bookie %s sent a bad frame, closing: %s", self._owner.address, error)
            self._owner._connection_lost(self, f"protocol error: {error}")
            if self.transport is not None:
                self.transport.abort()
            return
        for message in messages:
            self._owner._on_response(message)

    def connection_lost(self, exc: Exception | None) -> None:
        self._owner._connection_lost(self, f"connection lost: {exc or 'closed by peer'}")


class BookieClient:
    """Requests to one bookie address."""

    def __init__(
        self,
        address: str,
        *,
        timeout_ms: float = limits.bookie_request_timeout_ms_default,
        clock: Callable[[], float] = time.monotonic,
        ids: Iterator[int] | None = None,
    ) -> None:
        self.address = address
        self._timeout_s = timeout_ms / 1000
        self._clock = clock
        self._state = State.IDLE
        self._connection: _Connection | None = None
        self._connected: asyncio.Future[None] | None = None
        self._ids = ids if ids is not None else itertools.count(1)
        self._outgoing: list[bytes] = []
        # request id -> (deadline, completion); insertion order is deadline order.
        self._pending: dict[int, tuple[float, Completion]] = {}
        self._sweeper: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.requests_sent = 0
        self.failures = 0

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- state ----------------------------------------------------------------------
    def _move(self, new: State) -> None:
        invariant(
            (self._state, new) in _TRANSITIONS,
            f"bookie client {self.address}: illegal {self._state} -> {new}",
        )
        self._state = new

    @property
    def state(self) -> State:
        return self._state

    async def _ensure_connected(self) -> None:
        if self._state is State.CONNECTED:
            return
        if self._state is State.CLOSED:
            raise BookieUnavailable(f"client for bookie {self.address} is closed")
        if self._state is State.IDLE:
            self._move(State.CONNECTING)
            loop = asyncio.get_running_loop()
            self._connected = loop.create_future()
            self._spawn(self._connect())
        await asyncio.shield(present(self._connected, "connecting without a future"))

    async def _connect(self) -> None:
        future = self._connected
        host, port = split_address(self.address)
        loop = asyncio.get_running_loop()
        try:
            _, connection = await within(
                loop.create_connection(lambda: _Connection(self), host, port), self._timeout_s
            )
        except (OSError, TimeoutError) as error:
            if self._state is State.CONNECTING:
                self._move(State.IDLE)
            self.failures += 1
            if future is not None and not future.done():
                future.set_exception(
                    BookieUnavailable(f"cannot connect to bookie {self.address}: {error}")
                )
                future.exception()  # retrieved: waiters re-raise it
            return
        if self._state is not State.CONNECTING:  # closed while connecting
            present(connection.transport, "a connection made without a transport").abort()
            return
        self._connection = connection
        self._move(State.CONNECTED)
        if future is not None and not future.done():
            future.set_result(None)

    # --- requests --------------------------------------------------------------------
    def next_request_id(self) -> int:
        return next(self._ids)

    async def request(self, message: bookie_protocol.Request) -> bookie_protocol.Response:
        """Send one request and wait for its response (or BookieUnavailable)."""
        return await self.submit(message)

    def submit(self, message: bookie_protocol.Request) -> asyncio.Future[bookie_protocol.Response]:
        """Send one request; the future resolves with its response or
        :class:`BookieUnavailable`. Never raises itself."""
        if message.request_id == 0:
            message.request_id = self.next_request_id()
        return self.submit_frame(message.request_id, bookie_protocol.encode(message))

    def submit_frame(
        self, request_id: int, frame: bytes
    ) -> asyncio.Future[bookie_protocol.Response]:
        """Send an encoded request. The same frame may go to several bookies (an add to
        its write set) when ``request_id`` comes from the pool's shared counter."""
        future: asyncio.Future[bookie_protocol.Response] = (
            asyncio.get_running_loop().create_future()
        )
        self.send_frame(request_id, frame, functools.partial(_settle, future))
        return future

    def send_frame(self, request_id: int, frame: bytes, complete: Completion) -> None:
        """Send an encoded request; ``complete`` is called exactly once, with the response
        or a :class:`BookieUnavailable`, from the event loop (never from inside this call).
        The hot path of adds: no future per request."""
        if self._state is State.CONNECTED:
            self._write(request_id, frame, complete)
        else:
            self._spawn(self._connect_then_write(request_id, frame, complete))

    async def _connect_then_write(
        self, request_id: int, frame: bytes, complete: Completion
    ) -> None:
        try:
            await self._ensure_connected()
        except BookieUnavailable as error:
            complete(error)
            return
        self._write(request_id, frame, complete)

    def _write(self, request_id: int, frame: bytes, complete: Completion) -> None:
        if self._state is not State.CONNECTED or self._connection is None:
            error = BookieUnavailable(f"bookie {self.address} disconnected")
            asyncio.get_running_loop().call_soon(complete, error)
            return
        invariant(request_id not in self._pending, f"request id {request_id} reused")
        self._pending[request_id] = (self._clock() + self._timeout_s, complete)
        self.requests_sent += 1
        # Frames written in one turn of the event loop leave in one send(): at tens of
        # thousands of adds per second a syscall per frame is the client's main cost.
        self._outgoing.append(frame)
        if len(self._outgoing) == 1:
            asyncio.get_running_loop().call_soon(self._flush)
        if self._sweeper is None:
            self._arm_sweeper()

    def _flush(self) -> None:
        frames, self._outgoing = self._outgoing, []
        connection = self._connection
        if connection is None or connection.transport is None:
            return  # the connection was lost: its pending requests have already failed
        connection.transport.write(b"".join(frames))

    def _arm_sweeper(self) -> None:
        loop = asyncio.get_running_loop()
        self._sweeper = loop.call_later(max(self._timeout_s / 10, 0.01), self._sweep)

    def _sweep(self) -> None:
        self._sweeper = None
        now = self._clock()
        expired = []
        for request_id, (deadline, _) in self._pending.items():
            if deadline > now:
                break
            expired.append(request_id)
        for request_id in expired:
            _, complete = self._pending.pop(request_id)
            complete(
                BookieUnavailable(
                    f"bookie {self.address} did not answer request {request_id} within "
                    f"{self._timeout_s * 1000:.0f} ms"
                )
            )
        if expired:
            self.failures += 1
        if self._pending:
            self._arm_sweeper()

    def _on_response(self, message: bookie_protocol.Message) -> None:
        if not isinstance(message, bookie_protocol.Response):  # the decoder reads responses only
            raise InvariantViolation(f"bookie {self.address}: {message!r} is no response")
        entry = self._pending.pop(message.request_id, None)
        if entry is None:
            return  # answered after its deadline: already failed
        entry[1](message)

    def _connection_lost(self, connection: _Connection, reason: str) -> None:
        if connection is not self._connection:
            return
        self._connection = None
        self._outgoing = []  # their requests fail below; never send them on a new connection
        if self._state is State.CONNECTED:
            self._move(State.IDLE)
        self.failures += 1
        pending, self._pending = self._pending, {}
        for _, complete in pending.values():
            complete(BookieUnavailable(f"bookie {self.address}: {reason}"))

    async def close(self) -> None:
        if self._state is State.CLOSED:
            return
        connection = self._connection
        self._move(State.CLOSED)
        self._connection = None
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        if connection is not None and connection.transport is not None:
            connection.transport.close()
        pending, self._pending = self._pending, {}
        for _, complete in pending.values():
            complete(BookieUnavailable(f"client for bookie {self.address} closed"))


def _settle(
    future: asyncio.Future[bookie_protocol.Response],
    outcome: bookie_protocol.Response | BaseException,
) -> None:
    if future.done():
        return
    if isinstance(outcome, BaseException):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)


class BookieClientPool:
    """A client per bookie address, created on first use."""

    def __init__(self, *, timeout_ms: float = limits.bookie_request_timeout_ms_default) -> None:
        self._timeout_ms = timeout_ms
        self._clients: dict[str, BookieClient] = {}
        self._ids = itertools.count(1)  # shared, so one encoded add can go to Qw bookies

    def next_request_id(self) -> int:
        return next(self._ids)

    def get(self, address: str) -> BookieClient:
        client = self._clients.get(address)
        if client is None or client.state is State.CLOSED:
            client = BookieClient(address, timeout_ms=self._timeout_ms, ids=self._ids)
            self._clients[address] = client
        return client

    async def close(self) -> None:
        clients, self._clients = self._clients, {}
        for client in clients.values():
            await client.close()
