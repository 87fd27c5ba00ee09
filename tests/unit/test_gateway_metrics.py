"""The gateway's /metrics: per namespace by default (sums, and the largest where a sum
means nothing), per topic partition when asked, for at most
``limits.metrics_topic_partitions_max`` of them, with the rest counted and said."""

from __future__ import annotations

import logging
from typing import Any, cast

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from georep import limits
from georep.gateway.manager import ReplicationManager
from georep.gateway.metrics import registry_for
from georep.replicator.replicator import Replicator
from tests.unit.test_gateway_manager import FakeStore, endpoint


def unstarted(manager: ReplicationManager, topic: str, **options: Any) -> Replicator:
    """A replicator to ``B`` on the manager's links, not started: what the gateway's
    reads see of one (its figures are set by the test)."""
    replicator = Replicator(
        topic=topic,
        local_cluster="A",
        remote_cluster="B",
        local_link=manager.local_link,
        remote_link=manager.remote_links["B"],
        **options,
    )
    manager.replicators[topic, "B"] = replicator
    return replicator


@pytest.fixture
async def manager():
    manager = ReplicationManager(
        local=endpoint("A"), remotes={"B": endpoint("B")}, store=cast(Any, FakeStore())
    )
    for namespace, count in (("t/orders", 3), ("t/audit", 2)):
        for index in range(count):
            replicator = unstarted(manager, f"persistent://{namespace}/x-partition-{index}")
            replicator.backlog_entries = 10 * (index + 1)
            replicator.counters.messages_out = 100
    yield manager
    await manager.stop()


def samples(manager: ReplicationManager, name: str, **options: Any) -> dict[tuple, float]:
    text = generate_latest(registry_for(manager, **options)).decode()
    return {
        tuple(sorted(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name
    }


def test_by_default_a_namespace_is_one_series_its_partitions_summed(manager) -> None:
    backlog = samples(manager, "georep_replication_backlog")
    at = (("local_cluster", "A"), ("remote_cluster", "B"))
    assert backlog == {
        (*at[:1], ("namespace", "t/audit"), *at[1:]): 10 + 20,
        (*at[:1], ("namespace", "t/orders"), *at[1:]): 10 + 20 + 30,
    }
    sent = samples(manager, "georep_replication_messages_out_total")
    assert sorted(sent.values()) == [200, 300]
    assert set(samples(manager, "georep_replication_connected").values()) == {0}
    assert samples(manager, "georep_gateway_replicators_not_connected") == {at: 5}
    assert samples(manager, "georep_gateway_metrics_topics_left_out") == {
        (("local_cluster", "A"),): 0
    }


def test_per_topic_when_asked_bounded_and_said(manager, monkeypatch, caplog) -> None:
    every = samples(manager, "georep_replication_backlog", topic_level=True)
    assert len(every) == 5 and all(dict(labels)["topic"] for labels in every)

    monkeypatch.setattr(limits, "metrics_topic_partitions_max", 2)
    caplog.set_level(logging.WARNING, logger="georep.gateway.metrics")
    bounded = samples(manager, "georep_replication_backlog", topic_level=True)
    assert sorted(dict(labels)["topic"] for labels in bounded) == [
        "persistent://t/audit/x-partition-0",
        "persistent://t/audit/x-partition-1",
    ]
    left_out = samples(manager, "georep_gateway_metrics_topics_left_out", topic_level=True)
    assert list(left_out.values()) == [3]
    said = [r.getMessage() for r in caplog.records]
    assert any("metrics per topic partition for 2 of 5; 3 left out" in line for line in said)
