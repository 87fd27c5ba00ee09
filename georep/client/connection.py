"""One client connection of the gateway to a Pulsar broker, on asyncio.

The wire format is ``georep/wire`` (sans-I/O); this module adds the socket, the
handshake, request/response matching and keep-alive. Producers and consumers
(``producer.py``, ``consumer.py``) register here by id and get the frames
addressed to them; ``link.py`` on top does lookups and pools connections.

States and legal transitions (an illegal one is a bug and raises)::

    CONNECTING --CONNECTED--> READY
    CONNECTING --close------> CLOSED
    READY -------close------> CLOSED

TLS: a ``pulsar+ssl://`` URL runs the connection over TLS with the ``ssl.SSLContext``
given (``client/tls.py``: the cluster's CA, hostname verification, a client certificate),
the server's name checked against the URL's host; without a context such a URL is refused,
and a failed handshake is a :class:`ConnectFailed` naming the reason (an unknown CA, an
expired certificate, a name mismatch, a refused client certificate): never a fallback
to plaintext.

Handshake: CONNECT (with ``auth_method_name="token"`` and the token when one is
configured), then CONNECTED, whose ``max_message_size`` bounds what we send. An
AUTH_CHALLENGE is answered with the token again (Pulsar's token refresh).

Requests carry a request id unique on the connection; :meth:`request` waits for the
answer with that id, at most ``request_timeout_s``. ERROR answers raise
:class:`ServerError`; a late answer to a request that timed out is dropped. Frames
routed by producer or consumer id (SEND_RECEIPT, SEND_ERROR, MESSAGE, CLOSE_PRODUCER,
CLOSE_CONSUMER, ACTIVE_CONSUMER_CHANGE, REACHED_END_OF_TOPIC) go to the registered
handler. A command only a client may send, coming from the broker, closes the
connection: the peer is out of step.

Keep-alive: the broker's PING is answered with PONG; a connection that received nothing
for ``keepalive_s`` sends a PING, and one still silent another ``keepalive_s`` later is
closed. Closing fails every waiting request and tells every producer and consumer, with
the reason, so they fail their own waiters; nothing reconnects here (the replicator
decides when, with backoff).

Writes: frames written during one event-loop turn are joined and handed to the socket in
one write at the end of the turn (a replicator sends many small SENDs at once).
Backpressure: writers that may produce much (``LinkProducer.send``) call :meth:`drain`,
which waits while more than ``limits.link_write_buffer_bytes_max`` bytes are queued.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import itertools
import logging
import ssl
import time
from collections.abc import Callable
from typing import Any, Protocol

from georep import limits
from georep.client import tls
from georep.client.errors import ConnectFailed, LinkClosed, LinkError, RequestTimeout, ServerError
from georep.domain.decimal_text import parse_decimal
from georep.invariant import invariant, present
from georep.runtime.awaiting import within
from georep.wire import commands, frames
from georep.wire import pulsar_wire_pb2 as pb
from georep.wire.commands import REGISTRY, Sender, Type
from georep.wire.errors import PulsarProtocolError

log = logging.getLogger(__name__)

CLIENT_VERSION = "georep-gateway"
PROTOCOL_VERSION = pb.PROTOCOL_V20


class State(enum.Enum):
    CONNECTING = "connecting"
    READY = "ready"
    CLOSED = "closed"


TRANSITIONS: dict[State, frozenset[State]] = {
    State.CONNECTING: frozenset({State.READY, State.CLOSED}),
    State.READY: frozenset({State.CLOSED}),
    State.CLOSED: frozenset(),
}


class FrameHandler(Protocol):
    """A producer or consumer registered on a connection."""

    def on_frame(self, frame: frames.Frame) -> None: ...

    def on_connection_closed(self, reason: str) -> None: ...


# Plain ints: attribute lookups on the protobuf enum wrapper cost more than the compare.
_CONNECTED = int(Type.CONNECTED)
_PING = int(Type.PING)
_PONG = int(Type.PONG)
_AUTH_CHALLENGE = int(Type.AUTH_CHALLENGE)
_ERROR = int(Type.ERROR)
_CLOSE_PRODUCER = int(Type.CLOSE_PRODUCER)
_CLOSE_CONSUMER = int(Type.CLOSE_CONSUMER)
#: Commands routed to a producer, by the field holding its id.
_PRODUCER_FRAMES = {int(Type.SEND_RECEIPT): "producer_id", int(Type.SEND_ERROR): "producer_id"}
#: Commands routed to a consumer.
_CONSUMER_FRAMES = {
    int(Type.MESSAGE): "consumer_id",
    int(Type.ACTIVE_CONSUMER_CHANGE): "consumer_id",
    int(Type.REACHED_END_OF_TOPIC): "consumer_id",
}
#: Types the broker may send (anything else from it is out of step).
_FROM_BROKER = frozenset(t for t, spec in REGISTRY.items() if Sender.BROKER in spec.sender)


#: Service URL schemes: plaintext and TLS (Pulsar's own spelling).
PLAIN_SCHEME, TLS_SCHEME = "pulsar://", "pulsar+ssl://"


def split_url(url: str) -> tuple[str, int]:
    """(host, port) of ``pulsar://host:port`` or ``pulsar+ssl://host:port``; LinkError for
    anything else."""
    for scheme in (PLAIN_SCHEME, TLS_SCHEME):
        if url.startswith(scheme):
            break
    else:
        raise LinkError(
            f"unsupported service URL {url!r}: use pulsar://host:port or pulsar+ssl://host:port"
        )
    host, _, port_text = url.removeprefix(scheme).rstrip("/").rpartition(":")
    port = parse_decimal(port_text)
    if not host or port is None or port > 65_535:
        raise LinkError(f"service URL {url!r} lacks host:port")
    return host.strip("[]"), port


class LinkConnection:
    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
        request_timeout_s: float = limits.link_request_timeout_s_default,
        keepalive_s: float = limits.link_keepalive_interval_s_default,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.url = url
        self._token = token
        self._ssl_context = ssl_context
        self.request_timeout_s = request_timeout_s
        self.keepalive_s = keepalive_s
        self._clock = clock
        self.state = State.CONNECTING
        self.close_reason: str | None = None
        self.server_version = ""
        self.max_message_size = limits.pulsar_message_bytes_max
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._decoder = frames.FrameDecoder()
        self._request_ids = itertools.count(1)
        self._requests: dict[int, asyncio.Future[frames.Frame]] = {}
        self._producers: dict[int, FrameHandler] = {}
        self._consumers: dict[int, FrameHandler] = {}
        self._connected: asyncio.Future[frames.Frame] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._out: list[bytes] = []
        self._out_bytes = 0
        self._flush_scheduled = False
        self._last_received = clock()
        self._ping_sent_at: float | None = None
        self.closed = asyncio.Event()
        self.stats = {"frames_in": 0, "bytes_in": 0, "frames_out": 0, "bytes_out": 0}

    def __repr__(self) -> str:
        return f"LinkConnection({self.url} {self.state.value})"

    @property
    def is_closed(self) -> bool:
        return self.state is State.CLOSED

    # -- life cycle --

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        token: str | None = None,
        connect_timeout_s: float = limits.link_connect_timeout_s_default,
        **options: Any,
    ) -> LinkConnection:
        """Connect and finish the handshake within ``connect_timeout_s``."""
        connection = cls(url, token=token, **options)
        try:
            await within(connection._open(), connect_timeout_s)
        except TimeoutError:
            connection.close(f"no handshake within {connect_timeout_s} s")
            raise RequestTimeout(f"{url}: no handshake within {connect_timeout_s} s") from None
        except OSError as error:  # refused, unreachable, or a TLS handshake that failed
            reason = tls.describe(error)
            connection.close(f"connect failed: {reason}")
            raise ConnectFailed(
                f"{url}: cannot connect: {reason}", tls_failed=_is_tls(error)
            ) from None
        except LinkClosed:
            if connection._ssl_context is None or connection.server_version:
                raise
            # TLS 1.3 ends the handshake on the client's side before the server has checked
            # the client's certificate; a refusal then arrives as the first read's failure.
            raise ConnectFailed(
                f"{url}: cannot connect: TLS: the server closed the connection before the"
                f" Pulsar handshake ({connection.close_reason}): does it require a client"
                " certificate (tls_cert_file) or refuse this one?",
                tls_failed=True,
            ) from None
        except BaseException:
            connection.close("handshake failed")
            raise
        return connection

    async def _open(self) -> None:
        host, port = split_url(self.url)
        if tls.uses_tls(self.url):
            if self._ssl_context is None:
                raise ConnectFailed(f"{self.url}: a TLS URL needs the cluster's TLS settings")
            try:
                self._reader, self._writer = await asyncio.open_connection(
                    host, port, ssl=self._ssl_context, server_hostname=host
                )
            except (ConnectionResetError, asyncio.IncompleteReadError) as error:
                raise ConnectFailed(
                    f"{self.url}: cannot connect: TLS: the server closed the connection in the"
                    f" handshake ({tls.describe(error)}): does it serve TLS on this port?",
                    tls_failed=True,
                ) from None
        else:
            self._reader, self._writer = await asyncio.open_connection(host, port)
        loop = asyncio.get_running_loop()
        self._connected = loop.create_future()
        self._tasks.append(loop.create_task(self._read_loop(), name=f"link-read {self.url}"))
        connect = commands.build(
            Type.CONNECT, client_version=CLIENT_VERSION, protocol_version=PROTOCOL_VERSION
        )
        if self._token:
            connect.connect.auth_method_name = "token"
            connect.connect.auth_data = self._token.encode()
        self.send_command(connect)
        frame = await self._connected
        connected = frame.command.connected
        self.server_version = connected.server_version
        if connected.HasField("max_message_size") and connected.max_message_size > 0:
            self.max_message_size = min(connected.max_message_size, limits.pulsar_message_bytes_max)
        self._transition(State.READY)
        self._tasks.append(loop.create_task(self._keepalive_loop(), name=f"link-ping {self.url}"))

    def _transition(self, new: State) -> None:
        invariant(new in TRANSITIONS[self.state], f"{self}: illegal transition to {new.value}")
        self.state = new

    @property
    def is_ready(self) -> bool:
        return self.state is State.READY

    @property
    def frame_bytes_max(self) -> int:
        """Largest frame the broker takes: its message size plus the codec's padding."""
        return self.max_message_size + limits.pulsar_frame_padding_bytes

    def close(self, reason: str) -> None:
        """Close with a named reason; waiters and registered handlers are told."""
        if self.state is State.CLOSED:
            return
        self._transition(State.CLOSED)
        self.close_reason = reason
        log.info("link %s closed: %s", self.url, reason)
        self._out.clear()
        self._out_bytes = 0
        if self._writer is not None:
            self._writer.close()
        current = asyncio.current_task()
        for task in self._tasks:
            if task is not current:
                task.cancel()
        error = LinkClosed(f"{self.url}: {reason}")
        if self._connected is not None and not self._connected.done():
            self._connected.set_exception(error)
        requests, self._requests = self._requests, {}
        for future in requests.values():
            if not future.done():
                future.set_exception(error)
        handlers = [*self._producers.values(), *self._consumers.values()]
        self._producers.clear()
        self._consumers.clear()
        for handler in handlers:
            handler.on_connection_closed(reason)
        self.closed.set()

    async def aclose(self, reason: str = "closed by the gateway") -> None:
        self.close(reason)
        if self._writer is not None:
            with contextlib.suppress(Exception):
                await self._writer.wait_closed()
        for task in self._tasks:
            with contextlib.suppress(BaseException):
                await task

    # -- registration --

    def register_producer(self, producer_id: int, handler: FrameHandler) -> None:
        self._check_ready()
        self._producers[producer_id] = handler

    def unregister_producer(self, producer_id: int) -> None:
        self._producers.pop(producer_id, None)

    def register_consumer(self, consumer_id: int, handler: FrameHandler) -> None:
        self._check_ready()
        self._consumers[consumer_id] = handler

    def unregister_consumer(self, consumer_id: int) -> None:
        self._consumers.pop(consumer_id, None)

    def _check_ready(self) -> None:
        if self.state is not State.READY:
            raise LinkClosed(f"{self.url}: {self.close_reason or 'not connected'}")

    # -- bytes out --

    def write(self, data: bytes) -> None:
        self._check_ready()
        self._queue_out(data)

    def send_command(self, command: pb.BaseCommand) -> None:
        if self.state is State.CLOSED:
            raise LinkClosed(f"{self.url}: {self.close_reason}")
        self._queue_out(frames.encode_command(command))

    def abandon(self, command: pb.BaseCommand) -> None:
        """Send ``command`` and ignore its answer (closing what a failed request may have
        opened); nothing when the connection is closed (the broker dropped it all)."""
        if self.state is not State.CLOSED:
            self._queue_out(frames.encode_command(command))

    def _queue_out(self, data: bytes) -> None:
        """Frames written in one event-loop turn go to the socket in one write."""
        self._out.append(data)
        self._out_bytes += len(data)
        self.stats["frames_out"] += 1
        self.stats["bytes_out"] += len(data)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if not self._out or self.state is State.CLOSED:
            return
        data = self._out[0] if len(self._out) == 1 else b"".join(self._out)
        self._out.clear()
        self._out_bytes = 0
        present(self._writer, "a flush before the connection opened").write(data)

    @property
    def write_buffer_bytes(self) -> int:
        if self._writer is None or self._writer.transport.is_closing():
            return self._out_bytes
        return self._out_bytes + self._writer.transport.get_write_buffer_size()

    async def drain(self) -> None:
        """Wait while the socket has more than ``link_write_buffer_bytes_max`` queued."""
        if self.write_buffer_bytes > limits.link_write_buffer_bytes_max:
            self._flush()
            try:
                await present(self._writer, "a drain before the connection opened").drain()
            except (ConnectionError, RuntimeError) as error:
                self.close(f"write failed: {error}")
                raise LinkClosed(f"{self.url}: write failed: {error}") from None
        self._check_ready()

    # -- requests --

    def next_request_id(self) -> int:
        return next(self._request_ids)

    async def request(self, command: pb.BaseCommand, request_id: int) -> frames.Frame:
        """Send ``command`` (already carrying ``request_id``) and wait for its answer."""
        self._check_ready()
        invariant(request_id not in self._requests, f"request id {request_id} reused")
        future = asyncio.get_running_loop().create_future()
        self._requests[request_id] = future
        try:
            self.send_command(command)
            return await within(asyncio.shield(future), self.request_timeout_s)
        except TimeoutError:
            name = Type.Name(command.type)
            raise RequestTimeout(
                f"{self.url}: no answer to {name} within {self.request_timeout_s} s"
            ) from None
        finally:
            self._requests.pop(request_id, None)
            if not future.done():
                future.cancel()

    # -- bytes in --

    async def _read_loop(self) -> None:
        reader = present(self._reader, "reading before the connection opened")
        try:
            while not self.is_closed:
                data = await reader.read(limits.link_read_chunk_bytes)
                if not data:
                    self.close("the broker closed the connection")
                    return
                self._last_received = self._clock()
                self._ping_sent_at = None
                self.stats["bytes_in"] += len(data)
                self._decoder.feed(data)
                while not self.is_closed:
                    frame = self._decoder.next_frame()
                    if frame is None:
                        break
                    self.stats["frames_in"] += 1
                    self._dispatch(frame)
        except asyncio.CancelledError:
            raise
        except PulsarProtocolError as error:
            self.close(f"{type(error).__name__}: {error}")
        except (ConnectionError, OSError) as error:
            self.close(f"connection lost: {error}")
        except Exception as error:  # a handler bug must not leave the connection half-open
            log.exception("link %s: dispatch failed", self.url)
            self.close(f"{type(error).__name__}: {error}")

    def _dispatch(self, frame: frames.Frame) -> None:
        command = frame.command
        kind = command.type
        if kind in _PRODUCER_FRAMES:  # the hot paths first
            handler = self._producers.get(getattr(frame.body, _PRODUCER_FRAMES[kind]))
            if handler is not None:
                handler.on_frame(frame)
            return
        if kind in _CONSUMER_FRAMES:
            handler = self._consumers.get(getattr(frame.body, _CONSUMER_FRAMES[kind]))
            if handler is not None:
                handler.on_frame(frame)
            return
        if kind not in _FROM_BROKER:
            name = REGISTRY[kind].name
            self.close(f"the broker sent {name}, a client-to-broker command")
            return
        if kind == _CONNECTED:
            if self._connected is not None and not self._connected.done():
                self._connected.set_result(frame)
            return
        if kind == _PING:
            self.send_command(commands.pong())
            return
        if kind == _PONG:
            return
        if kind == _AUTH_CHALLENGE:
            response = commands.build(
                Type.AUTH_RESPONSE,
                client_version=CLIENT_VERSION,
                protocol_version=PROTOCOL_VERSION,
                response=pb.AuthData(
                    auth_method_name="token", auth_data=(self._token or "").encode()
                ),
            )
            self.send_command(response)
            return
        if kind == _CLOSE_PRODUCER:
            handler = self._producers.pop(command.close_producer.producer_id, None)
            if handler is not None:
                handler.on_frame(frame)
            return
        if kind == _CLOSE_CONSUMER:
            handler = self._consumers.pop(command.close_consumer.consumer_id, None)
            if handler is not None:
                handler.on_frame(frame)
            return
        if kind == _ERROR and self._connected is not None and not self._connected.done():
            error = command.error
            self._connected.set_exception(ServerError(error.message, error.error))
            return
        request_id = commands.request_id_of(command)
        future = self._requests.get(request_id) if request_id is not None else None
        if future is None or future.done():
            log.debug("link %s: dropping unmatched %s", self.url, REGISTRY[kind].name)
            return
        if kind == _ERROR:
            future.set_exception(
                ServerError(f"{self.url}: {command.error.message}", command.error.error)
            )
        else:
            future.set_result(frame)

    # -- keep-alive --

    async def _keepalive_loop(self) -> None:
        interval = self.keepalive_s
        while self.state is State.READY:
            await asyncio.sleep(interval / 2)
            now = self._clock()
            if self._ping_sent_at is not None:
                if now - self._ping_sent_at > interval:
                    self.close(f"keep-alive: no answer to PING within {interval} s")
                    return
            elif now - self._last_received > interval:
                self._ping_sent_at = now
                with contextlib.suppress(LinkClosed):
                    self.send_command(commands.ping())


def _is_tls(error: BaseException) -> bool:
    """Whether a failed connect failed in the TLS handshake (retrying soon cannot help)."""
    return isinstance(error, ssl.SSLError)
