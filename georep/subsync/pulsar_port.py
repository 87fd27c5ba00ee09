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
  one request.

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
import re
from collections.abc import Iterator
from typing import Any

from georep import limits
from georep.client.admin import ClusterAdminClient
from georep.client.consumer import InitialPosition, SubType
from georep.client.errors import LinkError, ServerError
from georep.client.link import PulsarLink
from georep.position import Position
from georep.protocol import pulsar_wire_pb2 as wire
from georep.pulsar.cursor_text import acknowledged, parse_cursor
from georep.subsync.core import Apply, SubscriptionState
from georep.subsync.ports import Applied, Changed, ChangeMark
from georep.subsync.side_channel import SideChannel, SideRoute, is_side_topic
from georep.topic_name import TopicName

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
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
#: Subscriptions never an application's, as they appear on the page (checked again on
#: the parsed labels; this only saves parsing their lines).
_SKIPPED = tuple(f'subscription="{prefix}' for prefix in _NOT_APPLICATIONS)
#: Scans whose changes are kept for watches that fell behind.
_SCANS_KEPT = 16


def subscription_signals(text: str, namespaces: set[str]) -> dict[tuple[str, str], tuple[Any, ...]]:
    """(topic, subscription) -> the values of its ``_SIGNALS`` on a Prometheus page, for
    applications' subscriptions of ``namespaces``.

    >>> page = '\\n'.join([
    ...     'pulsar_subscription_back_log{cluster="A",namespace="t/ns",topic="persistent://t/ns/x",'
    ...     'subscription="app"} 4',
    ...     'pulsar_subscription_back_log{cluster="A",namespace="t/ns",topic="persistent://t/ns/x",'
    ...     'subscription="georep.sync"} 0',
    ...     'pulsar_topics_count{cluster="A"} 3'])
    >>> subscription_signals(page, {"t/ns"})
    {('persistent://t/ns/x', 'app'): ('4',)}
    """
    found: dict[tuple[str, str], list[str]] = {}
    for line in _signal_lines(text):
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
        found.setdefault((topic, subscription), []).append(line[labels_end + 1 :].strip())
    return {key: tuple(values) for key, values in found.items()}


def _signal_lines(text: str) -> Iterator[str]:
    """The lines of ``_SIGNALS`` on a page, without a loop over every line: a page of
    2,000 topic partitions is about 25 MB and 190,000 lines. The exposition format keeps
    a family's lines together (each block ends where a comment line begins), so each
    block is found with ``str.find``; a family whose lines come in several blocks is
    still read whole, block by block.

    >>> page = "# TYPE a gauge\\na 1\\n# TYPE pulsar_subscription_back_log gauge\\n" \\
    ...     "pulsar_subscription_back_log{x=\\"1\\"} 4\\n# TYPE b gauge\\nb 2\\n"
    >>> list(_signal_lines(page))
    ['pulsar_subscription_back_log{x="1"} 4']
    """
    text = "\n" + text
    for family in _SIGNALS:
        at = 0
        while (start := text.find("\n" + family, at)) >= 0:
            end = text.find("\n#", start + 1)
            end = len(text) if end < 0 else end
            for line in text[start + 1 : end].splitlines():
                if line.startswith(family):
                    yield line
            at = end


class MetricsScan:
    """Which topics' subscriptions moved, from one Prometheus page per interval for every
    namespace watched (see the module docstring)."""

    def __init__(self, admin: ClusterAdminClient, interval_s: float) -> None:
        self._admin = admin
        self._interval_s = interval_s
        self.namespaces: set[str] = set()
        self.number = 0
        self._signals: dict[tuple[str, str], tuple[Any, ...]] = {}
        #: (scan number, namespace -> topics changed in it; None: the scan failed)
        self._scans: collections.deque[tuple[int, dict[str, set[str]] | None]] = collections.deque(
            maxlen=_SCANS_KEPT
        )
        self._scanned = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.last_error: str | None = None
        self.stats = {"scans": 0, "failures": 0, "bytes": 0}

    async def changes(self, namespace: str, mark: ChangeMark | None) -> Changed:
        self.namespaces.add(namespace)
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="metrics scan")
        if not isinstance(mark, int):
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

    async def _run(self) -> None:
        while True:
            try:
                changed: dict[str, set[str]] | None = await self._scan()
            except LinkError as error:
                self.stats["failures"] += 1
                if str(error) != self.last_error:
                    log.warning("reading subscription stats: %s", error)
                self.last_error = str(error)
                changed = None
            self.number += 1
            self._scans.append((self.number, changed))
            self._scanned.set()
            await asyncio.sleep(self._interval_s)

    async def _scan(self) -> dict[str, set[str]]:
        text = await self._admin.metrics_text()
        self.stats["scans"] += 1
        self.stats["bytes"] += len(text)
        signals = subscription_signals(text, self.namespaces)
        previous, self._signals = self._signals, signals
        changed: dict[str, set[str]] = {}
        for key in signals.keys() | previous.keys():
            if signals.get(key) != previous.get(key):
                topic = key[0]
                changed.setdefault(TopicName.parse(topic).namespace, set()).add(topic)
        self.last_error = None
        return changed

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


class PulsarPort:
    """A real Pulsar cluster: state over admin v2, apply by acknowledging, markers aside."""

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
    ) -> None:
        """``instance`` names this gateway process's side topic reader and writer (never
        another process's); ``opening`` paces their opening with the gateway's others."""
        self._admin = admin
        self._link = link
        self._local_cluster = local_cluster
        self._instance = instance
        self._opening = opening or asyncio.Semaphore(limits.gateway_opening_count_max)
        self.scan = MetricsScan(admin, scan_interval_s)
        #: namespace -> its side channel, while a sync of the namespace runs
        self.side_channels: dict[str, SideChannel] = {}
        self.partial_batches_skipped = 0

    async def changes(self, namespace: str, mark: ChangeMark | None) -> Changed:
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
