"""A namespace's side topic beside real Pulsar: one reader and one writer per gateway,
shared by every synced topic partition of the namespace.

A real Pulsar broker hides markers from every reader, so beside real Pulsar the sync's
markers travel as ordinary messages on ``persistent://<namespace>/georep-subscription-sync``
(``pulsar_port.py``). Subscription names are per topic in Pulsar: readers of the one
side topic may not share one, and reading it once per partition would cost the side
topic's whole retained part per partition. So the gateway holds, per namespace:

- a reader: non-durable, named for this gateway process (``georep.sync.<cluster>.<id>``,
  never another reader's), from the earliest retained entry when it starts and from
  where it stopped when it reconnects; each message is handed, by the topic partition
  its properties name, to that partition's :class:`SideRoute` (``deliver``: never
  waits, so one busy partition cannot hold up the namespace);
- a writer: producer ``georep.sync.<cluster>.<id>``, opened on the first marker; every
  partition's markers go through it (:meth:`SideChannel.write`).

A side message's properties say which partition it is about, its marker kind and the
cluster whose gateway wrote it. Messages of this gateway's own cluster are skipped by
the sync core; messages that are not side messages are counted and skipped.

:class:`SideRoute` is one partition's view of its namespace's channel: the
:class:`~georep.subsync.ports.MarkerRoute` that ``PulsarPort`` gives a partition's sync.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from georep import limits
from georep.client.consumer import InitialPosition, LinkConsumer
from georep.client.errors import LinkError
from georep.client.link import PulsarLink
from georep.client.producer import SendReceipt
from georep.domain.decimal_text import parse_decimal
from georep.domain.position import Position
from georep.domain.topic_name import TopicName
from georep.runtime.retry import Backoff, sync_policy
from georep.snapshots.markers import encode
from georep.subsync.core import WriteMarker
from georep.subsync.ports import LastEntry, MarkerProducer, SideMarker
from georep.wire import pulsar_wire_pb2 as wire

log = logging.getLogger(__name__)

#: The local name of each namespace's side topic.
SIDE_TOPIC = "georep-subscription-sync"
#: Properties of a side message: the topic partition it is about, the marker kind, the
#: cluster whose gateway wrote it.
TOPIC_PROPERTY = "georep.sync.topic"
KIND_PROPERTY = "georep.sync.kind"
SOURCE_PROPERTY = "georep.sync.source"
#: Side markers waiting for one partition's sync; past it the oldest is dropped (each
#: carries a whole state, and states are written again: a later one supersedes it).
SIDE_INBOX_MAX = 1_000


def side_topic(topic: TopicName) -> str:
    """The side topic of ``topic``'s namespace.

    >>> side_topic(TopicName.parse("persistent://t/ns/orders-partition-2"))
    'persistent://t/ns/georep-subscription-sync'
    """
    return f"persistent://{topic.namespace}/{SIDE_TOPIC}"


def is_side_topic(topic: str) -> bool:
    return topic.rpartition("/")[2] == SIDE_TOPIC


def side_producer_name(local_cluster: str, instance: str) -> str:
    """The name this gateway process reads and writes the side topic under: one reader
    and one writer per namespace, never another process's.

    >>> side_producer_name("A", "3f9c")
    'georep.sync.A.3f9c'
    """
    return f"georep.sync.{local_cluster}.{instance}"


class SideMessageError(ValueError):
    """A side message without the properties of one."""


def side_properties(metadata: wire.MessageMetadata) -> tuple[str, int, str]:
    """(topic partition, marker kind, source cluster) of a side message."""
    found = {kv.key: kv.value for kv in metadata.properties}
    try:
        topic, kind, source = found[TOPIC_PROPERTY], found[KIND_PROPERTY], found[SOURCE_PROPERTY]
    except KeyError:
        raise SideMessageError(f"not a side message: {sorted(found)[:8]}") from None
    number = parse_decimal(kind)  # a producer's properties are untrusted
    if number is None:
        raise SideMessageError(f"side message kind {kind[:20]!r} is not a number")
    return topic, number, source


class SideChannel:
    def __init__(
        self,
        namespace: str,
        *,
        local_cluster: str,
        instance: str,
        link: PulsarLink,
        opening: asyncio.Semaphore,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.namespace = namespace
        self.topic = f"persistent://{namespace}/{SIDE_TOPIC}"
        self.local_cluster = local_cluster
        self.name = side_producer_name(local_cluster, instance)
        self._link = link
        self._opening = opening
        self._clock = clock
        self._receivers: dict[str, SideRoute] = {}
        self._task: asyncio.Task[None] | None = None
        self._producer = MarkerProducer(
            link, self.topic, self.name, opening=opening, first_sequence=int(clock() * 1_000_000)
        )
        self._last_read: Position | None = None
        self.connected = False
        self.failures = 0
        self.last_error: str | None = None
        self.stats = {"read": 0, "delivered": 0, "written": 0, "notSide": 0}

    def __repr__(self) -> str:
        return f"SideChannel({self.topic} on {self.local_cluster})"

    # -- partitions --

    def attach(self, topic: str, receiver: SideRoute) -> None:
        self._receivers[topic] = receiver
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=repr(self))

    def detach(self, topic: str) -> None:
        self._receivers.pop(topic, None)

    @property
    def idle(self) -> bool:
        return not self._receivers

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._producer.close()

    # -- writing --

    async def write(self, topic: str, kind: int, payload: bytes) -> asyncio.Future[SendReceipt]:
        """One marker about ``topic`` (a partition of this namespace) on the side topic
        (the future of its receipt: where it sits there); LinkError when it could not be
        written (the caller's sync retries)."""
        metadata = wire.MessageMetadata(publish_time=int(self._clock() * 1000))
        for key, value in (
            (TOPIC_PROPERTY, topic),
            (KIND_PROPERTY, str(kind)),
            (SOURCE_PROPERTY, self.local_cluster),
        ):
            metadata.properties.add(key=key, value=value)
        receipt = await self._producer.send(metadata, payload)
        self.stats["written"] += 1
        return receipt

    # -- reading --

    async def _run(self) -> None:
        backoff = Backoff(sync_policy())
        while True:
            reader = None
            try:
                async with self._opening:
                    reader = await self._subscribe()
                self.connected = True
                self.last_error = None
                backoff.reset()
                await self._read(reader)
            except asyncio.CancelledError:
                raise
            except LinkError as error:
                self._failed(str(error))
            except Exception as error:  # a bug: say so, and do not spin on it
                log.exception("%s: failed", self)
                self._failed(repr(error))
            finally:
                self.connected = False
                if reader is not None:
                    with contextlib.suppress(Exception):
                        await reader.close()
            await backoff.wait()

    def _failed(self, error: str) -> None:
        self.failures += 1
        if error != self.last_error:
            log.warning("%s: %s; retrying", self, error)
        self.last_error = error

    async def _subscribe(self) -> LinkConsumer:
        return await self._link.subscribe(
            self.topic,
            self.name,
            durable=False,
            initial_position=InitialPosition.EARLIEST,
            start_message_id=self._last_read,
            consumer_name=self.name,
        )

    async def _read(self, reader: LinkConsumer) -> None:
        unacked = 0
        while True:
            entry = await reader.receive()
            unacked += entry.messages
            if reader.queued == 0 or unacked >= limits.sync_reader_ack_every_messages:
                reader.ack_cumulative(entry.position)
                unacked = 0
            if self._last_read is not None and entry.position <= self._last_read:
                continue  # a reconnected reader starts at the entry it had read
            self._last_read = entry.position
            self.stats["read"] += 1
            try:
                topic, kind, source = side_properties(entry.metadata)
            except SideMessageError as error:
                self.stats["notSide"] += 1
                log.debug("%s: entry %s skipped: %s", self, entry.position, error)
                continue
            receiver = self._receivers.get(topic)
            if receiver is None or entry.metadata.num_messages_in_batch > 1:
                continue
            receiver.deliver(SideMarker(kind, entry.payload, source, entry.metadata.publish_time))
            self.stats["delivered"] += 1

    async def behind(self, last_entry: LastEntry) -> list[str]:
        """Whether the reader has read every entry the side topic stores (a reason for
        people when not; LinkError when the cluster cannot say how far it stores)."""
        stored = await last_entry(self.topic)
        read = self._last_read
        if stored is None or (read is not None and read >= stored):
            return []
        return [f"side topic {self.topic} read to {read or 'nothing'}, stored to {stored}"]

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "connected": self.connected,
            "partitions": len(self._receivers),
            "failures": self.failures,
            "lastError": self.last_error,
            **self.stats,
        }


class SideRoute:
    """One topic partition's markers on its namespace's side topic: written through the
    channel's one writer, heard through its one reader. The reader hands each marker
    over without waiting; it waits here (at most :data:`SIDE_INBOX_MAX`) until the
    partition's sync takes it, also while that sync's own reader reconnects."""

    def __init__(self, channel: SideChannel, topic: str) -> None:
        self._channel = channel
        self._topic = topic
        self._inbox: collections.deque[SideMarker] = collections.deque()
        self._arrived = asyncio.Event()
        self.dropped = 0

    def start(self) -> None:
        self._channel.attach(self._topic, self)

    def stop(self) -> None:
        self._channel.detach(self._topic)

    async def write(self, marker: WriteMarker) -> asyncio.Future[SendReceipt]:
        """The future of its receipt: where it sits on the side topic, which the side
        topic's replication is measured against (SyncCore.exposure)."""
        payload = encode(marker.kind, marker.message)
        return await self._channel.write(self._topic, int(marker.kind), payload)

    async def close_writer(self) -> None:
        """Nothing to close: the namespace's writer serves every partition."""

    def listeners(
        self, hear: Callable[[SideMarker], Awaitable[None]]
    ) -> list[Coroutine[Any, Any, None]]:
        return [self._listen(hear)]

    async def behind(self, last_entry: LastEntry) -> list[str]:
        """The namespace's reader short of what the side topic stores, and markers about
        this partition it read that the sync has not taken yet."""
        reasons = await self._channel.behind(last_entry)
        if self._inbox:
            reasons.append(f"{len(self._inbox)} side markers not taken by the sync yet")
        return reasons

    def deliver(self, marker: SideMarker) -> None:
        """A marker about this partition from the side topic (never waits)."""
        if len(self._inbox) >= SIDE_INBOX_MAX:
            self._inbox.popleft()
            self.dropped += 1
        self._inbox.append(marker)
        self._arrived.set()

    async def _listen(self, hear: Callable[[SideMarker], Awaitable[None]]) -> None:
        while True:
            if not self._inbox:
                self._arrived.clear()
                await self._arrived.wait()
                continue
            await hear(self._inbox.popleft())
