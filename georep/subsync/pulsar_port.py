"""Subscription sync beside a real Apache Pulsar cluster, through its public interfaces.

A real Pulsar broker offers none of georep's sync paths, and hides every marker from
every reader. So, beside real Pulsar (``kind = "pulsar"`` in the gateway's ``[local]``
table; docs/SUBSYNC.md "Beside real Pulsar"):

- **State** is read over admin v2: ``internalStats`` gives each cursor's
  ``markDeletePosition`` and ``individuallyDeletedMessages``; ``stats`` gives each
  subscription's consumers and Pulsar's ``isReplicated`` flag. Cursors of Pulsar's own
  replicators (``pulsar.*``), the gateway's own (``georep.*``) and readers (no
  subscription in ``stats``) are left out, and so is the gateway's acknowledger among
  the consumers.
- **Apply** acknowledges exact entries with a consumer of the gateway's own
  (:data:`ACKNOWLEDGER`): Shared, asking for no messages (receiver queue 0, so the
  broker dispatches nothing to it), attached only for the apply. It acknowledges each
  entry of the plan's ranges that the cursor does not hold yet, then closes: the broker
  handles the acknowledgements before the close. Pulsar 4.0 has no admin call that
  acknowledges given entries, and moving a cursor with ``resetcursor`` would disturb
  the application's consumers.
- **Markers** go on the namespace's side topic (``side_channel.side_topic``) as ordinary
  messages: payload the marker, properties the topic partition, the kind and the source
  cluster. Pulsar's geo-replication (or the gateway's replicators) carry it like any
  topic of the namespace. One reader and one writer per namespace
  (``side_channel.SideChannel``), which the port holds and hands each partition's sync a
  view of (``SideRoute``).
- **Changes** come from one read of the broker's Prometheus page every
  ``limits.sync_pulsar_scan_interval_s`` (:class:`MetricsScan`), shared by every
  namespace: per subscription its backlog, consumers, last acknowledgement and last
  mark-delete move; a topic any of whose application subscriptions shows another value
  than at the previous read has changed, and only its ``internalStats`` and ``stats`` are
  read. Measured on Pulsar 4.0.7 (``bench/README.md``): ``broker-stats/topics`` is
  refreshed only every ``statsUpdateFrequencyInSecs`` (60 s by default), and
  ``partitioned-stats`` or ``stats`` cost a request per topic, so the Prometheus page
  (topic-level metrics are on by default) is the one bulk read that is both fresh and
  one request. It grows with every topic on the broker, so between pages the few topics
  that moved lately are read alone (hot topics, :class:`MetricsScan`).

What cannot be synced here, and why: partially acknowledged batches (``internalStats``
does not show batch indexes, so a batch counts as acknowledged only when all of it is,
and a failover redelivers the rest of it), and a subscription whose application holds
it Exclusive or Failover on this cluster (the acknowledger cannot attach: it is the
source now, and what the other cluster sent is dropped).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import math
import re
import time
from collections.abc import Callable, Iterator, Set
from typing import Any

from georep import limits
from georep.client.admin import ClusterAdminClient
from georep.client.consumer import InitialPosition, SubType
from georep.client.errors import LinkError, ServerError
from georep.client.link import PulsarLink
from georep.domain.position import Position
from georep.domain.topic_name import TopicName
from georep.pulsar_text.cursor import acknowledged, parse_cursor
from georep.runtime.retry import Backoff, sync_policy
from georep.subsync.core import Apply, SubscriptionState
from georep.subsync.ports import Applied, Changed
from georep.subsync.side_channel import SideChannel, SideRoute, is_side_topic
from georep.wire import pulsar_wire_pb2 as wire

log = logging.getLogger(__name__)

#: The consumer name of the gateway's acknowledger (left out of consumer counts).
ACKNOWLEDGER = "georep-acknowledger"
#: Subscriptions that are never an application's.
_NOT_APPLICATIONS = ("georep.", "pulsar.")


def pulsar_states(internal: dict[str, Any], stats: dict[str, Any]) -> dict[str, SubscriptionState]:
    """Every application subscription's state from ``internalStats`` and ``stats``.

    >>> internal = {"cursors": {
    ...     "s": {"markDeletePosition": "3:4", "individuallyDeletedMessages": "[(3:5..3:7]]"},
    ...     "pulsar.repl.B": {"markDeletePosition": "3:9", "individuallyDeletedMessages": "[]"}}}
    >>> stats = {"subscriptions": {"s": {"isReplicated": True, "consumers": [
    ...     {"consumerName": "app"}, {"consumerName": "georep-acknowledger"}]}}}
    >>> state = pulsar_states(internal, stats)["s"]
    >>> state.mark_delete, state.ranges, state.consumers, state.replicated
    (Position(ledger_id=3, entry_id=4), ((Position(ledger_id=3, entry_id=6), \
Position(ledger_id=3, entry_id=7)),), 1, True)
    """
    subscriptions = stats.get("subscriptions") or {}
    out: dict[str, SubscriptionState] = {}
    for name, cursor in (internal.get("cursors") or {}).items():
        subscription = subscriptions.get(name)
        if subscription is None or name.startswith(_NOT_APPLICATIONS):
            continue
        try:
            mark_delete, ranges = parse_cursor(cursor)
        except (KeyError, TypeError, ValueError) as error:
            log.warning("cursor %s: unreadable state (%s); left out", name, error)
            continue
        consumers = [
            c for c in subscription.get("consumers") or () if c.get("consumerName") != ACKNOWLEDGER
        ]
        out[name] = SubscriptionState(
            mark_delete=mark_delete,
            # Closed ranges, as the sync core keeps them: the entry after the lower end.
            ranges=tuple(
                (Position(lower.ledger_id, lower.entry_id + 1), upper) for lower, upper in ranges
            ),
            consumers=len(consumers),
            replicated=bool(subscription.get("isReplicated")),
        )
    return out


def entries_to_acknowledge(action: Apply, cursor: dict[str, Any] | None) -> list[Position]:
    """The entries of ``action``'s ranges that ``cursor`` (internalStats; None: no such
    subscription yet) does not hold, lowest first, at most
    ``limits.sync_pulsar_apply_entries_max``. Each range lies in one ledger (the sync
    core maps ranges run by run); one that does not is skipped.

    >>> action = Apply("s", "A", ranges=[((3, 2), (3, 6)), ((5, 0), (5, 1))])
    >>> cursor = {"markDeletePosition": "3:2", "individuallyDeletedMessages": "[(3:3..3:5]]"}
    >>> [str(p) for p in entries_to_acknowledge(action, cursor)]
    ['3:3', '3:6', '5:0', '5:1']
    """
    mark_delete, ranges = parse_cursor(cursor) if cursor is not None else (Position.EARLIEST, [])
    out: list[Position] = []
    for first, last in action.ranges:
        if first[0] != last[0]:
            log.warning("range %s..%s spans ledgers; not applied", first, last)
            continue
        for entry_id in range(first[1], last[1] + 1):
            where = Position(first[0], entry_id)
            if not acknowledged(where, mark_delete, ranges):
                out.append(where)
                if len(out) >= limits.sync_pulsar_apply_entries_max:
                    return out
    return out


class ApplyRefused(LinkError):
    """The subscription is held by the application's own Exclusive or Failover consumer
    here: this cluster is the source now; what another cluster sent is dropped."""

    retriable = False


#: The Prometheus families that say a subscription moved, and their label syntax.
_SIGNALS = (
    "pulsar_subscription_back_log{",
    "pulsar_subscription_consumers_count{",
    "pulsar_subscription_last_acked_timestamp{",
    "pulsar_subscription_last_mark_delete_advanced_timestamp{",
)
#: A subscription's ``_SIGNALS``, in that order (None: not shown).
Signals = tuple[float | None, ...]
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
#: Subscriptions never an application's, as they appear on the page (checked again on
#: the parsed labels; this only saves parsing their lines).
_SKIPPED = tuple(f'subscription="{prefix}' for prefix in _NOT_APPLICATIONS)
#: Scans (pages and hot rounds) whose changes are kept for watches that fell behind:
#: about 13 s at a 1 s page and 0.2 s hot rounds.
_SCANS_KEPT = 64


def subscription_signals(text: str, namespaces: Set[str]) -> dict[tuple[str, str], Signals]:
    """(topic, subscription) -> the values of its ``_SIGNALS`` on a Prometheus page, for
    applications' subscriptions of ``namespaces``.

    >>> page = '\\n'.join([
    ...     'pulsar_subscription_back_log{cluster="A",namespace="t/ns",topic="persistent://t/ns/x",'
    ...     'subscription="app"} 4',
    ...     'pulsar_subscription_back_log{cluster="A",namespace="t/ns",topic="persistent://t/ns/x",'
    ...     'subscription="georep.sync"} 0',
    ...     'pulsar_topics_count{cluster="A"} 3'])
    >>> subscription_signals(page, {"t/ns"})
    {('persistent://t/ns/x', 'app'): (4.0, None, None, None)}
    """
    found: dict[tuple[str, str], list[float | None]] = {}
    for family, line in _signal_lines(text):
        if any(skip in line for skip in _SKIPPED):
            continue
        labels_end = line.rfind("}")
        labels = dict(_LABEL.findall(line, line.index("{"), labels_end))
        topic, subscription = labels.get("topic"), labels.get("subscription")
        if (
            topic is None
            or subscription is None
            or labels.get("namespace") not in namespaces
            or subscription.startswith(_NOT_APPLICATIONS)
            or is_side_topic(topic)
        ):
            continue
        values = found.setdefault((topic, subscription), [None] * len(_SIGNALS))
        values[family] = _number(line[labels_end + 1 :].split(maxsplit=1)[0])
    return {key: tuple(values) for key, values in found.items()}


def stats_signals(stats: dict[str, Any]) -> dict[str, Signals]:
    """Subscription -> the ``_SIGNALS`` of each application subscription in a topic's
    ``stats``, as :func:`subscription_signals` reads them off the page (consumers all
    counted, the acknowledger too, as the page does).

    >>> stats = {"subscriptions": {
    ...     "app": {"msgBacklog": 2, "consumers": [{}], "lastAckedTimestamp": 17,
    ...             "lastMarkDeleteAdvancedTimestamp": 15},
    ...     "pulsar.repl.B": {"msgBacklog": 0}}}
    >>> stats_signals(stats)
    {'app': (2.0, 1.0, 17.0, 15.0)}
    """
    out: dict[str, Signals] = {}
    for name, subscription in (stats.get("subscriptions") or {}).items():
        if name.startswith(_NOT_APPLICATIONS) or not isinstance(subscription, dict):
            continue
        out[name] = (
            _number(subscription.get("msgBacklog")),
            _number(len(subscription.get("consumers") or ())),
            _number(subscription.get("lastAckedTimestamp")),
            _number(subscription.get("lastMarkDeleteAdvancedTimestamp")),
        )
    return out


def _number(value: Any) -> float | None:
    """A figure as a float; None for one that is absent, unreadable or not a number (NaN
    would never equal itself, and so always look moved)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def _signal_lines(text: str) -> Iterator[tuple[int, str]]:
    """The lines of ``_SIGNALS`` on a page, each with its family's index, without a loop
    over every line: a page of
    2,000 topic partitions is about 25 MB and 190,000 lines. The exposition format keeps
    a family's lines together (each block ends where a comment line begins), so each
    block is found with ``str.find``; a family whose lines come in several blocks is
    still read whole, block by block.

    >>> page = "# TYPE a gauge\\na 1\\n# TYPE pulsar_subscription_back_log gauge\\n" \\
    ...     "pulsar_subscription_back_log{x=\\"1\\"} 4\\n# TYPE b gauge\\nb 2\\n"
    >>> list(_signal_lines(page))
    [(0, 'pulsar_subscription_back_log{x="1"} 4')]
    """
    text = "\n" + text
    for index, family in enumerate(_SIGNALS):
        at = 0
        while (start := text.find("\n" + family, at)) >= 0:
            end = text.find("\n#", start + 1)
            end = len(text) if end < 0 else end
            for line in text[start + 1 : end].splitlines():
                if line.startswith(family):
                    yield index, line
            at = end


class MetricsScan:
    """Which topics' subscriptions moved: one Prometheus page per interval for every
    namespace watched (see the module docstring), and, between pages, the ``stats`` of
    the few topics that moved lately.

    **Hot topics.** A page costs more with every topic on the broker (about 0.5 s to serve
    and 0.15 s to read at 2,000 partitions), so an acknowledgement waits for the next page
    and its read. A topic whose subscriptions moved within ``limits.sync_pulsar_hot_window_s``
    (a subscription made, a message published, one acknowledged) is also looked at alone,
    a ``stats`` request every ``limits.sync_pulsar_hot_interval_s``, as a live consumer's
    acknowledgements usually follow what it was just sent: the cost follows the traffic,
    and an idle topic costs nothing beyond its lines on the page. At most ``hot_topics_max``
    topics are hot (the least recently moved leave first: a WARNING and ``hotDropped`` say
    so; they are still seen on every page), and the rounds are paced to at most
    ``hot_requests_per_s`` requests. A namespace's first page is its baseline: nothing in
    it is hot for being new to the scan.
    """

    def __init__(
        self,
        admin: ClusterAdminClient,
        interval_s: float,
        *,
        hot_topics_max: int = limits.sync_pulsar_hot_topics_max,
        hot_requests_per_s: float = limits.sync_pulsar_hot_requests_per_s,
        synced: Callable[[str], bool] = lambda _topic: True,
    ) -> None:
        """``synced`` says whether this gateway process syncs a topic partition: only
        those can be hot (several instances share a namespace's partitions)."""
        self._admin = admin
        self._interval_s = interval_s
        self._hot_topics_max = hot_topics_max
        self._hot_requests_per_s = hot_requests_per_s
        self._synced = synced
        self.namespaces: set[str] = set()
        self.number = 0
        self._signals: dict[tuple[str, str], Signals] = {}
        self._paged_namespaces: frozenset[str] = frozenset()
        #: (scan number, namespace -> topics changed in it; None: the scan failed)
        self._scans: collections.deque[tuple[int, dict[str, set[str]] | None]] = collections.deque(
            maxlen=_SCANS_KEPT
        )
        self._scanned = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        #: hot topic -> when it last moved (monotonic seconds), least recent first
        self._hot: dict[str, float] = {}
        #: hot topic -> its subscriptions' signals when last looked at (page or stats)
        self._hot_signals: dict[str, dict[str, Signals]] = {}
        self._hot_wake = asyncio.Event()
        self._hot_full = False
        self.last_error: str | None = None
        self.stats = {
            "scans": 0,
            "failures": 0,
            "bytes": 0,
            "hotRounds": 0,
            "hotRequests": 0,
            "hotChanges": 0,
            "hotDropped": 0,
        }

    def to_json(self) -> dict[str, Any]:
        return {
            **self.stats,
            "intervalS": self._interval_s,
            "hotTopics": len(self._hot),
            "hotTopicsMax": self._hot_topics_max,
            "lastError": self.last_error,
        }

    def hot_topics(self) -> list[str]:
        """The hot topics, least recently moved first."""
        return list(self._hot)

    async def changes(self, namespace: str, mark: int | None) -> Changed[int]:
        self.namespaces.add(namespace)
        if not self._tasks:
            loop = asyncio.get_running_loop()
            self._tasks = [
                loop.create_task(self._run(), name="metrics scan"),
                loop.create_task(self._run_hot(), name="hot topics"),
            ]
        if mark is None:
            return Changed(self.number, None)
        while self.number <= mark:
            self._scanned.clear()
            await self._scanned.wait()
        topics: set[str] = set()
        kept = [number for number, _ in self._scans]
        if not kept or kept[0] > mark + 1:
            return Changed(self.number, None)  # fell behind what is kept
        for number, changed in self._scans:
            if number <= mark:
                continue
            if changed is None:
                raise LinkError(f"subscription stats: {self.last_error}")
            topics |= changed.get(namespace, set())
        return Changed(self.number, frozenset(topics))

    def _publish(self, changed: dict[str, set[str]] | None) -> None:
        self.number += 1
        self._scans.append((self.number, changed))
        self._scanned.set()

    async def _run(self) -> None:
        # A page every interval; while the admin REST fails, the retry policy's waits
        # (when longer) space the attempts out.
        backoff = Backoff(sync_policy())
        while True:
            wait_s = self._interval_s
            try:
                changed: dict[str, set[str]] | None = await self._scan()
                backoff.reset()
            except LinkError as error:
                self.stats["failures"] += 1
                if str(error) != self.last_error:
                    log.warning("reading subscription stats: %s", error)
                self.last_error = str(error)
                changed = None
                wait_s = max(wait_s, backoff.next_delay_s(error))
            self._publish(changed)
            await asyncio.sleep(wait_s)

    async def _scan(self) -> dict[str, set[str]]:
        text = await self._admin.metrics_text()
        self.stats["scans"] += 1
        self.stats["bytes"] += len(text)
        namespaces = frozenset(self.namespaces)
        # 0.15 - 0.35 s of CPU at 2,000 partitions: in a thread, so the event loop (side
        # channels, applies, hot rounds) keeps its turns while the page is read.
        signals = await asyncio.to_thread(subscription_signals, text, namespaces)
        previous, self._signals = self._signals, signals
        paged_before, self._paged_namespaces = self._paged_namespaces, namespaces
        changed: dict[str, set[str]] = {}
        moved: set[str] = set()
        for key in signals.keys() | previous.keys():
            if signals.get(key) != previous.get(key):
                topic = key[0]
                namespace = TopicName.parse(topic).namespace
                changed.setdefault(namespace, set()).add(topic)
                if namespace in paged_before and self._synced(topic):
                    moved.add(topic)
        if moved:
            seen: dict[str, dict[str, Signals]] = {}
            for (topic, subscription), values in signals.items():
                if topic in moved:
                    seen.setdefault(topic, {})[subscription] = values
            self._heat(moved, seen)
        self.last_error = None
        return changed

    # -- hot topics --

    def _heat(self, topics: set[str], seen: dict[str, dict[str, Signals]]) -> None:
        """``topics`` moved just now; a topic new to the hot set starts from what the page
        showed of it (``seen``), so a move between that page and its first ``stats`` is
        not missed."""
        if self._hot_topics_max <= 0:
            return
        now = time.monotonic()
        for topic in topics:
            if self._hot.pop(topic, None) is None:
                self._hot_signals[topic] = seen.get(topic, {})
            self._hot[topic] = now
        self._cool(now)
        if self._hot:
            self._hot_wake.set()

    def _cool(self, now: float) -> None:
        """Topics quiet for the hot window leave; past ``hot_topics_max``, the least
        recently moved leave too (loudly)."""
        dropped = 0
        for topic, since in list(self._hot.items()):
            quiet = now - since >= limits.sync_pulsar_hot_window_s
            if not quiet and len(self._hot) <= self._hot_topics_max:
                break
            del self._hot[topic]
            self._hot_signals.pop(topic, None)
            dropped += not quiet
        if dropped:
            self.stats["hotDropped"] += dropped
            if not self._hot_full:
                log.warning(
                    "more than %d topics' subscriptions moved within %.0f s: the least "
                    "recently moved are looked at on each metrics page only "
                    "([subscription_sync] pulsar_hot_topics_max)",
                    self._hot_topics_max,
                    limits.sync_pulsar_hot_window_s,
                )
            self._hot_full = True
        elif len(self._hot) < self._hot_topics_max:
            self._hot_full = False

    async def _run_hot(self) -> None:
        while True:
            self._cool(time.monotonic())
            topics = list(self._hot)
            if not topics:
                self._hot_wake.clear()
                await self._hot_wake.wait()
                continue
            began = time.monotonic()
            try:
                moved = await self._look_at(topics)
            except Exception:  # the pages still see every topic: say so, and go on
                log.exception("reading the stats of %d hot topics", len(topics))
                await asyncio.sleep(self._interval_s)
                continue
            self.stats["hotRounds"] += 1
            if moved:
                self.stats["hotChanges"] += len(moved)
                self._heat(moved, {})
                changed: dict[str, set[str]] = {}
                for topic in moved:
                    changed.setdefault(TopicName.parse(topic).namespace, set()).add(topic)
                self._publish(changed)
            round_s = max(limits.sync_pulsar_hot_interval_s, len(topics) / self._hot_requests_per_s)
            await asyncio.sleep(max(0.0, began + round_s - time.monotonic()))

    async def _look_at(self, topics: list[str]) -> set[str]:
        """The hot ``topics`` whose subscriptions moved since last looked at; a topic whose
        ``stats`` cannot be read leaves the hot set (the page still sees it)."""
        in_flight = asyncio.Semaphore(limits.sync_pulsar_hot_requests_in_flight)

        async def look(topic: str) -> dict[str, Signals] | None:
            async with in_flight:
                try:
                    return stats_signals(await self._admin.topic_stats(TopicName.parse(topic)))
                except LinkError as error:
                    log.debug("stats of hot topic %s: %s", topic, error)
                    return None

        answers = await asyncio.gather(*(look(topic) for topic in topics))
        self.stats["hotRequests"] += len(topics)
        moved: set[str] = set()
        for topic, signals in zip(topics, answers, strict=True):
            if topic not in self._hot:
                continue  # left while its stats were read
            if signals is None:
                del self._hot[topic]
                self._hot_signals.pop(topic, None)
                continue
            before = self._hot_signals.get(topic)
            self._hot_signals[topic] = signals
            if before is not None and before != signals:
                moved.add(topic)
        return moved

    async def stop(self) -> None:
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task


class PulsarPort:
    """A real Pulsar cluster: state over admin v2, apply by acknowledging, markers aside;
    its change mark is the metrics scan's number: ``SyncPort[int]``."""

    in_band = False

    def __init__(
        self,
        admin: ClusterAdminClient,
        link: PulsarLink,
        *,
        local_cluster: str,
        instance: str,
        opening: asyncio.Semaphore | None = None,
        scan_interval_s: float = limits.sync_pulsar_scan_interval_s,
        hot_topics_max: int = limits.sync_pulsar_hot_topics_max,
        hot_requests_per_s: float = limits.sync_pulsar_hot_requests_per_s,
        synced: Callable[[str], bool] = lambda _topic: True,
    ) -> None:
        """``instance`` names this gateway process's side topic reader and writer (never
        another process's); ``opening`` paces their opening with the gateway's others;
        ``synced`` says whether this process syncs a topic partition (``MetricsScan``)."""
        self._admin = admin
        self._link = link
        self._local_cluster = local_cluster
        self._instance = instance
        self._opening = opening or asyncio.Semaphore(limits.gateway_opening_count_max)
        self.scan = MetricsScan(
            admin,
            scan_interval_s,
            hot_topics_max=hot_topics_max,
            hot_requests_per_s=hot_requests_per_s,
            synced=synced,
        )
        #: namespace -> its side channel, while a sync of the namespace runs
        self.side_channels: dict[str, SideChannel] = {}
        self.partial_batches_skipped = 0

    async def changes(self, namespace: str, mark: int | None) -> Changed[int]:
        return await self.scan.changes(namespace, mark)

    def markers(self, topic: TopicName) -> SideRoute:
        namespace = topic.namespace
        channel = self.side_channels.get(namespace)
        if channel is None:
            channel = self.side_channels[namespace] = SideChannel(
                namespace,
                local_cluster=self._local_cluster,
                instance=self._instance,
                link=self._link,
                opening=self._opening,
            )
        return SideRoute(channel, str(topic))

    async def close_idle(self) -> None:
        """Side channels of namespaces whose syncs all stopped are closed."""
        for namespace in [n for n, c in self.side_channels.items() if c.idle]:
            await self.side_channels.pop(namespace).stop()

    async def stop(self) -> None:
        sides, self.side_channels = list(self.side_channels.values()), {}
        await asyncio.gather(*(c.stop() for c in sides), return_exceptions=True)
        await self.scan.stop()

    def marker_channels(self) -> list[dict[str, Any]]:
        return [self.side_channels[n].to_json() for n in sorted(self.side_channels)]

    def change_stats(self) -> dict[str, Any]:
        return self.scan.to_json()

    def problems(self) -> list[str]:
        return [
            f"side topic {channel.topic} not read: {channel.last_error}"
            for channel in self.side_channels.values()
            if not channel.connected and channel.failures
        ]

    async def states(self, topic: TopicName) -> dict[str, SubscriptionState]:
        internal, stats = await asyncio.gather(
            self._admin.internal_stats(topic), self._admin.topic_stats(topic)
        )
        return pulsar_states(internal, stats)

    async def apply(self, topic: TopicName, action: Apply) -> Applied:
        if action.batches:
            self.partial_batches_skipped += len(action.batches)
        internal = await self._admin.internal_stats(topic)
        cursor = (internal.get("cursors") or {}).get(action.subscription)
        entries = entries_to_acknowledge(action, cursor)
        if not entries:
            return Applied(None, 0)
        try:
            consumer = await self._link.subscribe(
                str(topic),
                action.subscription,
                sub_type=SubType.SHARED,
                initial_position=InitialPosition.EARLIEST,
                receiver_queue=0,
                consumer_name=ACKNOWLEDGER,
            )
        except ServerError as error:
            if error.code == wire.CONSUMER_BUSY:
                raise ApplyRefused(
                    f"{topic} {action.subscription}: held by its application here: {error}"
                ) from None
            raise
        try:
            consumer.ack_individual(entries)
        finally:
            await consumer.close()  # answered after the broker took the acknowledgements
        return Applied(None, len(entries))
