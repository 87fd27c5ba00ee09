"""Replication and subscription sync of a few hundred topic partitions, as processes.

Clusters A and B and a gateway beside each; namespace ``many/ns`` replicated A→B and
synced, with 240 partitions (40 partitioned topics of 4, 80 topics more), each holding a
message before the gateways start. Checked:

- every partition is replicated and every partition's sync attaches, except past a
  limit: B's gateway may sync one partition fewer than there are, and says so
  (``/health`` degraded, the metric);
- ``/stats`` comes in pages;
- an idle namespace costs no state read: while nothing happens, the gateway reads no
  partition's subscription states (the cluster's change feed says nothing changed);
- an acknowledgement on A on a handful of partitions shows on B;
- A's gateway killed (SIGKILL) and started again beside them: a second message on every
  partition reaches B exactly once (no message lost, none stored twice), and the
  restarted gateway neither storms nor collides with its own consumers (log lines are
  counted, not timed).
"""

from __future__ import annotations

import json
import random
import time

import pulsar
import pytest

from tests.harness.gateway import (
    World,
    admin_url,
    create_partitioned_topic,
    http,
    payloads_on,
)
from tests.harness.waiting import wait_for

pytestmark = [pytest.mark.timeout(900), pytest.mark.slow]

NAMESPACE = "many/ns"
PARTITIONED = 40
PARTITIONS = 4
PLAIN = 80
SYNC_TOML = f"""
[subscription_sync]
poll_interval_s = 0.1
[subscription_sync.namespaces."{NAMESPACE}"]
subscriptions = "all"
"""


def gateway_stats(gateway) -> dict:
    return gateway.get("/admin/georep/v1/stats?limit=10000")


def all_replicated(gateway, partitions: int, messages: int) -> bool:
    stats = gateway_stats(gateway)
    done = [
        r
        for r in stats["replicators"]
        if r["connected"] and r["replicationBacklog"] == 0 and r["msgOutCounter"] >= messages
    ]
    sync = stats["subscriptionSync"]
    return len(done) >= partitions and sync["topicsConnected"] >= partitions


def wait_replicated(gateway, partitions: int, messages: int) -> None:
    try:
        wait_for(lambda: all_replicated(gateway, partitions, messages), timeout_s=300)
    except TimeoutError:
        stats = gateway_stats(gateway)
        behind = [
            r
            for r in stats["replicators"]
            if not (r["connected"] and r["replicationBacklog"] == 0 and r["msgOutCounter"])
        ]
        failing = [t for t in stats["subscriptionSync"]["topics"] if not t["connected"]]
        raise AssertionError(
            f"{len(behind)} replicators behind, e.g. {json.dumps(behind[:2])};"
            f" {len(failing)} syncs not attached, e.g. {json.dumps(failing[:2])}"
        ) from None


class ScaleWorld(World):
    #: Every topic partition the module's tests replicate.
    topics: list[str]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    world = ScaleWorld(tmp_path_factory.mktemp("sync-scale"), names=("A", "B"))
    try:
        for cluster in world.clusters.values():
            cluster.start()
            status, _ = http(
                "PUT",
                f"{admin_url(cluster)}/admin/v2/tenants/many",
                {"allowedClusters": [cluster.name]},
            )
            assert status in (204, 409)
            status, _ = http("PUT", f"{admin_url(cluster)}/admin/v2/namespaces/{NAMESPACE}")
            assert status in (204, 409)
        topics: list[str] = []
        for index in range(PARTITIONED):
            base = f"persistent://{NAMESPACE}/p{index}"
            create_partitioned_topic(world.a, base, PARTITIONS)
            topics += [f"{base}-partition-{i}" for i in range(PARTITIONS)]
        topics += [f"persistent://{NAMESPACE}/plain{index}" for index in range(PLAIN)]
        world.topics = topics
        produce_once(world.a.url, topics, "first")
        world.gateways = {}
        from tests.harness.gateway import GatewayProcess

        for name, remote in (("A", world.b), ("B", world.a)):
            limit = f"\n[limits]\nsync_topics_max = {len(topics) - 1}\n" if name == "B" else ""
            world.gateways[name] = GatewayProcess(
                world.root / f"gw-{name.lower()}",
                local=world.clusters[name],
                remotes=[remote],
                policies={NAMESPACE: ["B"]} if name == "A" else None,
                extra_toml=SYNC_TOML + limit,
            )
            world.gateways[name].start()
        yield world
    finally:
        world.stop()


def produce_once(url: str, topics: list[str], tag: str) -> None:
    client = pulsar.Client(url, operation_timeout_seconds=60)
    try:
        for topic in topics:
            producer = client.create_producer(topic, batching_enabled=False)
            producer.send(f"{tag} {topic}".encode())
            producer.close()
    finally:
        client.close()


def test_every_partition_replicated_and_synced_idle_costs_no_state_read(world):
    gateway = world.gateways["A"]
    wait_replicated(gateway, len(world.topics), 1)
    wait_for(
        lambda: (
            gateway_stats(world.gateways["B"])["subscriptionSync"]["topicsConnected"]
            >= len(world.topics) - 1
        ),
        timeout_s=300,
    )
    health = gateway.get("/health")
    assert health["status"] == "ok", health
    # B syncs one partition fewer than there are: loud, not silent.
    health = world.gateways["B"].get("/health")
    assert health["status"] == "degraded", health
    assert any("1 topic partitions not synced" in p for p in health["problems"]), health
    status, text = http("GET", f"{world.gateways['B'].url}/metrics")
    metrics = text.decode() if isinstance(text, bytes) else str(text)
    assert 'georep_gateway_topics_over_limit{kind="sync",local_cluster="B"} 1.0' in metrics

    # Pages of the stats, in topic order.
    first = gateway.get("/admin/georep/v1/stats?limit=100")
    assert len({r["topic"] for r in first["replicators"]}) == 100
    assert first["page"] == {"offset": 0, "limit": 100, "topics": 240, "next": 100}
    last = gateway.get("/admin/georep/v1/stats?offset=200&limit=100")
    assert last["page"]["next"] is None and len(last["subscriptionSync"]["topics"]) == 40
    status, refused = http("GET", f"{gateway.url}/admin/georep/v1/stats?limit=%C2%B2")
    assert status == 400, (status, refused)

    # Nothing happens: no partition's states are read. Sampled twice, far enough apart
    # for the old per-partition polling (every 0.1 s here) to have read each many times.
    def reads() -> int:
        return sum(t["stateReads"] for t in gateway_stats(gateway)["subscriptionSync"]["topics"])

    wait_for(lambda: (before := reads()) == reads() and before >= 0, timeout_s=60)
    before = reads()
    time.sleep(3)
    assert reads() == before, "idle partitions' subscription states were read"
    # The change feed is what woke them: one watch for the namespace, told of no topic.
    watches = gateway_stats(gateway)["subscriptionSync"]["watches"]
    assert [w["namespace"] for w in watches] == [NAMESPACE]


def test_acknowledgements_on_a_sample_show_on_b(world):
    synced_on_b = sorted(world.topics)[:-1]  # B's limit leaves the last one out
    sample = random.Random(3).sample(synced_on_b, 5)
    client = pulsar.Client(world.a.url, operation_timeout_seconds=60)
    try:
        for topic in sample:
            consumer = client.subscribe(
                topic,
                "s",
                consumer_type=pulsar.ConsumerType.Shared,
                initial_position=pulsar.InitialPosition.Earliest,
            )
            consumer.acknowledge(consumer.receive(10_000))
            consumer.close()
    finally:
        client.close()
    for topic in sample:
        path = topic.removeprefix("persistent://")

        def synced(path: str = path) -> bool:
            status, state = http(
                "GET", f"{admin_url(world.b)}/admin/georep/v1/persistent/{path}/sync-state"
            )
            if status != 200:
                return False
            s = state["subscriptions"].get("s")
            return bool(s) and s["markDelete"]["entryId"] >= 0

        try:
            wait_for(synced, timeout_s=60)
        except TimeoutError:
            stats = world.gateways["A"].get(f"/admin/georep/v1/stats?topic={topic}")
            status, b_state = http(
                "GET", f"{admin_url(world.b)}/admin/georep/v1/persistent/{path}/sync-state"
            )
            raise AssertionError(
                f"{topic} not synced to B: A's gateway {json.dumps(stats['subscriptionSync'])};"
                f" B's state {status} {json.dumps(b_state)}"
            ) from None


def test_restart_beside_every_partition_loses_nothing_stores_nothing_twice(world):
    gateway = world.gateways["A"]
    gateway.kill()
    produce_once(world.a.url, world.topics, "second")
    log_lines = len(gateway.log_path.read_text(errors="replace").splitlines())
    gateway.start()
    wait_replicated(gateway, len(world.topics), 1)
    for topic in random.Random(4).sample(world.topics, 20):
        payloads = payloads_on(world.b.url, topic)
        assert payloads == {f"first {topic}".encode(): 1, f"second {topic}".encode(): 1}, topic
    written = len(gateway.log_path.read_text(errors="replace").splitlines()) - log_lines
    # A retry storm writes a line per partition per attempt; a clean start a few.
    assert written < len(world.topics), f"{written} log lines after the restart"
    assert "already has a consumer" not in gateway.log_path.read_text(errors="replace")
