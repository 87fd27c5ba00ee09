"""Prometheus metrics of the gateway, read from the replicators at scrape time.

Names follow Pulsar's replication metrics (``pulsar_replication_backlog``,
``..._rate_in``, ``..._rate_out``, ``..._throughput_in/out``, ``..._connected_count``,
``..._delay_in_seconds``) under the ``georep_`` prefix, labelled by local cluster, remote
cluster and **namespace**: a namespace's topic partitions summed (the delay and the
stall: the largest; ``connected``: how many are). With ``[metrics] topic_level = true``
(Pulsar's ``exposeTopicLevelMetricsInPrometheus``) the label is the topic partition
instead, for at most ``limits.metrics_topic_partitions_max`` of them (the first by name;
past it a WARNING and ``georep_gateway_metrics_topics_left_out``). A scrape reads the
replicators' fields, never their stats: beside 10,000 partitions it runs on the event
loop (bench/gateway_health.py). A collector reads the live objects when scraped, so a
replicator that stops simply stops appearing; nothing is registered globally (each
gateway app has its own registry).

Subscription sync (``georep_subsync_*``): per namespace (or topic partition) the
snapshots started, completed and timed out (Pulsar's
``pulsar_replicated_subscriptions_snapshots_*`` counterparts) and markers written; per
namespace and source cluster (or topic partition, subscription and source) the sync
lag of the last state applied here (the largest) and the ranges it left on the
subscriptions; per namespace and remote (or topic partition, subscription and remote)
the exposure of the subscriptions synced from here (``subsync/exposure.py``: the
messages a failover now would deliver again, summed, and the age of the oldest such
acknowledgement, the largest: :func:`exposure_figures`, which the live page shows
too); beside real Pulsar, the hot topics read alone between metrics pages and those
dropped past the bound.
"""

from __future__ import annotations

import logging
import operator
import time
from collections.abc import Callable, Iterable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from georep import limits
from georep.gateway.manager import ReplicationManager
from georep.replicator.replicator import Replicator
from georep.runtime.loop_lag import LoopLag

log = logging.getLogger(__name__)

#: The figures of a replicator: (name, help, counter?, how topic partitions aggregate),
#: in the order :func:`_figures` reads them.
_REPLICATION: list[tuple[str, str, bool, Callable[[float, float], float]]] = [
    ("georep_replication_backlog",
     "Entries the replication subscriptions have not acknowledged (Pulsar counts entries too)",
     False, operator.add),
    ("georep_replication_delay_in_seconds",
     "Seconds since the oldest entry not yet replicated was published (the largest)",
     False, max),
    ("georep_replication_rate_in", "Messages read from the local topics per second",
     False, operator.add),
    ("georep_replication_rate_out", "Messages the remote acknowledged per second",
     False, operator.add),
    ("georep_replication_throughput_in", "Bytes read per second", False, operator.add),
    ("georep_replication_throughput_out", "Bytes replicated per second", False, operator.add),
    ("georep_replication_stalled_seconds",
     "Seconds without an entry moved on while entries wait (the largest; 0: moving)",
     False, max),
    ("georep_replication_connected",
     "Replicators whose local subscription and remote producer are both connected"
     " (per topic partition: 1 or 0)",
     False, operator.add),
    ("georep_replication_schema_refused",
     "Replicators stopped because the remote refuses the schema of their next entry",
     False, operator.add),
    ("georep_replication_messages_out", "Messages stored on the remote", True, operator.add),
    ("georep_replication_bytes_out", "Bytes stored on the remote", True, operator.add),
    ("georep_replication_duplicates",
     "Messages the remote already had (deduplicated re-sends)", True, operator.add),
    ("georep_replication_errors", "Local or remote faults seen", True, operator.add),
]  # fmt: skip


def _figures(replicator: Replicator, now: float) -> tuple[float | None, ...]:
    """A replicator's figures in ``_REPLICATION``'s order (None: not known), read from
    its fields, never its stats: a scrape beside 10,000 partitions runs on the gateway's
    event loop."""
    rates, counters = replicator.rates, replicator.counters
    return (
        replicator.backlog_entries,
        replicator.delay_s,
        rates["msgRateIn"],
        rates["msgRateOut"],
        rates["msgThroughputIn"],
        rates["msgThroughputOut"],
        replicator.stalled_s(now),
        1 if replicator.connected else 0,
        0 if replicator.schema_refused is None else 1,
        counters.messages_out,
        counters.bytes_out,
        counters.duplicates,
        counters.errors,
    )


def replication_figures(
    manager: ReplicationManager, now: float, topics: set[str] | None = None
) -> dict[tuple[str, str, str], list[float | None]]:
    """``_REPLICATION``'s figures per (local cluster, remote, namespace), the topic
    partitions of each folded; per (..., topic partition) for ``topics`` alone when
    given. Both ``/metrics`` and the status page (``status_page.py``) read these."""
    local = manager.local.name
    folds = [fold for _name, _text, _counter, fold in _REPLICATION]
    held: dict[tuple[str, str, str], list[float | None]] = {}
    for (topic, remote), replicator in manager.replicators.items():
        if topics is None:
            key = (local, remote, replicator.topic_name.namespace)
        elif topic in topics:
            key = (local, remote, topic)
        else:
            continue
        values = held.get(key)
        if values is None:
            held[key] = list(_figures(replicator, now))
            continue
        for index, value in enumerate(_figures(replicator, now)):
            if value is not None:
                known = values[index]
                values[index] = value if known is None else folds[index](known, value)
    return held


#: Where each figure is in a row of :func:`replication_figures`.
FIGURE = {name: index for index, (name, *_rest) in enumerate(_REPLICATION)}


class TopicLevel:
    """Per topic partition (``[metrics] topic_level = true``), for at most
    ``limits.metrics_topic_partitions_max`` of them, the first in name order; else per
    namespace. Past the bound a WARNING says how many were left out (once for each new
    count) and ``georep_gateway_metrics_topics_left_out`` counts them."""

    def __init__(self, enabled: bool, partitions_max: int) -> None:
        self.enabled = enabled
        self.partitions_max = partitions_max
        self.left_out = 0
        self._said = 0

    def chosen(self, topics: Iterable[str]) -> set[str] | None:
        """The topic partitions with series of their own (None: per namespace)."""
        if not self.enabled:
            return None
        ordered = sorted(set(topics))
        self.left_out = max(0, len(ordered) - self.partitions_max)
        if self.left_out and self.left_out != self._said:
            log.warning(
                "metrics per topic partition for %d of %d; %d left out past"
                " limits.metrics_topic_partitions_max (per namespace: [metrics] topic_level"
                " = false)",
                self.partitions_max,
                len(ordered),
                self.left_out,
            )
        self._said = self.left_out
        return set(ordered[: self.partitions_max])


class ReplicationCollector:
    def __init__(self, manager: ReplicationManager, level: TopicLevel | None = None) -> None:
        self.manager = manager
        self.level = level or TopicLevel(False, limits.metrics_topic_partitions_max)

    def collect(self) -> Iterator[Metric]:
        manager, local = self.manager, self.manager.local.name
        now = time.time()
        chosen = self.level.chosen(topic for topic, _remote in manager.replicators)
        where = "namespace" if chosen is None else "topic"
        held = replication_figures(manager, now, chosen)
        labels = ["local_cluster", "remote_cluster", where]
        for index, (name, text, counter, _fold) in enumerate(_REPLICATION):
            kind = CounterMetricFamily if counter else GaugeMetricFamily
            rows: dict[tuple[str, ...], float] = {}
            for key, values in held.items():
                value = values[index]
                if value is not None:
                    rows[key] = float(value)
            yield _family(kind, name, text, labels, rows)
        stats = manager.replicators
        replicators = GaugeMetricFamily(
            "georep_gateway_replicators", "Replicators running", labels=["local_cluster"]
        )
        replicators.add_metric([self.manager.local.name], float(len(stats)))
        yield _gauge(
            "georep_gateway_metrics_topics_left_out",
            "Topic partitions without series of their own past"
            " limits.metrics_topic_partitions_max ([metrics] topic_level = true)",
            ["local_cluster"],
            [([local], self.level.left_out)],
        )
        yield replicators
        errors = CounterMetricFamily(
            "georep_gateway_discovery_errors",
            "Failed discovery steps (policy store, topic listings)",
            labels=["local_cluster"],
        )
        errors.add_metric([self.manager.local.name], float(self.manager.stats.errors))
        yield errors
        yield _gauge(
            "georep_gateway_topics_over_limit",
            "Topic partitions left out past a limit ([limits] replicators_max, sync_topics_max)",
            ["local_cluster", "kind"],
            [
                ([self.manager.local.name, "replication"], self.manager.stats.over_limit),
                ([self.manager.local.name, "sync"], self.manager.syncs_over_limit),
            ],
        )
        manager, local = self.manager, self.manager.local.name
        yield _gauge(
            "georep_gateway_partitions",
            "Topic partitions listed (known), this instance's share of them (owned), and"
            " those of its share still run by another instance (pending)",
            ["local_cluster", "instance", "state"],
            [
                ([local, manager.instance, "known"], manager.stats.topics),
                ([local, manager.instance, "owned"], manager.partitions_owned),
                ([local, manager.instance, "pending"], manager.partitions_pending),
            ],
        )
        members = getattr(manager.ownership, "members", None)
        yield _gauge(
            "georep_gateway_members",
            "Live gateway instances of this cluster, as this one last read them",
            ["local_cluster", "instance"],
            [([local, manager.instance], len(members) if members is not None else 1)],
        )
        yield _gauge(
            "georep_gateway_cluster_reachable",
            "0 while the last connection to a cluster's brokers or admin REST failed"
            " (refused, a TLS handshake that failed: /health says why), else 1",
            ["local_cluster", "cluster"],
            [([local, name], not reasons) for name, reasons in manager.unreachable().items()],
        )
        yield _gauge(
            "georep_gateway_cluster_refused",
            "Operations a cluster refused the gateway's role (401, 403, AuthorizationError,"
            " AuthenticationError) since each last succeeded: /health names them",
            ["local_cluster", "cluster", "operation"],
            [
                ([local, name, operation], refusal.count)
                for name, refusals in manager.refused().items()
                for operation, refusal in refusals.items()
            ],
        )
        not_connected: dict[str, int] = {}
        for (_topic, remote), replicator in manager.replicators.items():
            if not replicator.connected:
                not_connected[remote] = not_connected.get(remote, 0) + 1
        yield _gauge(
            "georep_gateway_replicators_not_connected",
            "Replicators to a remote whose local subscription or remote producer is not"
            " connected (their last errors: /admin/georep/v1/stats)",
            ["local_cluster", "remote_cluster"],
            [([local, remote], not_connected.get(remote, 0)) for remote in sorted(manager.remotes)],
        )
        stalled = manager.stalled()
        yield _gauge(
            "georep_gateway_replication_stuck",
            "Replicators to a remote that moved nothing on for [gateway] stuck_after_s while"
            " entries wait: restarted by the watchdog, /health says so",
            ["local_cluster", "remote_cluster"],
            [
                ([local, remote], sum(1 for key in stalled if key[1] == remote))
                for remote in sorted(manager.remotes)
            ],
        )
        restarts = CounterMetricFamily(
            "georep_gateway_replication_restarts",
            "Replicators the watchdog restarted because they were stuck",
            labels=["local_cluster", "remote_cluster"],
        )
        for remote in sorted(manager.remotes):
            restarts.add_metric([local, remote], float(manager.restarts_to(remote)))
        yield restarts
        yield _gauge(
            "georep_gateway_sync_stuck",
            "Topic partitions whose subscription sync applied nothing while states wait,"
            " or read nothing while its topic holds entries past its reader, for [gateway]"
            " stuck_after_s: restarted by the watchdog, /health says so",
            ["local_cluster"],
            [([local], len(manager.stalled_syncs()))],
        )
        yield _gauge(
            "georep_gateway_problems",
            "Reasons /health answers degraded",
            ["local_cluster"],
            [([self.manager.local.name], len(self.manager.problems()))],
        )


def _gauge(
    name: str, text: str, labels: list[str], rows: Iterable[tuple[list[str], float]]
) -> GaugeMetricFamily:
    gauge = GaugeMetricFamily(name, text, labels=labels)
    for values, value in rows:
        gauge.add_metric(values, float(value))
    return gauge


_SNAPSHOTS = {
    "georep_subsync_snapshots_started": ("Snapshots started", "started"),
    "georep_subsync_snapshots_completed": ("Snapshots completed", "completed"),
    "georep_subsync_snapshots_timed_out": ("Snapshots abandoned at their timeout", "timed_out"),
}


def exposure_figures(
    manager: ReplicationManager, chosen: set[str] | None = None
) -> dict[tuple[str, ...], tuple[int, float | None]]:
    """Per (local cluster, namespace, remote), or with ``chosen`` per (local cluster,
    topic partition, subscription, remote) for those partitions: the messages a
    failover now would deliver again (summed) and the oldest of their acknowledgements'
    age in seconds (the largest). Remotes whose figure is not known are left out."""
    local = manager.local.name
    out: dict[tuple[str, ...], tuple[int, float | None]] = {}
    for topic, sync in manager.syncs.items():
        if chosen is not None and topic not in chosen:
            continue
        for subscription, figures in sync.exposure().items():
            for remote, figure in figures.items():
                if figure is None:
                    continue
                if chosen is None:
                    row: tuple[str, ...] = (local, sync.topic_name.namespace, remote)
                else:
                    row = (local, topic, subscription, remote)
                messages, oldest = out.get(row, (0, None))
                ages = [a for a in (oldest, figure.oldest_s) if a is not None]
                out[row] = (messages + figure.messages, max(ages) if ages else None)
    return out


class SyncCollector:
    def __init__(self, manager: ReplicationManager, level: TopicLevel | None = None) -> None:
        self.manager = manager
        self.level = level or TopicLevel(False, limits.metrics_topic_partitions_max)

    def collect(self) -> Iterator[Metric]:
        """Snapshots and markers per namespace (or topic partition); the sync lag (the
        largest) and the ranges left (their sum) per namespace and source cluster, or per
        topic partition, subscription and source."""
        manager, local = self.manager, self.manager.local.name
        chosen = self.level.chosen(manager.syncs)
        where = "namespace" if chosen is None else "topic"
        counted: dict[str, dict[tuple[str, ...], float]] = {name: {} for name in _SNAPSHOTS}
        markers: dict[tuple[str, ...], float] = {}
        lag: dict[tuple[str, ...], float] = {}
        ranges: dict[tuple[str, ...], float] = {}
        for topic, sync in manager.syncs.items():
            if chosen is None:
                at = (local, sync.topic_name.namespace)
            elif topic in chosen:
                at = (local, topic)
            else:
                continue
            controller = sync.snapshot_stats
            for name, (_, field) in _SNAPSHOTS.items():
                counted[name][at] = counted[name].get(at, 0.0) + getattr(controller, field)
            markers[at] = markers.get(at, 0.0) + sum(sync.markers_written.values())
            for (subscription, source), applied in sync.applied.items():
                row = (*at, source) if chosen is None else (*at, subscription, source)
                ranges[row] = ranges.get(row, 0.0) + applied.ranges
                if applied.sync_lag_ms is not None:
                    lag[row] = max(lag.get(row, 0.0), applied.sync_lag_ms)
        labels = ["local_cluster", where]
        applied_labels = [*labels, "source_cluster"]
        if chosen is not None:
            applied_labels = [*labels, "subscription", "source_cluster"]
        for name, (text, _) in _SNAPSHOTS.items():
            yield _family(CounterMetricFamily, name, text, labels, counted[name])
        yield _family(
            CounterMetricFamily, "georep_subsync_markers_written", "Markers this gateway wrote",
            labels, markers,
        )  # fmt: skip
        yield _family(
            GaugeMetricFamily,
            "georep_subsync_lag_ms",
            "Milliseconds from a source writing a subscription's state to it being applied"
            " here (the largest)",
            applied_labels,
            lag,
        )
        yield _family(
            GaugeMetricFamily,
            "georep_subsync_applied_ranges",
            "Acknowledged ranges the subscriptions hold after the last state applied here",
            applied_labels,
            ranges,
        )
        exposure = exposure_figures(manager, chosen)
        exposure_labels = [*labels, "remote_cluster"]
        if chosen is not None:
            exposure_labels = [*labels, "subscription", "remote_cluster"]
        yield _family(
            GaugeMetricFamily,
            "georep_subsync_exposure_messages",
            "Messages acknowledged here whose copies a remote holds unacknowledged: what a"
            " failover now would deliver again",
            exposure_labels,
            {row: float(messages) for row, (messages, _) in exposure.items()},
        )
        yield _family(
            GaugeMetricFamily,
            "georep_subsync_exposure_oldest_seconds",
            "Age of the oldest acknowledgement a remote does not hold yet (the largest)",
            exposure_labels,
            {row: oldest for row, (_, oldest) in exposure.items() if oldest is not None},
        )
        summary = manager.sync_stats(topics=[])
        yield _gauge(
            "georep_subsync_topics",
            "Topic partitions synced, by state (connected; failing: cannot attach)",
            ["local_cluster", "state"],
            [
                ([local, "synced"], summary["topicsSynced"]),
                ([local, "connected"], summary["topicsConnected"]),
                ([local, "failing"], summary["topicsFailing"]),
            ],
        )
        changes = summary["changes"]
        if "hotTopics" in changes:  # beside real Pulsar: the page and the hot topics
            yield _gauge(
                "georep_subsync_hot_topics",
                "Topics read alone between metrics pages, as they moved lately (and the bound)",
                ["local_cluster", "of"],
                [([local, "hot"], changes["hotTopics"]), ([local, "max"], changes["hotTopicsMax"])],
            )
            dropped = CounterMetricFamily(
                "georep_subsync_hot_topics_dropped",
                "Topics that left the hot set past pulsar_hot_topics_max while still moving",
                labels=["local_cluster"],
            )
            dropped.add_metric([local], float(changes["hotDropped"]))
            yield dropped


def _family(
    kind: type[GaugeMetricFamily] | type[CounterMetricFamily],
    name: str,
    text: str,
    labels: list[str],
    values: dict[tuple[str, ...], float],
) -> Metric:
    family = kind(name, text, labels=labels)
    for key, value in sorted(values.items()):
        family.add_metric(list(key), value)
    return family


class LoopLagCollector:
    """How late the gateway's event loop runs what is due (runtime/loop_lag.py)."""

    def __init__(self, local_cluster: str, loop_lag: LoopLag) -> None:
        self.local_cluster = local_cluster
        self.loop_lag = loop_lag

    def collect(self) -> Iterator[Metric]:
        labels = ["local_cluster"]
        yield _gauge(
            "georep_gateway_event_loop_lag_seconds",
            f"The worst lateness of the event loop within the last"
            f" {limits.loop_lag_window_s:g} s (limits.loop_lag_window_s)",
            labels,
            [([self.local_cluster], self.loop_lag.worst_s())],
        )
        stalls = CounterMetricFamily(
            "georep_gateway_event_loop_stalls",
            f"Times the event loop ran {limits.loop_lag_stall_s:g} s late or more"
            " (limits.loop_lag_stall_s)",
            labels=labels,
        )
        stalls.add_metric([self.local_cluster], float(self.loop_lag.stalls))
        yield stalls


def registry_for(
    manager: ReplicationManager, *, topic_level: bool = False, loop_lag: LoopLag | None = None
) -> CollectorRegistry:
    """The gateway's metrics: per namespace, or per topic partition with ``topic_level``
    (``[metrics] topic_level``), bounded by ``limits.metrics_topic_partitions_max``; and
    the event loop's lateness when ``loop_lag`` is given."""
    registry = CollectorRegistry(auto_describe=False)
    if loop_lag is not None:
        registry.register(LoopLagCollector(manager.local.name, loop_lag))
    registry.register(
        ReplicationCollector(manager, TopicLevel(topic_level, limits.metrics_topic_partitions_max))
    )
    registry.register(
        SyncCollector(manager, TopicLevel(topic_level, limits.metrics_topic_partitions_max))
    )
    return registry
