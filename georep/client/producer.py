"""A producer on a gateway link: pipelined SENDs, receipts in order, backpressure.

:meth:`LinkProducer.send` writes one SEND at once and returns a future for its receipt,
so many sends are in flight together; it first waits while ``pending_count_max`` sends or
``pending_bytes_max`` bytes are unanswered (backpressure from a slow remote). The broker
answers every SEND in the order it came, so each SEND_RECEIPT must be for the oldest
pending sequence id; anything else means the two sides are out of step and the
connection is closed (as Pulsar's clients do).

A receipt with message id (-1, -1) means the broker had the sequence id already (producer
deduplication) and stored nothing: :attr:`SendReceipt.duplicate`.

A SEND_ERROR, a CLOSE_PRODUCER from the broker, or the connection closing fails the
producer: every pending future fails with the reason and later sends raise. Sends after
a failure could land after an entry that failed, so the producer is not reused; the
caller opens a new one, learns from its ``last_sequence_id`` what the broker holds, and
resends from there.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from georep import limits
from georep.client.connection import LinkConnection
from georep.client.errors import LinkClosed, LinkError, MessageTooLarge, ServerError
from georep.domain.position import Position
from georep.invariant import invariant
from georep.wire import commands, frames
from georep.wire import pulsar_wire_pb2 as pb
from georep.wire.commands import Type
from georep.wire.errors import FrameTooLarge

log = logging.getLogger(__name__)

_U64 = 2**64
_SEND = Type.SEND
_SEND_RECEIPT = int(Type.SEND_RECEIPT)
_SEND_ERROR = int(Type.SEND_ERROR)
_CLOSE_PRODUCER = int(Type.CLOSE_PRODUCER)


def _signed(value: int) -> int:
    return value - _U64 if value >= 2**63 else value


#: A receipt's position when the broker stored nothing (a duplicate, or no message id).
_DUPLICATE = Position(-1, -1)


@dataclass(frozen=True, slots=True)
class SendReceipt:
    sequence_id: int
    #: (ledger id, entry id) on the broker; (-1, -1) for a duplicate.
    position: Position

    @property
    def duplicate(self) -> bool:
        return self.position == _DUPLICATE


@dataclass(slots=True)
class _Pending:
    sequence_id: int
    size_bytes: int
    future: asyncio.Future[SendReceipt]


class LinkProducer:
    def __init__(
        self,
        connection: LinkConnection,
        producer_id: int,
        topic: str,
        *,
        pending_count_max: int = limits.replicator_pending_sends_count_max,
        pending_bytes_max: int = limits.replicator_pending_sends_bytes_max,
    ) -> None:
        invariant(0 < pending_count_max <= limits.replicator_pending_sends_count_max, "count")
        invariant(0 < pending_bytes_max <= limits.replicator_pending_sends_bytes_max, "bytes")
        self.connection = connection
        self.producer_id = producer_id
        self.topic = topic
        self.name = ""
        #: Highest sequence id the broker had persisted for this name when it opened.
        self.last_sequence_id = -1
        self.pending_count_max = pending_count_max
        self.pending_bytes_max = pending_bytes_max
        self._pending: collections.deque[_Pending] = collections.deque()
        self._pending_bytes = 0
        self._room = asyncio.Event()
        self._room.set()
        self.failure: LinkError | None = None
        self._on_failure: list[Callable[[LinkError], None]] = []

    def __repr__(self) -> str:
        return f"LinkProducer({self.name!r} on {self.topic})"

    @classmethod
    async def open(
        cls, connection: LinkConnection, producer_id: int, topic: str, name: str, **options: Any
    ) -> LinkProducer:
        producer = cls(connection, producer_id, topic, **options)
        connection.register_producer(producer_id, producer)
        request_id = connection.next_request_id()
        command = commands.build(
            Type.PRODUCER,
            topic=topic,
            producer_id=producer_id,
            request_id=request_id,
            producer_name=name,
            user_provided_producer_name=True,
        )
        try:
            frame = await connection.request(command, request_id)
            while not frame.command.producer_success.producer_ready:
                frame = await connection.request(command, request_id)
        except BaseException:
            connection.unregister_producer(producer_id)
            # As for a consumer (consumer.py): a producer the broker made after we gave up
            # would hold the name the retry asks for.
            connection.abandon(commands.close_producer(producer_id, connection.next_request_id()))
            raise
        success = frame.command.producer_success
        producer.name = success.producer_name
        producer.last_sequence_id = _signed(success.last_sequence_id)
        return producer

    # -- state --

    @property
    def pending_count(self) -> int:
        return len(self._pending)

    @property
    def pending_bytes(self) -> int:
        return self._pending_bytes

    @property
    def failed(self) -> bool:
        return self.failure is not None

    def on_failure(self, callback: Callable[[LinkError], None]) -> None:
        """Call ``callback(error)`` once when the producer fails (now, if it has)."""
        if self.failure is not None:
            callback(self.failure)
        else:
            self._on_failure.append(callback)

    def _has_room(self) -> bool:
        return (
            len(self._pending) < self.pending_count_max
            and self._pending_bytes < self.pending_bytes_max
        )

    # -- sending --

    async def send(
        self,
        metadata: pb.MessageMetadata,
        payload: bytes,
        *,
        num_messages: int = 1,
    ) -> asyncio.Future[SendReceipt]:
        """Send one entry under ``metadata.sequence_id`` (and its
        ``highest_sequence_id`` when set); the future resolves to its receipt."""
        while not self._has_room():
            if self.failure is not None:
                raise self.failure
            self._room.clear()
            await self._room.wait()
        if self.failure is not None:
            raise self.failure
        sequence_id = metadata.sequence_id
        send = pb.Send(
            producer_id=self.producer_id,
            sequence_id=sequence_id,
            num_messages=max(1, num_messages),
        )
        if metadata.HasField("highest_sequence_id"):
            send.highest_sequence_id = metadata.highest_sequence_id
        command = pb.BaseCommand(type=_SEND, send=send)
        try:
            data = frames.encode_stored_payload_command(
                command,
                frames.encode_headers_and_payload(metadata.SerializeToString(), payload),
                frame_bytes_max=self.connection.frame_bytes_max,
            )
        except FrameTooLarge as error:
            raise MessageTooLarge(
                f"{self.topic}: entry with sequence id {sequence_id} does not fit"
                f" {self.connection.url}'s frames: {error}"
            ) from None
        future: asyncio.Future[SendReceipt] = asyncio.get_running_loop().create_future()
        self._pending.append(_Pending(sequence_id, len(data), future))
        self._pending_bytes += len(data)
        try:
            self.connection.write(data)
        except LinkClosed as error:
            self._fail(error)
            raise
        await self.connection.drain()
        return future

    async def get_or_create_schema(self, schema: pb.Schema) -> bytes:
        """GET_OR_CREATE_SCHEMA on this producer's topic: the broker's version of
        ``schema`` (8 bytes), which it registers if new and compatible there; ServerError
        with INCOMPATIBLE_SCHEMA when its namespace's strategy refuses it."""
        request_id = self.connection.next_request_id()
        command = commands.build(
            Type.GET_OR_CREATE_SCHEMA,
            request_id=request_id,
            topic=self.topic,
            schema=schema,
            producer_name=self.name,
        )
        frame = await self.connection.request(command, request_id)
        response = frame.command.get_or_create_schema_response
        if response.HasField("error_code"):
            raise ServerError(
                f"{self.connection.url}: {self.topic}: {response.error_message}",
                response.error_code,
            )
        return response.schema_version

    # -- frames from the connection --

    def on_frame(self, frame: frames.Frame) -> None:
        kind = frame.command.type
        if kind == _SEND_RECEIPT:
            self._on_receipt(frame.command.send_receipt)
        elif kind == _SEND_ERROR:
            error = frame.command.send_error
            self._fail(
                ServerError(
                    f"{self.topic}: SEND {error.sequence_id} refused: {error.message}", error.error
                )
            )
        elif kind == _CLOSE_PRODUCER:
            self._fail(LinkClosed(f"{self.topic}: the broker closed producer {self.name!r}"))

    def _on_receipt(self, receipt: pb.SendReceipt) -> None:
        if not self._pending or self._pending[0].sequence_id != receipt.sequence_id:
            expected = self._pending[0].sequence_id if self._pending else None
            self.connection.close(
                f"receipt for sequence id {receipt.sequence_id} while {expected} is the oldest"
                f" pending on producer {self.name!r}"
            )
            return
        pending = self._pending.popleft()
        self._pending_bytes -= pending.size_bytes
        position = _DUPLICATE
        if receipt.HasField("message_id"):
            position = Position(
                _signed(receipt.message_id.ledger_id), _signed(receipt.message_id.entry_id)
            )
        if not pending.future.done():
            pending.future.set_result(SendReceipt(pending.sequence_id, position))
        if self._has_room():
            self._room.set()

    def on_connection_closed(self, reason: str) -> None:
        self._fail(LinkClosed(f"{self.topic}: connection closed: {reason}"))

    def _fail(self, error: LinkError) -> None:
        if self.failure is not None:
            return
        self.failure = error
        self.connection.unregister_producer(self.producer_id)
        pending, self._pending = self._pending, collections.deque()
        self._pending_bytes = 0
        for item in pending:
            if not item.future.done():
                item.future.set_exception(error)
                item.future.exception()  # retrieved: a failed send nobody awaits is no bug
        self._room.set()
        callbacks, self._on_failure = self._on_failure, []
        for callback in callbacks:
            callback(error)

    # -- closing --

    async def close(self) -> None:
        """CLOSE_PRODUCER (best effort); pending sends fail."""
        if self.failure is None and self.connection.is_ready:
            request_id = self.connection.next_request_id()
            with contextlib.suppress(LinkError):
                await self.connection.request(
                    commands.close_producer(self.producer_id, request_id), request_id
                )
        self._fail(LinkClosed(f"{self.topic}: producer {self.name!r} closed"))
