"""What subscription sync needs of the local cluster, and how georep's own clusters give it.

A gateway syncs subscriptions on the cluster beside it through one :class:`SyncPort`:

- ``states``: every subscription's acknowledgement state on a topic partition;
- ``apply``: bring one subscription up to the state another cluster sent;
- ``changes``: which topics of a namespace had subscriptions change since the last
  call (``change_watch.py`` asks, one watch per namespace), so that an idle topic is never
  asked for its states;
- ``markers``: where a topic partition's markers travel (a :class:`MarkerRoute`). A
  georep cluster shows markers to the gateway's reader, so they sit in the topic itself
  (``in_band``); a real Pulsar broker hides every marker from every reader, so beside
  real Pulsar they travel on the namespace's side topic (``pulsar_port.py``,
  ``side_channel.py``). The sync core decides by ``in_band`` what it can do (snapshots
  need markers in the topic); the sync itself only hands markers to its route.

:class:`GeorepPort` is the georep cluster's answer: its own admin paths
(``/admin/georep/v1/.../sync-state``, ``.../subscription/{s}/sync``, and the namespace's
change feed ``/admin/georep/v1/namespaces/{t}/{ns}/sync-changes``, a long poll that the
broker answers as acknowledgements happen: ``broker/change_feed.py``), and markers in
band (:class:`InBandRoute`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from georep import limits
from georep.client.admin import ClusterAdminClient
from georep.client.errors import LinkError
from georep.client.link import PulsarLink
from georep.client.producer import LinkProducer, SendReceipt
from georep.domain.position import Position
from georep.domain.topic_name import TopicName
from georep.snapshots.markers import encode
from georep.subsync.core import Apply, SubscriptionState, WriteMarker
from georep.wire import pulsar_wire_pb2 as wire

#: The in-band marker producer's name is this and the local cluster's.
WRITER_PREFIX = "georep.sync."


@dataclass(frozen=True, slots=True)
class Applied:
    """What the cluster said after an apply: its mark-delete position (None: not said)
    and how many acknowledged ranges the subscription holds (or acknowledgements sent)."""

    mark_delete: Position | None
    ranges: int


#: What a port remembers between two ``changes`` of one namespace: each port's own type
#: (:data:`FeedMark` of a georep cluster's change feed, a scan number beside Pulsar),
#: handed back to it as it gave it.
Mark = TypeVar("Mark")

#: Where a georep cluster's change feed goes on from: its epoch and the last sequence read.
FeedMark = tuple[str | None, int]


@dataclass(frozen=True, slots=True)
class Changed(Generic[Mark]):
    """An answer of ``SyncPort.changes``: where to go on from, and the topics (full
    names) whose subscriptions changed; None: any may have (read them all once)."""

    mark: Mark
    topics: frozenset[str] | None


#: The last entry a topic of the local cluster stores, markers included (None: none);
#: LinkError when the cluster cannot say (``ClusterAdminClient.last_entry``).
LastEntry = Callable[[str], Awaitable[Position | None]]


@dataclass(frozen=True, slots=True)
class SideMarker:
    """A marker that another cluster's gateway wrote beside a topic partition rather than
    in it: its kind, its encoded payload, the cluster that wrote it and when (ms)."""

    kind: int
    payload: bytes
    source: str
    written_ms: int


class MarkerRoute(Protocol):
    """Where one topic partition's sync writes its markers, and how it hears the markers
    of other clusters that its reader of the topic does not see."""

    #: Markers heard but dropped before the sync took them (too many waiting).
    dropped: int

    def start(self) -> None:
        """The sync started: hear markers from now on, also while its reader reconnects."""
        ...

    def stop(self) -> None:
        """The sync stopped: hear no more."""
        ...

    async def write(self, marker: WriteMarker) -> asyncio.Future[SendReceipt] | None:
        """One marker; LinkError when it could not be written (the sync attaches again).
        The future of its receipt: where it sits on the topic markers travel on (the
        topic itself in band, the namespace's side topic beside it); None: not known."""
        ...

    async def close_writer(self) -> None:
        """The sync's reader detached: close what writing opened (the next marker opens
        it again), so that a new attachment starts afresh."""
        ...

    def listeners(
        self, hear: Callable[[SideMarker], Awaitable[None]]
    ) -> list[Coroutine[Any, Any, None]]:
        """What the sync runs while its reader is attached so that ``hear`` gets the
        markers the reader does not see (none when every marker is in the topic); a
        failure of one fails the attachment, as the reader's would."""
        ...

    async def behind(self, last_entry: LastEntry) -> list[str]:
        """What of the markers the local cluster stores for this partition beside the
        topic has not reached its sync yet, each said for people (empty: all has)."""
        ...


class SyncPort(Protocol[Mark]):
    #: Markers sit in the topic itself, in order with its entries (a georep cluster), or
    #: travel beside it (real Pulsar): the sync core takes snapshots only in band.
    in_band: bool

    async def states(self, topic: TopicName) -> dict[str, SubscriptionState]: ...

    async def apply(self, topic: TopicName, action: Apply) -> Applied: ...

    async def changes(self, namespace: str, mark: Mark | None) -> Changed[Mark]:
        """Waits for the next changes in ``namespace`` after ``mark`` (None: the first
        call, answered at once with every topic). LinkError when the cluster could not
        say: changes may have been missed, so the next call starts again from None."""
        ...

    def markers(self, topic: TopicName) -> MarkerRoute:
        """The route of ``topic``'s markers, for its sync (one per sync)."""
        ...

    async def close_idle(self) -> None:
        """Let go of what markers share and no running sync uses any more."""
        ...

    async def stop(self) -> None:
        """Stop what the port runs for every topic (the gateway stops)."""
        ...

    def marker_channels(self) -> list[dict[str, Any]]:
        """Stats of what many topics' markers share (``sideChannels`` of the stats)."""
        ...

    def problems(self) -> list[str]:
        """What keeps markers from travelling (``/health`` degraded)."""
        ...

    def change_stats(self) -> dict[str, Any]:
        """Stats of how this cluster's changes are found (``changes`` of the stats)."""
        ...


class GeorepPort:
    """A georep cluster: state and apply over its own admin paths, markers in band; its
    change mark is the feed's (:data:`FeedMark`): ``SyncPort[FeedMark]``."""

    in_band = True

    def __init__(
        self,
        admin: ClusterAdminClient,
        link: PulsarLink,
        *,
        local_cluster: str,
        opening: asyncio.Semaphore,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._admin = admin
        self._link = link
        self._writer_name = f"{WRITER_PREFIX}{local_cluster}"
        self._opening = opening
        self._clock = clock

    def markers(self, topic: TopicName) -> InBandRoute:
        return InBandRoute(
            self._link, str(topic), self._writer_name, opening=self._opening, clock=self._clock
        )

    async def close_idle(self) -> None:
        """Nothing is shared: each route's producer is its own."""

    async def stop(self) -> None:
        """Nothing runs for every topic."""

    def marker_channels(self) -> list[dict[str, Any]]:
        return []

    def problems(self) -> list[str]:
        return []

    def change_stats(self) -> dict[str, Any]:
        return {"feed": "per-namespace change feed of the cluster"}

    async def changes(self, namespace: str, mark: FeedMark | None) -> Changed[FeedMark]:
        epoch, after = (None, 0) if mark is None else mark
        answer = await self._admin.sync_changes(
            namespace, epoch=epoch, after=after, wait_s=limits.sync_change_wait_s
        )
        after_this: FeedMark = (answer["epoch"], answer["sequence"])
        return Changed(after_this, None if answer["reset"] else frozenset(answer["topics"]))

    async def states(self, topic: TopicName) -> dict[str, SubscriptionState]:
        answer = await self._admin.sync_state(topic)
        return {
            name: SubscriptionState(
                mark_delete=state.mark_delete,
                ranges=state.ranges,
                batches=state.batches,
                consumers=state.consumers,
                consumers_attached=state.consumers_attached,
                replicated=state.replicated,
            )
            for name, state in answer["subscriptions"].items()
        }

    async def apply(self, topic: TopicName, action: Apply) -> Applied:
        answer = await self._admin.sync_subscription(
            topic,
            action.subscription,
            mark_delete=action.mark_delete,
            ranges=action.ranges,
            batches=action.batches,
            replicated=True,
        )
        mark_delete = answer.get("markDelete")
        where = Position(mark_delete["ledgerId"], mark_delete["entryId"]) if mark_delete else None
        return Applied(where, answer.get("rangesCount", 0))


class MarkerProducer:
    """The gateway's one producer of sync markers on a topic, opened on the first marker
    (an idle topic has none) and again once it failed; its sequence ids continue past
    the last one the broker holds of that producer name, so a reopened producer is not
    taken for a duplicate of its own earlier markers."""

    def __init__(
        self,
        link: PulsarLink,
        topic: str,
        name: str,
        *,
        opening: asyncio.Semaphore,
        first_sequence: int = 0,
    ) -> None:
        self._link = link
        self._topic = topic
        self._name = name
        self._opening = opening
        self._producer: LinkProducer | None = None
        self._lock = asyncio.Lock()
        self._next_sequence = first_sequence

    async def send(
        self, metadata: wire.MessageMetadata, payload: bytes
    ) -> asyncio.Future[SendReceipt]:
        """``metadata`` given its producer name and the next sequence id, then sent (the
        future of its receipt); LinkError when it could not be (the producer is opened
        again next time)."""
        async with self._lock:
            producer = self._producer
            if producer is None or producer.failed:
                async with self._opening:
                    producer = await self._link.create_producer(self._topic, self._name)
                self._next_sequence = max(self._next_sequence, producer.last_sequence_id + 1)
                self._producer = producer
        metadata.producer_name = producer.name
        metadata.sequence_id = self._next_sequence
        self._next_sequence += 1
        try:
            return await producer.send(metadata, payload)
        except LinkError:
            if self._producer is producer:
                self._producer = None
            raise

    async def close(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            with contextlib.suppress(LinkError, OSError):  # closing what may be gone
                await producer.close()


class InBandRoute:
    """Markers in the topic itself, written by producer ``georep.sync.<cluster>`` opened on
    the first marker (an idle topic has none). The replicators carry them to the other
    clusters, and other clusters' markers reach this one the same way, where the sync's
    own reader of the topic reads them: nothing else to listen to."""

    dropped = 0

    def __init__(
        self,
        link: PulsarLink,
        topic: str,
        name: str,
        *,
        opening: asyncio.Semaphore,
        clock: Callable[[], float],
    ) -> None:
        self._producer = MarkerProducer(link, topic, name, opening=opening)
        self._clock = clock

    def start(self) -> None:
        """Markers are heard by the sync's reader."""

    def stop(self) -> None:
        """Markers are heard by the sync's reader."""

    def listeners(
        self, hear: Callable[[SideMarker], Awaitable[None]]
    ) -> list[Coroutine[Any, Any, None]]:
        return []

    async def behind(self, last_entry: LastEntry) -> list[str]:
        """Nothing beside the topic: the sync's reader of it reads every marker."""
        return []

    async def write(self, marker: WriteMarker) -> asyncio.Future[SendReceipt]:
        metadata = wire.MessageMetadata(
            publish_time=int(self._clock() * 1000), marker_type=int(marker.kind)
        )
        metadata.replicate_to.extend(marker.replicate_to)
        return await self._producer.send(metadata, encode(marker.kind, marker.message))

    async def close_writer(self) -> None:
        await self._producer.close()
