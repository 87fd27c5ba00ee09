"""The Pulsar protocol server: asyncio glue between sockets and ``ServerConnection``.

One ``asyncio.Protocol`` per socket feeds bytes to its connection and tells it when the
socket's write buffer passes ``limits.connection_dispatch_buffer_bytes_max`` (dispatch to
that connection's consumers pauses until the client reads). One ticker task calls every
connection's ``tick`` each second (handshake deadline, keep-alive). Past
``limits.broker_connections_max`` connections a new socket is closed at once.

TLS: given an ``ssl.SSLContext`` the server speaks the protocol over TLS only, on its one
port (``pulsar+ssl://``), instead of plaintext. Pulsar can serve both on two ports
(``brokerServicePort`` beside ``brokerServicePortTls``); a georep broker has one
listener, so it is one or the other: an operator who turns TLS on has no plaintext port
left open by mistake, and a plaintext client fails the handshake rather than being
served. A connection counts (``limits.broker_connections_max``) once its handshake is
done; asyncio gives up a handshake after 60 s.

Stopping: stop accepting, close every connection ("broker stopping"), and wait for their
producers and consumers to be detached.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
import typing
from collections.abc import Callable

from georep import limits
from georep.broker.connection import ServerConnection
from georep.broker.service import BrokerService
from georep.runtime.awaiting import within

log = logging.getLogger(__name__)

_TICK_S = 1.0


class _PulsarProtocol(asyncio.Protocol):
    def __init__(self, server: BrokerServer) -> None:
        self._server = server
        self._connection: ServerConnection | None = None

    def connection_made(self, base_transport: asyncio.BaseTransport) -> None:
        # A stream server's protocol is always handed a read-write transport.
        transport = typing.cast(asyncio.Transport, base_transport)
        peername = transport.get_extra_info("peername")
        peer = f"{peername[0]}:{peername[1]}" if peername else "?"
        if len(self._server.connections) >= limits.broker_connections_max:
            log.warning("refusing %s: %d connections open", peer, len(self._server.connections))
            transport.close()
            return
        transport.set_write_buffer_limits(high=limits.connection_dispatch_buffer_bytes_max)
        self._connection = ServerConnection(
            self._server.service, transport, peer=peer, clock=self._server.clock
        )
        self._server.connections.add(self._connection)

    def data_received(self, data: bytes) -> None:
        if self._connection is not None:
            self._connection.data_received(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._connection is not None:
            self._connection.connection_lost(exc)
            self._server.forget(self._connection)

    def pause_writing(self) -> None:
        if self._connection is not None:
            self._connection.set_writable(False)

    def resume_writing(self) -> None:
        if self._connection is not None:
            self._connection.set_writable(True)


class BrokerServer:
    def __init__(
        self,
        service: BrokerService,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        clock: Callable[[], float] = time.monotonic,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.service = service
        #: The server context: None serves plaintext (``pulsar://``).
        self.tls = tls
        self.host = host
        self.port = port
        self.clock = clock
        self.connections: set[ServerConnection] = set()
        self._cleanups: set[asyncio.Task[None]] = set()
        self._server: asyncio.Server | None = None
        self._ticker: asyncio.Task[None] | None = None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _PulsarProtocol(self),
            self.host,
            self.port,
            reuse_address=True,
            ssl=self.tls,
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self._ticker = loop.create_task(self._tick())
        log.info("Pulsar protocol on %s", self.url)

    @property
    def url(self) -> str:
        """What a client connects to: ``pulsar+ssl://`` when the server speaks TLS."""
        scheme = "pulsar+ssl" if self.tls is not None else "pulsar"
        return f"{scheme}://{self.host}:{self.port}"

    def forget(self, connection: ServerConnection) -> None:
        self.connections.discard(connection)
        if connection.cleanup is not None and not connection.cleanup.done():
            self._cleanups.add(connection.cleanup)
            connection.cleanup.add_done_callback(self._cleanups.discard)

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(_TICK_S)
            now = self.clock()
            for connection in list(self.connections):
                connection.tick(now)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
        for connection in list(self.connections):
            connection.close("broker stopping")
            self.forget(connection)
        if self._cleanups:
            await asyncio.gather(*self._cleanups, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await within(self._server.wait_closed(), 5)
