"""The drill's one sampler before the failure: B's gateway's sync lag and A's replication
backlog to B in one series each (the backlog for real Pulsar too, the lag with gateways
only), read from the stats as the gateways and Pulsar report them, bounded by dropping
every other sample, and kept in the report."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from georep import limits
from georep.drill import admin_client, pulsar_topology
from georep.drill.drill_op import DrillOp
from georep.drill.progress import Progress
from georep.drill.pulsar_topology import PulsarTopology
from georep.drill.report import classify, mode_report
from georep.drill.settings import ClusterUrls, DrillSettings
from georep.drill.topology import A, B, Topology
from georep.runtime.awaiting import within
from pulsar_tools.admin import PulsarAdminError

TOPIC = "persistent://public/default/drill-t"


def gateway_a(backlog: Any, remote: str = B) -> dict[str, Any]:
    return {
        "replicators": [
            {"topic": "public/default/other", "remoteCluster": B, "replicationBacklog": 99},
            {"topic": TOPIC, "remoteCluster": remote, "replicationBacklog": backlog},
        ]
    }


def gateway_b(lag: float) -> dict[str, Any]:
    block = {"applied": {A: {"syncLagMs": lag}}}
    topic = {"topic": TOPIC, "subscriptions": {"drill-key-shared": block}}
    return {"subscriptionSync": {"mode": "full", "topics": [topic]}}


def test_the_backlog_is_the_gateway_s_replicator_to_b_of_the_topic():
    assert admin_client.replication_backlog(gateway_a(12), TOPIC, B) == 12
    assert admin_client.replication_backlog(gateway_a(0), TOPIC, B) == 0
    assert admin_client.replication_backlog(gateway_a(None), TOPIC, B) is None  # not sampled yet
    assert admin_client.replication_backlog(gateway_a(True), TOPIC, B) is None
    assert admin_client.replication_backlog(gateway_a(12, remote="C"), TOPIC, B) is None
    assert admin_client.replication_backlog(None, TOPIC, B) is None  # the gateway did not answer


def test_pulsar_s_backlog_is_its_replicator_s_to_b_in_a_s_topic_stats(monkeypatch, tmp_path):
    answers: list[Any] = [
        {"replication": {B: {"replicationBacklog": 7, "connected": True}}},
        {"replication": {}},
        PulsarAdminError("GET", "/stats", 500, "Internal Server Error"),
    ]

    class Admin:
        def __init__(self, url: str) -> None:
            assert url == "http://a"

        def stats(self, topic: str) -> dict[str, Any]:
            answer = answers.pop(0)
            if isinstance(answer, Exception):
                raise answer
            return answer

    monkeypatch.setattr(pulsar_topology, "pulsar_admin", Admin)
    topology = PulsarTopology(tmp_path, "public/default")
    topology.urls = {A: ClusterUrls("pulsar://a", "http://a", None)}
    assert [topology.replication_backlog(TOPIC) for _ in range(3)] == [7, None, None]


class Gateways(Topology):
    """A's gateway reports the backlogs given, one a sample; B's a growing sync lag. At the
    last sample but one it stops the sampler, as the drill does before the failure; the
    sampler takes its last sample once stopped (it would fail on an empty list after it)."""

    def __init__(self, backlogs: list[Any], has_gateways: bool = True) -> None:
        self.urls = {}
        self.backlogs = backlogs
        self.has_gateways = has_gateways
        self.lag = 0.0
        self.stop_after = len(backlogs) - 1
        self.on_last: Callable[[], object] = lambda: None

    def next_backlog(self) -> Any:
        self.stop_after -= 1
        if self.stop_after == 0:
            self.on_last()
        return self.backlogs.pop(0)

    def gateway_stats(self, cluster: str, topic: str | None = None) -> dict[str, Any] | None:
        assert self.has_gateways and topic == TOPIC
        if cluster == B:
            self.lag += 10.0
            return gateway_b(self.lag)
        return gateway_a(self.next_backlog())


class Pulsar(Gateways):
    def replication_backlog(self, topic: str) -> int | None:
        return self.next_backlog()


async def sample(topology: Gateways) -> DrillOp:
    """The sampler over every backlog ``topology`` holds."""
    settings = DrillSettings("key-shared", 10, 1, 0.5, "kill", ("full",), 0.0)
    op = DrillOp(settings, "full", topology, Progress(enabled=False), "stamp")
    op.topic = TOPIC
    loop = asyncio.get_running_loop()
    topology.on_last = lambda: loop.call_soon_threadsafe(op._sampling_stop.set)
    await within(op._sample(), 10)
    return op


async def test_one_sampler_keeps_the_lag_and_the_backlog_at_the_same_times(monkeypatch):
    monkeypatch.setattr(limits, "drill_sync_sample_interval_s", 0.001)
    op = await sample(Gateways([None, 40, 25, 0]))
    lags, backlogs = op.facts.sync_lag_samples, op.facts.replication_backlog_samples
    assert [at for at, _ in lags] == [at for at, _ in backlogs]
    assert [n for _, n in backlogs] == [None, 40, 25, 0]
    assert [lag for _, lag in lags] == [10.0, 20.0, 30.0, 40.0]
    # the report keeps both series as [epoch ms, value] pairs
    report = mode_report(classify({}, [], []), {}, op.facts)
    assert (
        report["replication_backlog_samples"] == [[at, n] for at, n in backlogs]
        and report["replication_backlog_samples"][1][1] == 40
    )
    assert len(report["sync_lag_samples_ms"]) == len(report["replication_backlog_samples"])


async def test_without_gateways_only_the_backlog_is_sampled(monkeypatch):
    monkeypatch.setattr(limits, "drill_sync_sample_interval_s", 0.001)
    op = await sample(Pulsar([3, 1, 0], has_gateways=False))
    assert op.facts.sync_lag_samples == []
    assert [n for _, n in op.facts.replication_backlog_samples] == [3, 1, 0]


async def test_past_the_cap_every_other_sample_of_both_series_is_dropped(monkeypatch):
    monkeypatch.setattr(limits, "drill_sync_sample_interval_s", 0.001)
    monkeypatch.setattr(limits, "drill_sync_samples_count_max", 6)
    op = await sample(Gateways(list(range(100, 93, -1))))
    # 6 samples thinned to 3 (the whole span kept), then a 7th at twice the interval
    assert [n for _, n in op.facts.replication_backlog_samples] == [100, 98, 96, 94]
    assert [lag for _, lag in op.facts.sync_lag_samples] == [10.0, 30.0, 50.0, 70.0]


def test_the_drill_s_topic_is_found_by_either_name():
    # the gateways list a topic by its full name or without the scheme
    stats = {"replicators": [{"topic": TOPIC.partition("://")[2], "remoteCluster": B,
                              "replicationBacklog": 5}]}  # fmt: skip
    assert admin_client.replication_backlog(stats, TOPIC, B) == 5


def test_the_gateway_has_read_the_cursor_when_its_source_says_the_same():
    """Beside real Pulsar a change reaches the gateway at its next read of Pulsar's
    metrics: the drill waits until the state A's gateway read last is A's cursor."""
    cursor = {
        "markDeletePosition": "7:4",
        "individuallyDeletedMessages": "[(7:5..7:7],(7:9..7:12]]",
    }
    assert admin_client.source_is_cursor({"lastMarkDelete": "7:4", "ranges": 2}, cursor)
    assert not admin_client.source_is_cursor({"lastMarkDelete": "7:4", "ranges": 1}, cursor)
    assert not admin_client.source_is_cursor({"lastMarkDelete": "7:3", "ranges": 2}, cursor)
    assert not admin_client.source_is_cursor(None, cursor)  # not read as a source yet
    assert admin_client.source_is_cursor(None, None)  # A's cursor not known: nothing to wait for
    assert admin_client.source_is_cursor({}, {"markDeletePosition": "junk"})  # nor when unreadable
