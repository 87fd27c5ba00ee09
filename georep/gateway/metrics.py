"""Prometheus metrics of the gateway, read from the replicators at scrape time.

Names follow Pulsar's replication metrics (``pulsar_replication_backlog``,
``..._rate_in``, ``..._rate_out``, ``..._throughput_in/out``, ``..._connected_count``,
``..._delay_in_seconds``) under the ``georep_`` prefix, labelled by local cluster, remote
cluster and topic (partition). A collector reads the live objects when scraped, so a
replicator that stops simply stops appearing; nothing is registered globally (each
gateway app has its own registry).

Subscription sync (``georep_subsync_*``): per topic partition the snapshots started,
completed and timed out (Pulsar's ``pulsar_replicated_subscriptions_snapshots_*``
counterparts) and markers written; per subscription and source cluster the sync lag
of the last state applied here and the ranges it left on the subscription; beside real
Pulsar, the hot topics read alone between metrics pages and those dropped past the bound.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from georep.gateway.manager import ReplicationManager

_LABELS = ["local_cluster", "remote_cluster", "topic"]

#: name -> (help, stats field); gauges per replicator.
_GAUGES = {
    "georep_replication_backlog": (
        "Entries the replication subscription has not acknowledged (Pulsar counts entries too)",
        "replicationBacklog",
    ),
    "georep_replication_delay_in_seconds": (
        "Seconds since the oldest entry not yet replicated was published",
        "replicationDelayInSeconds",
    ),
    "georep_replication_rate_in": ("Messages read from the local topic per second", "msgRateIn"),
    "georep_replication_rate_out": (
        "Messages the remote acknowledged per second",
        "msgRateOut",
    ),
    "georep_replication_throughput_in": ("Bytes read per second", "msgThroughputIn"),
    "georep_replication_throughput_out": ("Bytes replicated per second", "msgThroughputOut"),
    "georep_replication_stalled_seconds": (
        "Seconds without an entry moved on while entries wait (0: moving, or nothing to do)",
        "stalledSeconds",
    ),
}
#: name -> (help, stats field); counters per replicator (exported with ``_total``).
_COUNTERS = {
    "georep_replication_messages_out": ("Messages stored on the remote", "msgOutCounter"),
    "georep_replication_bytes_out": ("Bytes stored on the remote", "bytesOutCounter"),
    "georep_replication_duplicates": (
        "Messages the remote already had (deduplicated re-sends)",
        "duplicatesCounter",
    ),
    "georep_replication_errors": ("Local or remote faults seen", "errorsCounter"),
}


class ReplicationCollector:
    def __init__(self, manager: ReplicationManager) -> None:
        self.manager = manager

    def collect(self) -> Iterator[Metric]:
        stats = self.manager.replicator_stats()
        gauges = {
            name: GaugeMetricFamily(name, text, labels=_LABELS)
            for name, (text, _) in _GAUGES.items()
        }
        connected = GaugeMetricFamily(
            "georep_replication_connected",
            "1 when both the local subscription and the remote producer are connected",
            labels=_LABELS,
        )
        schema_refused = GaugeMetricFamily(
            "georep_replication_schema_refused",
            "1 while the remote refuses the schema of the topic's next entry (replication stopped)",
            labels=_LABELS,
        )
        counters = {
            name: CounterMetricFamily(name, text, labels=_LABELS)
            for name, (text, _) in _COUNTERS.items()
        }
        for item in stats:
            labels = [item["localCluster"], item["remoteCluster"], item["topic"]]
            for name, (_, key) in _GAUGES.items():
                if item[key] is not None:
                    gauges[name].add_metric(labels, float(item[key]))
            connected.add_metric(labels, 1.0 if item["connected"] else 0.0)
            schema_refused.add_metric(labels, 0.0 if item.get("schemaRefused") is None else 1.0)
            for name, (_, key) in _COUNTERS.items():
                counters[name].add_metric(labels, float(item[key]))
        yield from gauges.values()
        yield connected
        yield schema_refused
        yield from counters.values()
        replicators = GaugeMetricFamily(
            "georep_gateway_replicators", "Replicators running", labels=["local_cluster"]
        )
        replicators.add_metric([self.manager.local.name], float(len(stats)))
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
        summary = manager.replication_summary()
        yield _gauge(
            "georep_gateway_replication_stuck",
            "Replicators to a remote that moved nothing on for [gateway] stuck_after_s while"
            " entries wait: restarted by the watchdog, /health says so",
            ["local_cluster", "remote_cluster"],
            [([local, remote], entry["stalled"]) for remote, entry in summary.items()],
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
            "Topic partitions whose subscription sync applied nothing for [gateway]"
            " stuck_after_s while applies wait: restarted by the watchdog, /health says so",
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
    "georep_subsync_snapshots_timed_out": ("Snapshots abandoned at their timeout", "timedOut"),
}


class SyncCollector:
    def __init__(self, manager: ReplicationManager) -> None:
        self.manager = manager

    def collect(self) -> Iterator[Metric]:
        topic_labels = ["local_cluster", "topic"]
        applied_labels = ["local_cluster", "topic", "subscription", "source_cluster"]
        snapshots = {
            name: CounterMetricFamily(name, text, labels=topic_labels)
            for name, (text, _) in _SNAPSHOTS.items()
        }
        markers = CounterMetricFamily(
            "georep_subsync_markers_written", "Markers this gateway wrote", labels=topic_labels
        )
        lag = GaugeMetricFamily(
            "georep_subsync_lag_ms",
            "Milliseconds from a source writing a subscription's state to it being applied here",
            labels=applied_labels,
        )
        ranges = GaugeMetricFamily(
            "georep_subsync_applied_ranges",
            "Acknowledged ranges the subscription holds after the last state applied here",
            labels=applied_labels,
        )
        local = self.manager.local.name
        summary = self.manager.sync_stats()
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
        for topic in summary["topics"]:
            labels = [local, topic["topic"]]
            for name, (_, key) in _SNAPSHOTS.items():
                snapshots[name].add_metric(labels, float(topic["snapshots"][key]))
            markers.add_metric(labels, float(sum(topic["markersWritten"].values())))
            for subscription, entry in topic["subscriptions"].items():
                for source, applied in entry["applied"].items():
                    row = [*labels, subscription, source]
                    if applied["syncLagMs"] is not None:
                        lag.add_metric(row, float(applied["syncLagMs"]))
                    ranges.add_metric(row, float(applied["ranges"]))
        yield from snapshots.values()
        yield markers
        yield lag
        yield ranges


def registry_for(manager: ReplicationManager) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ReplicationCollector(manager))
    registry.register(SyncCollector(manager))
    return registry
