"""One producer on a topic: SENDs in, receipts out, in order.

Each SEND becomes an entry of the topic (the frame's headers and payload, stored as
received) unless deduplication (``deduplication.py``) finds its sequence id already
pushed. Every SEND gets exactly one answer, in the order the SENDs arrived, whatever
order storage completes them in: the producer keeps a queue of sends and, whenever one
completes, answers from the head while the head is done. The client relies on this: a
receipt for anything but the oldest pending sequence id makes it drop the connection.

Answers: SEND_RECEIPT with the entry's message id; for a duplicate, SEND_RECEIPT with
message id (-1, -1) as Pulsar does; SEND_ERROR when storage failed (the topic then fences
itself and closes its producers: see ``topic.py`` for when their re-creation is refused
once, so that the client fails what it holds).

Markers (metadata with ``marker_type``) are the gateway's: a producer named ``georep.*``
(``entry.GEOREP_NAME_PREFIX``) publishes them like any entry, metadata stored as sent and
deduplicated by sequence id as usual; any other producer's marker is refused with
SEND_ERROR NotAllowed before deduplication sees it (nothing stored, its sequence id not
taken), and the producer's later sends go on.

A SEND storage can never take (:class:`~georep.broker.errors.MessageNeverStored`): an
entry (metadata + payload) above ``limits.pulsar_message_bytes_max +
limits.pulsar_message_metadata_bytes_max``, which only a producer ignoring the announced
maximum or carrying kilobytes of properties can send, or a chunk of a chunked message
(``chunking_enabled=True``: not supported, refused at once). Nothing is stored and the
topic is not fenced (its other producers never notice). A SEND_ERROR would not do: the
official client answers any send error but a checksum error by reconnecting and sending
again, for ever. So the broker closes this producer (CLOSE_PRODUCER) and refuses its
re-creation once with ``ProducerBlockedQuotaExceededException``, which the client
treats as final for the sends it holds: they fail at once with that error, and the
client's next re-creation is accepted. Example: a producer sends m1, a 6 MiB chunked
m2, m3: m1 is stored, m2 and m3 fail in the application, m4 sent after is stored.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from georep import limits
from georep.broker.deduplication import DupStatus, MessageDeduplication, highest_sequence_id
from georep.broker.entry import GEOREP_NAME_PREFIX, is_georep_name
from georep.broker.errors import BrokerError, MessageNeverStored, NotAllowed, PersistenceError
from georep.broker.message_id import message_id
from georep.broker.rate_meter import RateMeter
from georep.domain.position import Position
from georep.domain.topic_name import TopicName
from georep.wire import commands
from georep.wire import pulsar_wire_pb2 as pb

if TYPE_CHECKING:
    from georep.wire.frames import Frame

log = logging.getLogger(__name__)

_DUPLICATE_ID = Position(-1, -1)


class ProducerTopic(Protocol):
    """What a producer needs of its topic (``topic.PersistentTopic``, which holds its
    producers and so sits above this module)."""

    @property
    def name(self) -> TopicName: ...

    @property
    def dedup(self) -> MessageDeduplication: ...

    @property
    def rate_window_s(self) -> int: ...

    @property
    def rate_in(self) -> RateMeter: ...

    def publish(
        self, producer_name: str, highest_sequence_id: int, data: bytes
    ) -> asyncio.Future[Position]: ...

    def remove_producer(self, producer: Producer) -> None: ...


class ProducerConnection(Protocol):
    """What a producer needs of the connection it was opened on."""

    @property
    def peer(self) -> str: ...

    def send_command(self, command: pb.BaseCommand) -> None: ...

    def publish_started(self) -> None: ...

    def publish_finished(self) -> None: ...

    def refuse_producer(self, producer: Producer, reason: str) -> None: ...

    def close_producer_from_broker(self, producer: Producer) -> None: ...


@dataclass(slots=True)
class _PendingSend:
    sequence_id: int
    highest_sequence_id: int
    #: Resolves to the entry's position, or None for a duplicate.
    future: asyncio.Future[Position] | asyncio.Future[None]


class Producer:
    def __init__(
        self,
        *,
        topic: ProducerTopic,
        connection: ProducerConnection,
        producer_id: int,
        name: str,
        access_mode: int = pb.PRODUCER_ACCESS_SHARED,
        user_provided_name: bool = True,
    ) -> None:
        self.topic = topic
        self.connection = connection
        self.producer_id = producer_id
        self.name = name
        self.access_mode = access_mode
        self.user_provided_name = user_provided_name
        self.closed = False
        self._pending: collections.deque[_PendingSend] = collections.deque()
        self.stats = {"messages_in": 0, "entries_in": 0, "bytes_in": 0, "duplicates": 0}
        #: msgRateIn / msgThroughputIn: the counters above over the stats window
        self.rate_in = RateMeter(topic.rate_window_s)

    def __repr__(self) -> str:
        return f"Producer({self.producer_id} {self.name!r} on {self.topic.name})"

    @property
    def pending_count(self) -> int:
        return len(self._pending)

    def send(self, frame: Frame) -> None:
        """Take one SEND; its answer comes later, in order."""
        send = frame.command.send
        sequence_id = send.sequence_id
        highest = highest_sequence_id(
            sequence_id,
            send.highest_sequence_id,
            send.num_messages,
            highest_given=send.HasField("highest_sequence_id"),
        )
        loop = asyncio.get_running_loop()
        dedup = self.topic.dedup
        refusal = self._refusal(frame)
        if isinstance(refusal, MessageNeverStored):
            log.warning("%r: %s; closing the producer so its client fails the send", self, refusal)
            self.connection.refuse_producer(self, str(refusal))
            return
        status = dedup.check(self.name, sequence_id) if refusal is None else None
        future: asyncio.Future[Position] | asyncio.Future[None]
        if refusal is not None:
            future = loop.create_future()
            future.set_exception(refusal)
        elif status is DupStatus.DUPLICATE:
            duplicate: asyncio.Future[None] = loop.create_future()
            duplicate.set_result(None)
            future = duplicate
            self.stats["duplicates"] += 1
        elif status is DupStatus.IN_FLIGHT:
            original: asyncio.Future[None] = loop.create_future()
            waiter = dedup.wait_persisted(self.name, highest)
            waiter.add_done_callback(functools.partial(_chain, target=original))
            future = original
            self.stats["duplicates"] += 1
        else:
            try:
                future = self.topic.publish(self.name, highest, frame.headers_and_payload)
            except BrokerError as error:
                future = loop.create_future()
                future.set_exception(error)
            else:
                messages, size = max(1, send.num_messages), len(frame.headers_and_payload)
                self.stats["messages_in"] += messages
                self.stats["entries_in"] += 1
                self.stats["bytes_in"] += size
                self.rate_in.record(messages, size)
                self.topic.rate_in.record(messages, size)
        self._pending.append(_PendingSend(sequence_id, highest, future))
        self.connection.publish_started()
        future.add_done_callback(self._answer_ready)

    def _refusal(self, frame: Frame) -> BrokerError | None:
        """Why this SEND may not be stored, or None."""
        metadata = frame.metadata
        entry_bytes = len(frame.headers_and_payload)
        stored_max = (
            limits.entry_payload_bytes_max
            if is_georep_name(self.name)
            else limits.pulsar_message_bytes_max + limits.pulsar_message_metadata_bytes_max
        )
        if entry_bytes > stored_max:
            return MessageNeverStored(
                f"message of {entry_bytes} bytes with its metadata can never be stored:"
                f" the payload may have {limits.pulsar_message_bytes_max} bytes and the"
                f" metadata {limits.pulsar_message_metadata_bytes_max}"
            )
        if frame.command.send.is_chunk or (
            metadata is not None and metadata.num_chunks_from_msg > 1
        ):
            return MessageNeverStored(
                "chunked messages are not supported: send messages of at most"
                f" {limits.pulsar_message_bytes_max} bytes with chunking disabled"
            )
        if metadata is not None and metadata.HasField("marker_type"):
            if not is_georep_name(self.name):
                return NotAllowed(
                    f"producer {self.name!r} may not publish markers (marker_type"
                    f" {metadata.marker_type}): only the gateway's producers, named"
                    f" {GEOREP_NAME_PREFIX}*, may"
                )
        return None

    def _answer_ready(self, _future: asyncio.Future[Any]) -> None:
        while self._pending and self._pending[0].future.done():
            pending = self._pending.popleft()
            self.connection.publish_finished()
            if self.closed:
                continue
            self.connection.send_command(self._answer(pending))

    def _answer(self, pending: _PendingSend) -> pb.BaseCommand:
        future = pending.future
        error = future.exception() if not future.cancelled() else PersistenceError("cancelled")
        if error is not None:
            server_error = (
                error.server_error if isinstance(error, BrokerError) else pb.PERSISTENCE_ERROR
            )
            return commands.send_error(
                self.producer_id, pending.sequence_id, server_error, str(error) or repr(error)
            )
        position = future.result()
        if position is None:
            data = message_id(_DUPLICATE_ID)
        else:
            data = message_id(position, self.topic.name.partition_index)
        return commands.send_receipt(
            self.producer_id, pending.sequence_id, data, pending.highest_sequence_id
        )

    def close(self) -> None:
        """Stop answering: the client closed the producer or its connection is gone.
        Sends in flight still complete in storage."""
        if not self.closed:
            self.closed = True
            self.topic.remove_producer(self)


def _chain(source: asyncio.Future[None], target: asyncio.Future[None]) -> None:
    if target.done():
        return
    if source.cancelled():
        target.cancel()
    elif (error := source.exception()) is not None:
        target.set_exception(error)
    else:
        target.set_result(None)
