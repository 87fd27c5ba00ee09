"""A consumer on a gateway link: entries in order, flow control, cumulative acks.

The broker pushes whole entries (a batch is one MESSAGE) while the consumer has permits.
:class:`LinkConsumer` grants ``receiver_queue`` permits at subscribe, and each time the
caller has taken half of them from its queue it grants that many again, as Pulsar's
clients do. Permits count messages, so a batch of 100 costs 100; the queue therefore
holds at most about ``receiver_queue`` messages plus one batch.

A consumer opened with ``receiver_queue=0`` is an *acknowledger*: it grants no permits,
so the broker dispatches nothing to it and the application's consumers on a Shared
subscription keep every message, yet it may acknowledge exact message ids
(:meth:`ack_individual`), as a subscription sync applying another cluster's state needs.

Acknowledgements are cumulative (:meth:`ack_cumulative`): everything up to and
including an entry, without a receipt; the broker persists them in the background, and
:meth:`close` returns once they are durable (the broker answers CLOSE_CONSUMER after
persisting the subscription's acknowledgements). A consumer that is closed by the broker
or loses its connection fails :meth:`receive` with :class:`LinkClosed`; what it had not
acknowledged is delivered again to whoever subscribes next.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from georep import limits
from georep.client.connection import LinkConnection
from georep.client.errors import LinkClosed, LinkError, ServerError
from georep.domain.position import Position
from georep.invariant import invariant, present
from georep.wire import commands, frames
from georep.wire import pulsar_wire_pb2 as pb
from georep.wire.commands import Type

SubType = pb.Subscribe.SubType
InitialPosition = pb.Subscribe.InitialPosition
_U64 = 2**64
_MESSAGE = int(Type.MESSAGE)
_CLOSE_CONSUMER = int(Type.CLOSE_CONSUMER)


def _signed(value: int) -> int:
    return value - _U64 if value >= 2**63 else value


@dataclass(frozen=True, slots=True)
class ReceivedEntry:
    """One entry as the broker stored it."""

    #: Where the entry is on the topic.
    position: Position
    metadata: pb.MessageMetadata
    #: The payload as stored: for a batch, every message with its header (batch.py).
    payload: bytes
    redelivery_count: int = 0
    #: Messages the entry holds (a batch's count, else 1); derived from the metadata.
    messages: int = field(init=False)
    publish_time_ms: int = field(init=False)

    def __post_init__(self) -> None:
        metadata = self.metadata
        messages = 1
        if metadata.HasField("num_messages_in_batch"):
            messages = max(1, metadata.num_messages_in_batch)
        object.__setattr__(self, "messages", messages)
        object.__setattr__(self, "publish_time_ms", metadata.publish_time)

    @property
    def size_bytes(self) -> int:
        return len(self.payload)


def message_id_data(position: Position, partition: int = -1) -> pb.MessageIdData:
    ledger_id, entry_id = position
    data = pb.MessageIdData(ledger_id=ledger_id % _U64, entry_id=entry_id % _U64)
    if partition >= 0:
        data.partition = partition
    return data


class LinkConsumer:
    def __init__(
        self,
        connection: LinkConnection,
        consumer_id: int,
        topic: str,
        subscription: str,
        *,
        receiver_queue: int = limits.replicator_receive_messages_max,
    ) -> None:
        invariant(0 <= receiver_queue <= limits.consumer_unacked_messages_max, "receiver queue")
        self.connection = connection
        self.consumer_id = consumer_id
        self.topic = topic
        self.subscription = subscription
        self.receiver_queue = receiver_queue
        self._queue: collections.deque[ReceivedEntry] = collections.deque()
        self._arrived = asyncio.Event()
        self._taken_messages = 0
        self.failure: LinkError | None = None
        self.stats = {"entries_in": 0, "messages_in": 0, "bytes_in": 0}

    def __repr__(self) -> str:
        return f"LinkConsumer({self.subscription!r} on {self.topic})"

    @classmethod
    async def open(
        cls,
        connection: LinkConnection,
        consumer_id: int,
        topic: str,
        subscription: str,
        *,
        sub_type: int = SubType.EXCLUSIVE,
        initial_position: int = InitialPosition.EARLIEST,
        durable: bool = True,
        start_message_id: Position | None = None,
        consumer_name: str = "",
        replicate_subscription_state: bool = False,
        **options: Any,
    ) -> LinkConsumer:
        consumer = cls(connection, consumer_id, topic, subscription, **options)
        connection.register_consumer(consumer_id, consumer)
        request_id = connection.next_request_id()
        command = commands.build(
            Type.SUBSCRIBE,
            topic=topic,
            subscription=subscription,
            sub_type=sub_type,
            consumer_id=consumer_id,
            request_id=request_id,
            consumer_name=consumer_name,
            durable=durable,
            initial_position=initial_position,
        )
        if start_message_id is not None:
            command.subscribe.start_message_id.CopyFrom(message_id_data(start_message_id))
        if replicate_subscription_state:  # Pulsar's replicated subscriptions (a bench's anchor)
            command.subscribe.replicate_subscription_state = True
        try:
            await connection.request(command, request_id)
        except BaseException:
            connection.unregister_consumer(consumer_id)
            # The broker may still attach it after we gave up (a timed-out or cancelled
            # SUBSCRIBE): close it, or it stands in the way of the retry on an
            # Exclusive subscription ("already has a consumer").
            connection.abandon(commands.close_consumer(consumer_id, connection.next_request_id()))
            raise
        if consumer.receiver_queue:  # an acknowledger (0) never asks for messages
            connection.send_command(
                commands.build(
                    Type.FLOW, consumer_id=consumer_id, message_permits=consumer.receiver_queue
                )
            )
        return consumer

    # -- receiving --

    @property
    def queued(self) -> int:
        return len(self._queue)

    def receive_nowait(self) -> ReceivedEntry | None:
        if not self._queue:
            if self.failure is not None:
                raise self.failure
            return None
        entry = self._queue.popleft()
        self._taken(entry.messages)
        return entry

    async def receive(self) -> ReceivedEntry:
        while not self._queue:
            if self.failure is not None:
                raise self.failure
            self._arrived.clear()
            await self._arrived.wait()
        return present(self.receive_nowait(), "an entry was queued")

    def _taken(self, messages: int) -> None:
        self._taken_messages += messages
        threshold = max(1, self.receiver_queue // 2)
        if self._taken_messages >= threshold and self.failure is None:
            permits, self._taken_messages = self._taken_messages, 0
            with contextlib.suppress(LinkClosed):
                self.connection.send_command(
                    commands.build(Type.FLOW, consumer_id=self.consumer_id, message_permits=permits)
                )

    # -- acknowledging --

    def ack_cumulative(self, position: Position) -> None:
        """Acknowledge every entry up to ``position`` (no receipt)."""
        if self.failure is not None:
            raise self.failure
        self.connection.send_command(
            commands.build(
                Type.ACK,
                consumer_id=self.consumer_id,
                ack_type=pb.Ack.CUMULATIVE,
                message_id=[message_id_data(position)],
            )
        )

    def ack_individual(self, positions: list[Position]) -> None:
        """Acknowledge exactly these entries (no receipt), in ACKs of at most
        ``limits.link_ack_ids_per_command_max`` ids: what a Shared subscription accepts
        from any of its consumers, whether or not the entry was dispatched to it."""
        if self.failure is not None:
            raise self.failure
        step = limits.link_ack_ids_per_command_max
        for start in range(0, len(positions), step):
            self.connection.send_command(
                commands.build(
                    Type.ACK,
                    consumer_id=self.consumer_id,
                    ack_type=pb.Ack.INDIVIDUAL,
                    message_id=[message_id_data(p) for p in positions[start : start + step]],
                )
            )

    async def ack_cumulative_durably(self, position: Position) -> None:
        """Acknowledge up to ``position`` and wait until the broker persisted it."""
        if self.failure is not None:
            raise self.failure
        request_id = self.connection.next_request_id()
        frame = await self.connection.request(
            commands.build(
                Type.ACK,
                consumer_id=self.consumer_id,
                ack_type=pb.Ack.CUMULATIVE,
                message_id=[message_id_data(position)],
                request_id=request_id,
            ),
            request_id,
        )
        response = frame.command.ack_response
        if response.HasField("error"):
            raise ServerError(f"{self.topic}: ack refused: {response.message}", response.error)

    # -- queries --

    async def backlog(self) -> int:
        """The subscription's backlog as the broker counts it (entries after the
        mark-delete position not individually acknowledged)."""
        if self.failure is not None:
            raise self.failure
        request_id = self.connection.next_request_id()
        frame = await self.connection.request(
            commands.build(
                Type.CONSUMER_STATS, request_id=request_id, consumer_id=self.consumer_id
            ),
            request_id,
        )
        response = frame.command.consumer_stats_response
        if response.HasField("error_code"):
            raise ServerError(f"{self.topic}: {response.error_message}", response.error_code)
        return int(response.msg_backlog)

    # -- frames from the connection --

    def on_frame(self, frame: frames.Frame) -> None:
        kind = frame.command.type
        if kind == _MESSAGE:
            message = frame.command.message
            entry = ReceivedEntry(
                Position(
                    _signed(message.message_id.ledger_id), _signed(message.message_id.entry_id)
                ),
                present(frame.metadata, "a MESSAGE frame carries metadata"),
                frame.payload,
                message.redelivery_count,
            )
            self._queue.append(entry)
            self.stats["entries_in"] += 1
            self.stats["messages_in"] += entry.messages
            self.stats["bytes_in"] += entry.size_bytes
            self._arrived.set()
        elif kind == _CLOSE_CONSUMER:
            self._fail(LinkClosed(f"{self.topic}: the broker closed {self.subscription!r}"))

    def on_connection_closed(self, reason: str) -> None:
        self._fail(LinkClosed(f"{self.topic}: connection closed: {reason}"))

    def _fail(self, error: LinkError) -> None:
        if self.failure is None:
            self.failure = error
            self.connection.unregister_consumer(self.consumer_id)
            self._queue.clear()
            self._arrived.set()

    # -- closing --

    async def close(self) -> None:
        """CLOSE_CONSUMER: returns once the broker persisted the acknowledgements."""
        await self._finish(Type.CLOSE_CONSUMER, commands.close_consumer)

    async def unsubscribe(self) -> None:
        """UNSUBSCRIBE: the consumer closes and the subscription (its cursor) is deleted."""

        def build(consumer_id: int, request_id: int) -> pb.BaseCommand:
            return commands.build(
                Type.UNSUBSCRIBE, consumer_id=consumer_id, request_id=request_id, force=True
            )

        await self._finish(Type.UNSUBSCRIBE, build)

    async def _finish(self, _kind: int, build: Callable[[int, int], pb.BaseCommand]) -> None:
        if self.failure is not None:
            if _kind == Type.UNSUBSCRIBE:
                raise self.failure
            return
        request_id = self.connection.next_request_id()
        try:
            await self.connection.request(build(self.consumer_id, request_id), request_id)
        finally:
            self._fail(LinkClosed(f"{self.topic}: {self.subscription!r} closed"))
