"""Subscription sync of one topic partition: the gateway's I/O around :class:`SyncCore`.

Per synced topic partition T the gateway of cluster L holds, on L only (public
interfaces: the binary protocol and the admin REST)::

    reader   non-durable subscription georep.sync on T, from the earliest entry:
             every entry (markers included) -> SyncCore.on_entry
    poller   every poll_interval_s: GET .../sync-state of T -> SyncCore.on_state,
             and SyncCore.tick (snapshots)
    writer   producer georep.sync.<L> on T: the markers SyncCore asks for
    applier  POST .../subscription/<s>/sync on L: the states SyncCore asks to apply,
             one at a time, in order, retried until they succeed

The poller and the applier go through the cluster's :class:`~georep.subsync.ports.SyncPort`.
Beside a real Pulsar cluster (``pulsar_port.py``), which hides in-band markers, the
writer publishes on the namespace's side topic instead, and a second reader (non-durable
``georep.sync`` on the side topic, from the earliest entry) hands the markers about T
written by other clusters' gateways to ``SyncCore.on_side_marker``.

The replicators carry the markers between clusters (origin.py routes them). Nothing
lives only in memory that cannot be rebuilt: after a restart (or a lost connection) the
reader starts again from the beginning of T, the indexes and caches are rebuilt from
what T holds, and markers read again are harmless (MDPs never move backwards, ranges
only add, stale snapshot answers are ignored, old requests are not answered).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import Callable, Sequence

from georep import limits
from georep.broker.topic_name import TopicName
from georep.client.consumer import InitialPosition, LinkConsumer, ReceivedEntry
from georep.client.errors import LinkError
from georep.client.link import PulsarLink
from georep.client.producer import LinkProducer
from georep.protocol import pulsar_wire_pb2 as wire
from georep.snapshots.markers import encode
from georep.subsync import pulsar_port
from georep.subsync.core import Apply, SyncCore, WriteMarker
from georep.subsync.ports import SyncPort

log = logging.getLogger(__name__)

READER_SUBSCRIPTION = "georep.sync"
WRITER_PREFIX = "georep.sync."


class TopicSync:
    def __init__(
        self,
        *,
        topic: str,
        core: SyncCore,
        local_link: PulsarLink,
        port: SyncPort,
        connected: Callable[[str], bool],
        retry_s: float = 1.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.topic = topic
        self.topic_name = TopicName.parse(topic)
        self.core = core
        self._link = local_link
        self._port = port
        self._connected = connected
        self._retry_s = retry_s
        self._clock = clock
        self._task: asyncio.Task[None] | None = None
        self._producer: LinkProducer | None = None
        self._next_sequence = 0
        self._applies: collections.deque[Apply] = collections.deque()
        self._apply_wakeup = asyncio.Event()
        self._apply_room = asyncio.Event()
        self._apply_room.set()
        self._was_connected: dict[str, bool] = {}
        self.markers_written: dict[str, int] = {}
        self.apply_failures = 0
        self.last_error: str | None = None
        self.connected = False

    def __repr__(self) -> str:
        return f"TopicSync({self.topic} on {self.core.local_cluster})"

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=repr(self))

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    # -- the loop --

    async def _run(self) -> None:
        while True:
            consumer = side = None
            try:
                consumer = await self._reader(self.topic)
                if self._port.in_band:
                    writes_to = self.topic
                    writer = f"{WRITER_PREFIX}{self.core.local_cluster}"
                else:
                    writes_to = pulsar_port.side_topic(self.topic_name)
                    writer = pulsar_port.side_producer_name(self.core.local_cluster, self.topic)
                    side = await self._reader(writes_to)
                self._producer = await self._link.create_producer(writes_to, writer)
                self._next_sequence = self._producer.last_sequence_id + 1
                self.core.reset()
                self.core.set_sequence_floor(int(self._clock() * 1_000_000))
                self._applies.clear()
                self.connected = True
                self.last_error = None
                await self._serve(consumer, side)
            except asyncio.CancelledError:
                raise
            except (LinkError, ConnectionError) as error:
                self.last_error = str(error)
                log.info("%s: %s; retrying", self, error)
            except Exception as error:  # a bug: say so, and do not spin on it
                self.last_error = repr(error)
                log.exception("%s: failed", self)
            finally:
                self.connected = False
                producer, self._producer = self._producer, None
                for closing in (producer, consumer, side):
                    if closing is not None:
                        with contextlib.suppress(Exception):
                            await closing.close()
            await asyncio.sleep(self._retry_s)

    async def _reader(self, topic: str) -> LinkConsumer:
        return await self._link.subscribe(
            topic,
            READER_SUBSCRIPTION,
            durable=False,
            initial_position=InitialPosition.EARLIEST,
            consumer_name=f"georep-sync-{self.core.local_cluster}",
        )

    async def _serve(self, consumer: LinkConsumer, side: LinkConsumer | None) -> None:
        loop = asyncio.get_running_loop()
        tasks = [
            loop.create_task(self._read(consumer), name=f"{self} read"),
            loop.create_task(self._poll(), name=f"{self} poll"),
            loop.create_task(self._apply_loop(), name=f"{self} apply"),
        ]
        if side is not None:
            tasks.append(loop.create_task(self._read_side(side), name=f"{self} side"))
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    @staticmethod
    def _acknowledge_as_read(consumer: LinkConsumer, entry: ReceivedEntry, unacked: int) -> int:
        """The broker stops dispatching to a consumer past
        ``limits.consumer_unacked_messages_max`` unacknowledged messages; a reader's
        cursor is non-durable, so acknowledging only keeps it flowing. Returns the
        messages still unacknowledged."""
        unacked += entry.messages
        if consumer.queued == 0 or unacked >= limits.sync_reader_ack_every_messages:
            consumer.ack_cumulative(entry.position)
            return 0
        return unacked

    async def _read(self, consumer: LinkConsumer) -> None:
        unacked = 0
        while True:
            entry = await consumer.receive()
            actions = self.core.on_entry(
                entry.position, entry.metadata, entry.payload, self._clock()
            )
            unacked = self._acknowledge_as_read(consumer, entry, unacked)
            if consumer.queued == 0:
                actions += self.core.drain_arrivals()
            await self._perform(actions)

    async def _read_side(self, side: LinkConsumer) -> None:
        """Markers about this topic partition from the side topic (one message each)."""
        unacked = 0
        while True:
            entry = await side.receive()
            unacked = self._acknowledge_as_read(side, entry, unacked)
            try:
                topic, kind, source = pulsar_port.side_properties(entry.metadata)
            except pulsar_port.SideMessageError as error:
                self.core.bad_markers += 1
                log.warning("%s: side entry %s ignored: %s", self, entry.position, error)
                continue
            if topic != self.topic or entry.metadata.num_messages_in_batch > 1:
                continue
            actions = self.core.on_side_marker(
                kind, entry.payload, source, entry.metadata.publish_time
            )
            await self._perform(actions)

    async def _poll(self) -> None:
        while True:
            now = self._clock()
            connected = {}
            for remote in self.core.remotes:
                connected[remote] = self._connected(remote)
                if connected[remote] and not self._was_connected.get(remote, False):
                    self.core.reconnected(remote)
            self._was_connected = connected
            actions = list(self.core.tick(now, connected))
            try:
                states = await self._port.states(self.topic_name)
            except LinkError as error:
                self.last_error = f"subscription states: {error}"
            else:
                actions += self.core.on_state(states, now)
            await self._perform(actions)
            # A topic without a synced subscription (most of them) is asked less often:
            # a subscription opted in later is noticed within the idle interval.
            interval = self.core.settings.poll_interval_s
            if not self.core.sources:
                interval = max(interval, limits.sync_idle_poll_interval_s)
            await asyncio.sleep(interval)

    async def _perform(self, actions: Sequence[WriteMarker | Apply]) -> None:
        for action in actions:
            if isinstance(action, WriteMarker):
                await self._write(action)
            else:
                while len(self._applies) >= limits.sync_pending_applies_max:
                    self._apply_room.clear()
                    await self._apply_room.wait()
                self._applies.append(action)
                self._apply_wakeup.set()

    async def _write(self, action: WriteMarker) -> None:
        producer = self._producer
        if producer is None:
            raise LinkError(f"{self}: no marker producer")
        metadata = wire.MessageMetadata(
            producer_name=producer.name,
            sequence_id=self._next_sequence,
            publish_time=int(self._clock() * 1000),
        )
        if self._port.in_band:
            metadata.marker_type = int(action.kind)
            metadata.replicate_to.extend(action.replicate_to)
        else:
            for key, value in (
                (pulsar_port.TOPIC_PROPERTY, self.topic),
                (pulsar_port.KIND_PROPERTY, str(int(action.kind))),
                (pulsar_port.SOURCE_PROPERTY, self.core.local_cluster),
            ):
                metadata.properties.add(key=key, value=value)
        self._next_sequence += 1
        await producer.send(metadata, encode(action.kind, action.message))
        name = action.kind.name
        self.markers_written[name] = self.markers_written.get(name, 0) + 1

    async def _apply_loop(self) -> None:
        while True:
            if not self._applies:
                self._apply_wakeup.clear()
                await self._apply_wakeup.wait()
                continue
            action = self._applies[0]
            try:
                applied = await self._port.apply(self.topic_name, action)
            except LinkError as error:
                self.apply_failures += 1
                self.last_error = f"applying {action.subscription}: {error}"
                if not getattr(error, "retriable", True):
                    log.warning("%s: dropping a sync of %s: %s", self, action.subscription, error)
                    self._applies.popleft()
                    self._apply_room.set()
                    continue
                await asyncio.sleep(self._retry_s)
                continue
            self._applies.popleft()
            self._apply_room.set()
            self.core.note_applied(action, applied.mark_delete, applied.ranges, self._clock())

    def stats(self) -> dict:
        return {
            "topic": self.topic,
            "connected": self.connected,
            "lastError": self.last_error,
            "markersWritten": dict(self.markers_written),
            "pendingApplies": len(self._applies),
            "applyFailures": self.apply_failures,
            **self.core.stats(),
        }
