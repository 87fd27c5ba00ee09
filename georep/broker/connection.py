"""One client connection: the state machine, keep-alive, and the command dispatch table.

Bytes in (``data_received``) go through the frame decoder; every whole frame is checked
against the state machine and handed to the handler :data:`HANDLERS` names for its
type. Nothing here touches a socket: the asyncio glue (``server.py``) passes a transport
(``write``, ``close``, ``pause_reading``, ``resume_reading``) and calls ``tick(now)`` once a
second for timers, so tests drive a connection with plain bytes and a fake clock.

States and legal transitions (an illegal transition is a bug and raises)::

    AWAITING_CONNECT --CONNECT--> CONNECTED
    AWAITING_CONNECT --close----> CLOSED
    CONNECTED -------close------> CLOSED

Closing, always with a named reason that is logged: a fatal codec error (frame too
large, sizes that do not add up, a command that does not parse), any command but
CONNECT before CONNECT, a second CONNECT, a broker-to-client command from the client,
a SEND for a producer this connection does not have, no CONNECT within
``limits.connect_handshake_s_max``, no answer to a keep-alive PING within one interval,
or the peer going away. Non-fatal codec errors answer the one frame (a SEND with a bad
checksum gets SEND_ERROR with CHECKSUM_ERROR) and decoding goes on. A handler's operating
error (BrokerError, a storage error) becomes the error reply the request expects; an
unexpected exception is logged and answered UNKNOWN_ERROR. Nothing a client sends stops
the process, and nothing reaches storage before it was validated.

Handlers that only touch memory (SEND, FLOW, ACK, REDELIVER, PING) run inline, in
arrival order; handlers that wait for storage or metadata (LOOKUP, PARTITIONED_METADATA,
PRODUCER, SUBSCRIBE, SEEK, CLOSE_*, UNSUBSCRIBE, GET_LAST_MESSAGE_ID, GET_SCHEMA,
GET_OR_CREATE_SCHEMA) run as tasks so
one slow topic does not stall the other producers and consumers multiplexed on the
connection. The client never sends a SEND or
FLOW for a producer or consumer before the broker confirmed it, so this keeps each
one's commands in order.

Keep-alive: a connection that sent nothing for ``keepalive_interval_s`` gets a PING; if it
still sent nothing one interval later it is closed. Backpressure: past
``limits.pending_publishes_per_connection_max`` publishes waiting for storage the
connection stops reading, and resumes at half of it.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from georep import limits
from georep.broker import queries, schema_registry
from georep.broker.consumer import Consumer
from georep.broker.errors import (
    BrokerError,
    NotAllowed,
    ProducerSendRefused,
    ServiceNotReady,
    TooManyRequests,
    server_error_of,
)
from georep.broker.message_id import position_of
from georep.broker.producer import Producer
from georep.domain.position import Position
from georep.domain.topic_name import InvalidTopicName, TopicName
from georep.invariant import InvariantViolation, invariant
from georep.wire import commands, frames
from georep.wire import pulsar_wire_pb2 as pb
from georep.wire.commands import REGISTRY, Sender, Type
from georep.wire.errors import (
    ChecksumMismatch,
    FrameContentError,
    PulsarProtocolError,
    UnknownCommand,
)

if TYPE_CHECKING:
    from georep.broker.service import BrokerService
    from georep.broker.subscription import Subscription
    from georep.broker.topic import PersistentTopic

log = logging.getLogger(__name__)

#: An asynchronous command handler (``_on_subscribe`` and the like).
FrameHandler = Callable[[frames.Frame], Awaitable[None]]

#: The highest protocol version this broker speaks (the client's is 20 or 21).
PROTOCOL_VERSION = pb.PROTOCOL_V20
#: request_id of commands the broker starts itself (CLOSE_PRODUCER/CLOSE_CONSUMER), as in
#: Pulsar: -1 as a uint64.
_BROKER_REQUEST_ID = 2**64 - 1


class State(enum.Enum):
    AWAITING_CONNECT = "awaiting-connect"
    CONNECTED = "connected"
    CLOSED = "closed"


TRANSITIONS: dict[State, frozenset[State]] = {
    State.AWAITING_CONNECT: frozenset({State.CONNECTED, State.CLOSED}),
    State.CONNECTED: frozenset({State.CLOSED}),
    State.CLOSED: frozenset(),
}

#: command type -> handler method. Every command a client may send has one.
HANDLERS: dict[int, str] = {
    Type.CONNECT: "_on_connect",
    Type.AUTH_RESPONSE: "_on_auth_response",
    Type.PING: "_on_ping",
    Type.PONG: "_on_pong",
    Type.LOOKUP: "_on_lookup",
    Type.PARTITIONED_METADATA: "_on_partitioned_metadata",
    Type.GET_TOPICS_OF_NAMESPACE: "_on_get_topics_of_namespace",
    Type.PRODUCER: "_on_producer",
    Type.SEND: "_on_send",
    Type.CLOSE_PRODUCER: "_on_close_producer",
    Type.SUBSCRIBE: "_on_subscribe",
    Type.FLOW: "_on_flow",
    Type.ACK: "_on_ack",
    Type.REDELIVER_UNACKNOWLEDGED_MESSAGES: "_on_redeliver",
    Type.SEEK: "_on_seek",
    Type.UNSUBSCRIBE: "_on_unsubscribe",
    Type.CLOSE_CONSUMER: "_on_close_consumer",
    Type.GET_LAST_MESSAGE_ID: "_on_get_last_message_id",
    Type.CONSUMER_STATS: "_on_consumer_stats",
    Type.GET_SCHEMA: "_on_get_schema",
    Type.GET_OR_CREATE_SCHEMA: "_on_get_or_create_schema",
    Type.TC_CLIENT_CONNECT_REQUEST: "_on_tc_client_connect_request",
}


class Transport(Protocol):
    def write(self, data: bytes) -> None: ...

    def close(self) -> None: ...

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...

    def get_write_buffer_size(self) -> int: ...


@dataclass(frozen=True, slots=True)
class OpenConsumer:
    """A consumer open on this connection, with the subscription and topic it is attached
    to. The connection keeps them: a consumer sits below its subscription and knows only
    its connection."""

    consumer: Consumer
    subscription: Subscription
    topic: PersistentTopic


class ServerConnection:
    def __init__(
        self,
        service: BrokerService,
        transport: Transport,
        *,
        peer: str = "?",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.service = service
        self.transport = transport
        self.peer = peer
        self._clock = clock
        self.state = State.AWAITING_CONNECT
        self.close_reason: str | None = None
        self.client_version = ""
        self.protocol_version = 0
        self._decoder = frames.FrameDecoder()
        self.producers: dict[int, Producer] = {}
        #: Producer ids whose next PRODUCER is refused once (``refuse_producer``).
        self._refused_creations: dict[int, str] = {}
        self.consumers: dict[int, OpenConsumer] = {}
        self._creating_producers: set[int] = set()
        #: producer id -> the schema version it was given (a re-sent PRODUCER gets it too).
        self._producer_schema_versions: dict[int, bytes] = {}
        self._creating_consumers: set[int] = set()
        #: Consumers and producers closed by the client while still being created
        #: (Pulsar's ServerCnx completes their futures with an error in the same way).
        self._closed_while_creating: set[int] = set()
        self._producers_closed_while_creating: set[int] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.cleanup: asyncio.Task[None] | None = None
        self._opened_at = clock()
        self._last_received = self._opened_at
        self._ping_sent_at: float | None = None
        self._writable = True
        self._pending_publishes = 0
        self._reading_paused = False
        self.stats = {"frames_in": 0, "bytes_in": 0, "errors_sent": 0}

    def __repr__(self) -> str:
        return f"ServerConnection({self.peer} {self.state.value})"

    # -- state --

    def _transition(self, new: State) -> None:
        invariant(new in TRANSITIONS[self.state], f"{self}: illegal transition to {new.value}")
        self.state = new

    def close(self, reason: str) -> None:
        """Close with a named reason; producers and consumers are detached (what the
        consumers held unacknowledged is redelivered to others)."""
        if self.state is State.CLOSED:
            return
        self._transition(State.CLOSED)
        self.close_reason = reason
        log.info("connection %s closed: %s", self.peer, reason)
        self.transport.close()
        for task in self._tasks:
            task.cancel()
        self.cleanup = asyncio.get_running_loop().create_task(self._detach_all())

    async def _detach_all(self) -> None:
        for producer in list(self.producers.values()):
            producer.close()
        self.producers.clear()
        consumers, self.consumers = list(self.consumers.values()), {}
        for opened in consumers:
            try:
                await opened.subscription.remove_consumer(opened.consumer)
            except Exception as error:
                log.warning("%s: detaching %s: %s", self, opened.consumer, error)

    # -- bytes in --

    @property
    def closed(self) -> bool:
        return self.state is State.CLOSED

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        self._last_received = self._clock()
        self._ping_sent_at = None
        self.stats["bytes_in"] += len(data)
        try:
            self._decoder.feed(data)
        except PulsarProtocolError as error:
            self.close(f"{type(error).__name__}: {error}")
            return
        while not self.closed:
            try:
                frame = self._decoder.next_frame()
            except PulsarProtocolError as error:
                if error.fatal:
                    self.close(f"{type(error).__name__}: {error}")
                    return
                self._on_frame_error(error)
                continue
            if frame is None:
                return
            self.stats["frames_in"] += 1
            self._dispatch(frame)

    def connection_lost(self, error: Exception | None = None) -> None:
        self.close(f"connection lost: {error}" if error else "the client closed the connection")

    def _on_frame_error(self, error: PulsarProtocolError) -> None:
        if isinstance(error, UnknownCommand):
            log.info("%s: ignoring %s", self.peer, error)
            return
        if not isinstance(error, FrameContentError):
            raise InvariantViolation(f"unexpected codec error {error!r}")
        server_error = (
            pb.CHECKSUM_ERROR if isinstance(error, ChecksumMismatch) else pb.UNKNOWN_ERROR
        )
        if self.state is not State.CONNECTED:
            self.close(f"{type(error).__name__} before CONNECT: {error}")
            return
        self._reply_error(error.command, server_error, str(error))

    def _dispatch(self, frame: frames.Frame) -> None:
        spec = REGISTRY[frame.type]
        if Sender.CLIENT not in spec.sender:
            self.close(f"the client sent {spec.name}, a broker-to-client command")
            return
        if self.state is State.AWAITING_CONNECT and frame.type != Type.CONNECT:
            self.close(f"{spec.name} before CONNECT")
            return
        if self.state is State.CONNECTED and frame.type == Type.CONNECT:
            self.close("a second CONNECT")
            return
        handler = getattr(self, HANDLERS[frame.type])
        if asyncio.iscoroutinefunction(handler):
            self._spawn(handler, frame)
            return
        try:
            handler(frame)
        except (BrokerError, InvalidTopicName) as error:
            self._reply_error(frame.command, server_error_of(error), str(error))
        except InvariantViolation:
            raise
        except Exception as error:
            log.exception("%s: %s handler failed", self.peer, spec.name)
            self._reply_error(frame.command, pb.UNKNOWN_ERROR, f"{type(error).__name__}: {error}")

    def _spawn(self, handler: FrameHandler, frame: frames.Frame) -> None:
        """Run ``await handler(frame)`` as a task of this connection."""
        task = asyncio.get_running_loop().create_task(self._guarded(handler, frame))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _guarded(self, handler: FrameHandler, frame: frames.Frame) -> None:
        command = frame.command
        try:
            await handler(frame)
        except asyncio.CancelledError:
            raise
        except (BrokerError, InvalidTopicName) as error:
            self._reply_error(command, server_error_of(error), str(error))
        except InvariantViolation as error:
            asyncio.get_running_loop().call_exception_handler(
                {"message": f"{self}: invariant violated", "exception": error}
            )
            raise
        except Exception as error:
            # Storage errors and the like: the client may retry.
            log.warning("%s: %s failed: %r", self.peer, Type.Name(command.type), error)
            self._reply_error(command, pb.SERVICE_NOT_READY, f"{type(error).__name__}: {error}")

    # -- bytes out --

    @property
    def is_writable(self) -> bool:
        return self._writable and self.state is State.CONNECTED

    def set_writable(self, writable: bool) -> None:
        self._writable = writable
        if writable:
            for opened in self.consumers.values():
                dispatcher = opened.subscription.dispatcher
                if dispatcher is not None:
                    dispatcher.wake()

    def write(self, data: bytes) -> None:
        if self.state is not State.CLOSED:
            self.transport.write(data)

    def send_command(self, command: pb.BaseCommand) -> None:
        self.write(frames.encode_command(command))

    def _reply_error(
        self, command: pb.BaseCommand, server_error: pb.ServerError, text: str
    ) -> None:
        reply = commands.error_reply(command, server_error, text)
        if reply is not None:
            self.stats["errors_sent"] += 1
            self.send_command(reply)

    # -- timers and backpressure --

    def tick(self, now: float) -> None:
        if self.state is State.AWAITING_CONNECT:
            if now - self._opened_at > limits.connect_handshake_s_max:
                self.close(f"no CONNECT within {limits.connect_handshake_s_max} s")
            return
        if self.state is not State.CONNECTED:
            return
        interval = self.service.config.keepalive_interval_s
        if self._ping_sent_at is not None:
            if now - self._ping_sent_at > interval:
                self.close(f"keep-alive: no answer to PING within {interval} s")
        elif now - self._last_received > interval:
            self._ping_sent_at = now
            self.send_command(commands.ping())

    def publish_started(self) -> None:
        self._pending_publishes += 1
        if (
            not self._reading_paused
            and self._pending_publishes >= limits.pending_publishes_per_connection_max
        ):
            self._reading_paused = True
            self.transport.pause_reading()

    def publish_finished(self) -> None:
        self._pending_publishes -= 1
        if (
            self._reading_paused
            and self._pending_publishes <= limits.pending_publishes_per_connection_max // 2
        ):
            self._reading_paused = False
            if self.state is not State.CLOSED:
                self.transport.resume_reading()

    # -- closes the broker starts --

    def close_producer_from_broker(self, producer: Producer) -> None:
        if self.producers.get(producer.producer_id) is producer:
            del self.producers[producer.producer_id]
            self._producer_schema_versions.pop(producer.producer_id, None)
            self.send_command(commands.close_producer(producer.producer_id, _BROKER_REQUEST_ID))
        producer.close()

    def refuse_producer(self, producer: Producer, reason: str) -> None:
        """Close ``producer`` and refuse its next re-creation with ``reason``: storage
        refused what it sent (see ``producer.py`` and ``topic.py``), and the official
        client fails its pending sends only on a refused re-creation."""
        if len(self._refused_creations) < limits.producers_per_connection_max:
            self._refused_creations[producer.producer_id] = reason
        self.close_producer_from_broker(producer)

    def close_consumer_from_broker(self, consumer: Consumer) -> None:
        opened = self.consumers.get(consumer.consumer_id)
        if opened is not None and opened.consumer is consumer:
            del self.consumers[consumer.consumer_id]
            self.send_command(commands.close_consumer(consumer.consumer_id, _BROKER_REQUEST_ID))

    # -- handlers: connection --

    def _on_connect(self, frame: frames.Frame) -> None:
        connect = frame.command.connect
        self.client_version = connect.client_version
        self.protocol_version = min(connect.protocol_version, PROTOCOL_VERSION)
        self.send_command(
            commands.connected(
                self.service.config.version, self.protocol_version, limits.pulsar_message_bytes_max
            )
        )
        self._transition(State.CONNECTED)

    def _on_auth_response(self, frame: frames.Frame) -> None:
        log.info("%s: ignoring AUTH_RESPONSE (the broker sends no challenges)", self.peer)

    def _on_ping(self, frame: frames.Frame) -> None:
        self.send_command(commands.pong())

    def _on_pong(self, frame: frames.Frame) -> None:
        pass  # data_received already counted it as a sign of life

    # -- handlers: discovery (answered by ``queries.py``) --

    async def _on_lookup(self, frame: frames.Frame) -> None:
        self.send_command(await queries.lookup(self.service, frame.command.lookup))

    async def _on_partitioned_metadata(self, frame: frames.Frame) -> None:
        request = frame.command.partitioned_metadata
        self.send_command(await queries.partitioned_metadata(self.service, request))

    async def _on_get_topics_of_namespace(self, frame: frames.Frame) -> None:
        request = frame.command.get_topics_of_namespace
        self.send_command(await queries.topics_of_namespace(self.service, request))

    # -- handlers: producing --

    async def _on_producer(self, frame: frames.Frame) -> None:
        request = frame.command.producer
        producer_id = request.producer_id
        existing = self.producers.get(producer_id)
        if existing is not None:
            self.send_command(
                commands.producer_success(
                    request.request_id,
                    existing.name,
                    schema_version=self._producer_schema_versions.get(producer_id),
                )
            )
            return
        if producer_id in self._creating_producers:
            raise ServiceNotReady(f"producer {producer_id} is being created")
        refused = self._refused_creations.pop(producer_id, None)
        if refused is not None:
            raise ProducerSendRefused(refused)
        if len(self.producers) >= limits.producers_per_connection_max:
            raise TooManyRequests(
                f"{limits.producers_per_connection_max} producers on one connection"
            )
        if request.producer_access_mode not in (
            pb.PRODUCER_ACCESS_SHARED,
            pb.PRODUCER_ACCESS_EXCLUSIVE,
        ):
            raise NotAllowed(
                f"producer access mode {pb.ProducerAccessMode.Name(request.producer_access_mode)}"
                " is not supported"
            )
        self._creating_producers.add(producer_id)
        try:
            if len(request.producer_name) > limits.producer_name_chars_max:
                raise NotAllowed(
                    f"producer name longer than {limits.producer_name_chars_max} characters"
                )
            topic_name = TopicName.parse(request.topic)
            topic = await self.service.get_topic(topic_name)
            schema_version = None
            if request.HasField("schema") and request.schema.type != pb.Schema.NONE:
                schema = await self.service.schemas.register(
                    topic_name, *schema_registry.record_of(request.schema)
                )
                schema_version = schema_registry.encode_version(schema.version)
            name = request.producer_name or self.service.new_producer_name()
            producer = Producer(
                topic=topic,
                connection=self,
                producer_id=producer_id,
                name=name,
                access_mode=request.producer_access_mode,
                user_provided_name=bool(request.producer_name),
            )
            topic.add_producer(producer)
        finally:
            self._creating_producers.discard(producer_id)
            closed_meanwhile = producer_id in self._producers_closed_while_creating
            self._producers_closed_while_creating.discard(producer_id)
        if self.state is State.CLOSED:
            producer.close()
            return
        if closed_meanwhile:  # the client gave up on it: its name must stay free
            producer.close()
            raise ServiceNotReady(f"producer {producer_id} was closed while being created")
        self.producers[producer_id] = producer
        if schema_version is not None:
            self._producer_schema_versions[producer_id] = schema_version
        self.send_command(
            commands.producer_success(
                request.request_id,
                name,
                topic.dedup.persisted.get(name, -1),
                schema_version=schema_version,
            )
        )

    def _on_send(self, frame: frames.Frame) -> None:
        send = frame.command.send
        producer = self.producers.get(send.producer_id)
        if producer is None and send.producer_id in self._refused_creations:
            return  # sent before the client saw CLOSE_PRODUCER: it fails these itself
        if producer is None:
            self.close(f"SEND for producer {send.producer_id}, which this connection lacks")
            return
        producer.send(frame)

    def _on_close_producer(self, frame: frames.Frame) -> None:
        request = frame.command.close_producer
        producer = self.producers.pop(request.producer_id, None)
        self._producer_schema_versions.pop(request.producer_id, None)
        if producer is None and request.producer_id in self._creating_producers:
            self._producers_closed_while_creating.add(request.producer_id)
        if producer is not None:
            producer.close()
        self.send_command(commands.success(request.request_id))

    # -- handlers: consuming --

    async def _on_subscribe(self, frame: frames.Frame) -> None:
        request = frame.command.subscribe
        consumer_id = request.consumer_id
        if consumer_id in self.consumers:
            self.send_command(commands.success(request.request_id))
            return
        if consumer_id in self._creating_consumers:
            raise ServiceNotReady(f"consumer {consumer_id} is being created")
        if len(self.consumers) >= limits.consumers_per_connection_max:
            raise TooManyRequests(
                f"{limits.consumers_per_connection_max} consumers on one connection"
            )
        name = TopicName.parse(request.topic)
        key_shared_meta = request.key_shared_meta if request.HasField("key_shared_meta") else None

        def new_consumer(subscription: Subscription) -> Consumer:
            return Consumer(
                connection=self,
                consumer_id=consumer_id,
                name=request.consumer_name or uuid.uuid4().hex[:10],
                sub_type=request.sub_type,
                rate_window_s=subscription.topic.rate_window_s,
                priority_level=request.priority_level,
                key_shared_meta=key_shared_meta,
                partition_index=name.partition_index,
            )

        self._creating_consumers.add(consumer_id)
        try:
            topic = await self.service.get_topic(name)
            if request.HasField("schema"):
                await self.service.schemas.for_consumer(name, request.schema)
            subscription, consumer = await topic.subscribe(new_consumer, request)
        finally:
            self._creating_consumers.discard(consumer_id)
            closed_meanwhile = consumer_id in self._closed_while_creating
            self._closed_while_creating.discard(consumer_id)
        if self.state is State.CLOSED:
            await subscription.remove_consumer(consumer)
            return
        if closed_meanwhile:
            # The client closed it before it was made (it gave up waiting): never leave
            # it attached, or it holds an Exclusive subscription against the retry.
            await subscription.remove_consumer(consumer)
            raise ServiceNotReady(f"consumer {consumer_id} was closed while being created")
        self.consumers[consumer_id] = OpenConsumer(consumer, subscription, topic)
        self.send_command(commands.success(request.request_id))

    def _consumer(self, consumer_id: int) -> OpenConsumer:
        opened = self.consumers.get(consumer_id)
        if opened is None:
            raise _ConsumerNotFound(f"consumer {consumer_id} is not open on this connection")
        return opened

    def _on_flow(self, frame: frames.Frame) -> None:
        flow = frame.command.flow
        opened = self.consumers.get(flow.consumer_id)
        if opened is None:
            return  # closed meanwhile; Pulsar ignores it too
        opened.consumer.flow(flow.message_permits)
        if opened.subscription.dispatcher is not None:
            opened.subscription.dispatcher.wake()

    def _on_ack(self, frame: frames.Frame) -> None:
        ack = frame.command.ack
        opened = self._consumer(ack.consumer_id)
        opened.subscription.acknowledge(opened.consumer, ack)
        if ack.HasField("request_id"):
            self._spawn(self._ack_receipt, frame)

    async def _ack_receipt(self, frame: frames.Frame) -> None:
        """ACK_RESPONSE once the acknowledgement is persisted."""
        ack = frame.command.ack
        opened = self.consumers.get(ack.consumer_id)
        if opened is not None:
            await opened.subscription.flush()
        self.send_command(commands.ack_response(ack.consumer_id, ack.request_id))

    def _on_redeliver(self, frame: frames.Frame) -> None:
        request = frame.command.redeliver_unacknowledged_messages
        opened = self.consumers.get(request.consumer_id)
        if opened is not None:
            opened.subscription.redeliver(opened.consumer, list(request.message_ids))

    async def _on_seek(self, frame: frames.Frame) -> None:
        request = frame.command.seek
        opened = self._consumer(request.consumer_id)
        subscription, topic = opened.subscription, opened.topic
        if request.HasField("message_id"):
            target = position_of(request.message_id)
            if target == Position.EARLIEST or target.ledger_id < 0:
                position = await topic.seek_target("earliest")
            elif target == Position.LATEST:
                position = await topic.seek_target("latest")
            else:
                position = await topic.seek_target(target)
        elif request.HasField("message_publish_time"):
            position = await topic.find_by_publish_time(request.message_publish_time)
        else:
            raise NotAllowed("SEEK names neither a message id nor a publish time")
        await subscription.reset_cursor(position)
        self.send_command(commands.success(request.request_id))

    async def _on_unsubscribe(self, frame: frames.Frame) -> None:
        request = frame.command.unsubscribe
        opened = self._consumer(request.consumer_id)
        subscription = opened.subscription
        if not (request.force or subscription.can_unsubscribe(opened.consumer)):
            raise NotAllowed(f"other consumers are attached to subscription {subscription.name!r}")
        self.consumers.pop(request.consumer_id, None)
        await subscription.remove_consumer(opened.consumer)
        if not subscription.closed:
            await opened.topic.delete_subscription(subscription.name)
        self.send_command(commands.success(request.request_id))

    async def _on_close_consumer(self, frame: frames.Frame) -> None:
        request = frame.command.close_consumer
        opened = self.consumers.pop(request.consumer_id, None)
        if opened is None and request.consumer_id in self._creating_consumers:
            self._closed_while_creating.add(request.consumer_id)  # _on_subscribe drops it
        if opened is not None:
            # Returns once the consumer's acknowledgements are persisted.
            await opened.subscription.remove_consumer(opened.consumer)
        self.send_command(commands.success(request.request_id))

    async def _on_get_last_message_id(self, frame: frames.Frame) -> None:
        request = frame.command.get_last_message_id
        opened = self._consumer(request.consumer_id)
        self.send_command(
            await queries.last_message_id(
                request, opened.topic, opened.subscription, opened.consumer
            )
        )

    def _on_consumer_stats(self, frame: frames.Frame) -> None:
        request = frame.command.consumer_stats
        opened = self._consumer(request.consumer_id)
        self.send_command(queries.consumer_stats(request, opened.subscription, opened.consumer))

    # -- handlers: schemas (``queries.py``) and transactions (refused) --

    async def _on_get_schema(self, frame: frames.Frame) -> None:
        request = frame.command.get_schema
        self.send_command(await queries.get_schema(self.service, request))

    async def _on_get_or_create_schema(self, frame: frames.Frame) -> None:
        request = frame.command.get_or_create_schema
        self.send_command(await queries.get_or_create_schema(self.service, request))

    def _on_tc_client_connect_request(self, frame: frames.Frame) -> None:
        raise NotAllowed("transactions are not supported")


class _ConsumerNotFound(BrokerError):
    server_error = pb.CONSUMER_NOT_FOUND


def _check_handlers() -> None:
    for command_type, spec in REGISTRY.items():
        if Sender.CLIENT in spec.sender:
            invariant(command_type in HANDLERS, f"no handler for {spec.name}")
            invariant(hasattr(ServerConnection, HANDLERS[command_type]), f"{spec.name} handler")


_check_handlers()
