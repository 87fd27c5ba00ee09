"""The gateway's Pulsar client: asyncio-native, on georep's own wire codec.

Why not the official ``pulsar-client``: it runs its own threads and hides entries behind
messages. The gateway needs everything on one event loop and entries as stored — a batch
read from the local topic is forwarded as one entry, byte for byte, and marker entries must
reach the replicator later (docs/ARCHITECTURE.md, "Snapshots"). So the gateway talks to
clusters only over their public interfaces (this binary protocol and the admin REST) with
this small client.

Layers: ``wire/`` (codec, no I/O) → ``connection`` (socket, handshake,
requests, keep-alive) → ``producer`` / ``consumer`` → this module, which
looks topics up and keeps one connection per broker, shared by every producer and
consumer on it (as Pulsar's clients do)::

    link = PulsarLink("pulsar://127.0.0.1:6650", token=None)
    producer = await link.create_producer("persistent://t/ns/x", "georep.repl.A")
    receipt = await (await producer.send(metadata, payload))
    consumer = await link.subscribe("persistent://t/ns/x", "georep.repl.B")
    entry = await consumer.receive()
    await link.close()

Lookup: LOOKUP on the service URL's connection; CONNECT means "this broker" (or the
URL named), REDIRECT means ask the named broker, at most
``limits.link_lookup_redirects_max`` times. A link whose service URL is
``pulsar+ssl://`` follows the broker's TLS URL (``broker_service_url_tls``) and every
connection it opens runs TLS with the one context it was given; a broker that names no
TLS URL is an error, never a reason to connect in plaintext.

A connection that cannot be opened (refused, a failed TLS handshake) is logged here once
per cause, naming the cluster, however many producers and consumers wait on the link;
:attr:`PulsarLink.connect_error` holds it until a connection opens again, for the
gateway's ``/health``. Reconnecting: a connection that closed is
replaced on next use; its producers and consumers have failed and are opened again by
their owner (the replicator), which knows from where to resume.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import ssl
import zlib
from collections.abc import Awaitable
from typing import Any, TypeVar

from georep import limits
from georep.client import tls
from georep.client.connection import LinkConnection, split_url
from georep.client.consumer import InitialPosition, LinkConsumer, SubType
from georep.client.errors import ConnectFailed, LinkError, ServerError
from georep.client.producer import LinkProducer
from georep.client.refusals import Refusals
from georep.wire import commands
from georep.wire import pulsar_wire_pb2 as pb
from georep.wire.commands import Type

log = logging.getLogger(__name__)
_T = TypeVar("_T")


class PulsarLink:
    def __init__(
        self,
        service_url: str,
        *,
        token: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
        cluster: str = "",
        connect_timeout_s: float = limits.link_connect_timeout_s_default,
        request_timeout_s: float = limits.link_request_timeout_s_default,
        keepalive_s: float = limits.link_keepalive_interval_s_default,
        listener_name: str | None = None,
    ) -> None:
        split_url(service_url)  # LinkError now rather than at first use
        self.service_url = service_url
        #: Whether every connection runs TLS: said by the service URL alone.
        self.tls = tls.uses_tls(service_url)
        if self.tls and ssl_context is None:
            raise LinkError(f"{service_url}: a TLS URL needs the cluster's TLS settings")
        #: The cluster's name, for what is logged and reported.
        self.cluster = cluster or service_url
        #: Why the last connection attempt failed; None once one opens.
        self.connect_error: str | None = None
        #: What this cluster's brokers refused the gateway's role (AuthorizationError,
        #: AuthenticationError): ``produce on t/ns``, ``consume on t/ns``.
        self.refusals = Refusals(self.cluster)
        #: Named on every lookup: the brokers answer with that listener's address.
        self.listener_name = listener_name
        self._token = token
        self._ssl_context = ssl_context if self.tls else None
        self._connect_timeout_s = connect_timeout_s
        self._options = {"request_timeout_s": request_timeout_s, "keepalive_s": keepalive_s}
        self._connections: dict[str, LinkConnection] = {}
        self._opening: dict[str, asyncio.Task[LinkConnection]] = {}
        self._ids = itertools.count(1)
        self.closed = False

    def __repr__(self) -> str:
        return f"PulsarLink({self.service_url})"

    # -- connections --

    async def connection(self, url: str | None = None, slot: int = 0) -> LinkConnection:
        """The ready connection number ``slot`` to ``url`` (default: the service URL),
        opened if needed. Concurrent callers share one attempt."""
        if self.closed:
            raise LinkError(f"{self}: closed")
        url = url or self.service_url
        key = f"{url}#{slot}"
        current = self._connections.get(key)
        if current is not None and current.is_ready:
            return current
        opening = self._opening.get(key)
        if opening is None:
            opening = asyncio.get_running_loop().create_task(self._open(url, key))
            self._opening[key] = opening
            opening.add_done_callback(lambda _t: self._opening.pop(key, None))
        return await asyncio.shield(opening)

    async def _open(self, url: str, key: str) -> LinkConnection:
        try:
            connection = await LinkConnection.open(
                url,
                token=self._token,
                ssl_context=self._ssl_context,
                connect_timeout_s=self._connect_timeout_s,
                **self._options,
            )
        except ConnectFailed as error:
            self._connect_failed(str(error).removeprefix(f"{url}: "))
            raise
        if self.connect_error is not None:
            log.info("cluster %s: connected to %s again", self.cluster, url)
            self.connect_error = None
        self._connections[key] = connection
        return connection

    def _connect_failed(self, reason: str) -> None:
        """One WARNING per cluster and cause, however many wait on the link."""
        if reason != self.connect_error:
            log.warning("cluster %s: %s", self.cluster, reason)
        self.connect_error = reason

    @staticmethod
    def _slot(topic: str) -> int:
        """Which of a broker's ``limits.link_connections_per_broker`` connections serves
        ``topic``'s producers and consumers (as Pulsar's ``connectionsPerBroker``): a
        broker takes at most ``limits.consumers_per_connection_max`` consumers on one,
        and a gateway beside 10,000 partitions holds two consumers on each."""
        return zlib.crc32(topic.encode()) % limits.link_connections_per_broker

    async def lookup(self, topic: str) -> LinkConnection:
        """The connection to the broker that serves ``topic``."""
        connection = await self.connection()
        authoritative = False
        for _ in range(limits.link_lookup_redirects_max):
            request_id = connection.next_request_id()
            frame = await connection.request(
                commands.build(
                    Type.LOOKUP,
                    topic=topic,
                    request_id=request_id,
                    authoritative=authoritative,
                    advertised_listener_name=self.listener_name,
                ),
                request_id,
            )
            response = frame.command.lookup_response
            if response.response == pb.LookupResponse.FAILED:
                raise ServerError(
                    f"{connection.url}: lookup of {topic} failed: {response.message}",
                    response.error,
                )
            target = self._target(response) or connection.url
            if response.proxy_through_service_url:
                target = connection.url
            if response.response == pb.LookupResponse.CONNECT:
                return await self.connection(target, self._slot(topic))
            connection = await self.connection(target)
            authoritative = response.authoritative
        raise LinkError(
            f"lookup of {topic}: more than {limits.link_lookup_redirects_max} redirects"
        )

    def _target(self, response: pb.LookupResponse) -> str:
        """The broker URL a lookup names, in this link's kind: over TLS, its TLS URL."""
        if not self.tls:
            return str(response.broker_service_url)
        if response.broker_service_url_tls:
            return str(response.broker_service_url_tls)
        if response.broker_service_url:
            raise ConnectFailed(
                f"lookup answered {response.broker_service_url} with no TLS URL:"
                " the broker serves no pulsar+ssl:// port (brokerServicePortTls)",
                tls_failed=True,
            )
        return ""

    # -- producers and consumers --

    async def _checked(self, operation: str, opening: Awaitable[_T]) -> _T:
        """``opening``'s result; a refusal of the role is kept as ``operation``'s."""
        try:
            result = await opening
        except ServerError as error:
            if error.refused:
                self.refusals.refused(operation, f"{error.code_name}: {error}")
            raise
        self.refusals.allowed(operation)
        return result

    async def create_producer(self, topic: str, name: str, **options: Any) -> LinkProducer:
        async def open_producer() -> LinkProducer:
            connection = await self.lookup(topic)
            return await LinkProducer.open(connection, next(self._ids), topic, name, **options)

        return await self._checked(f"produce on {_namespace(topic)}", open_producer())

    async def subscribe(
        self,
        topic: str,
        subscription: str,
        *,
        sub_type: int = SubType.EXCLUSIVE,
        initial_position: int = InitialPosition.EARLIEST,
        durable: bool = True,
        **options: Any,
    ) -> LinkConsumer:
        async def open_consumer() -> LinkConsumer:
            connection = await self.lookup(topic)
            return await LinkConsumer.open(
                connection,
                next(self._ids),
                topic,
                subscription,
                sub_type=sub_type,
                initial_position=initial_position,
                durable=durable,
                **options,
            )

        return await self._checked(f"consume on {_namespace(topic)}", open_consumer())

    async def partitions_of(self, topic: str) -> int:
        """The partition count of ``topic`` (0: not partitioned)."""
        connection = await self.connection()
        request_id = connection.next_request_id()
        frame = await connection.request(
            commands.build(Type.PARTITIONED_METADATA, topic=topic, request_id=request_id),
            request_id,
        )
        response = frame.command.partitioned_metadata_response
        if response.response == pb.PartitionedMetadataResponse.FAILED:
            raise ServerError(
                f"partitioned metadata of {topic}: {response.message}", response.error
            )
        return int(response.partitions)

    # -- closing --

    async def close(self) -> None:
        self.closed = True
        for task in list(self._opening.values()):
            task.cancel()
        connections, self._connections = list(self._connections.values()), {}
        for connection in connections:
            with contextlib.suppress(Exception):
                await connection.aclose()


def _namespace(topic: str) -> str:
    """``persistent://t/ns/x`` -> ``t/ns``: rights are granted per namespace."""
    return "/".join(topic.partition("://")[2].split("/")[:2])
