"""Three clusters and their gateways as processes, in the topology of
docs/ARCHITECTURE.md ("Policies"): A↔B both ways, A→C one way, B and C unrelated. Checked
with producers on every side, by origin position (entries as stored) and by payload
(pulsar-client readers):

- every message exactly once on each side it should reach, and none looping back;
- chains are not followed: B's messages reach A, and A does not pass them on to C;
- nothing crosses between B and C;
- a policy changed at run time: a cluster added receives the topic's retained backlog
  from the earliest entry; removed, its replicator stops and its subscription is deleted;
  added back, it continues without duplicates;
- partitioned topics created after the gateways started are picked up, partition by
  partition, and created on the remote with the same partitions.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tests.harness.gateway import (
    ClusterProcess,
    World,
    admin_url,
    create_partitioned_topic,
    http,
    local_positions,
    origin_counts,
    payloads_on,
    produce,
    read_entries,
)
from tests.harness.waiting import wait_for

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

TOPO = "geo/topo"
CHANGE = "geo/change"
PARTS = "geo/parts"


class Topology(World):
    def start_topology(self) -> Topology:
        """Start the clusters and gateways of this module's topology."""
        a, b, c = (self.clusters[name] for name in ("A", "B", "C"))
        return self.start(
            (TOPO, CHANGE, PARTS),
            {
                "A": {"remotes": [b, c], "policies": {TOPO: ["B", "C"], PARTS: ["B"]}},
                # B knows C as a remote but has no policy for it: B and C stay unrelated.
                "B": {"remotes": [a, c], "policies": {TOPO: ["A"]}},
                "C": {"remotes": [b]},
            },
        )

    def caught_up(self, gateway: str, topic: str, remotes: int) -> bool:
        found = self.gateways[gateway].replicators(topic)
        return len(found) == remotes and all(
            r["replicationBacklog"] == 0 and r["connected"] and r["bufferedEntries"] == 0
            for r in found
        )


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    world = Topology(tmp_path_factory.mktemp("topologies"))
    try:
        yield world.start_topology()
    finally:
        world.stop()


def copies_from(entries, cluster: str) -> dict:
    return {k: n for k, n in origin_counts(entries).items() if k[0] == cluster}


def test_both_ways_one_way_and_unrelated(world) -> None:
    topic = f"persistent://{TOPO}/orders"
    sent: dict[Any, Any] = {}
    producers = [
        threading.Thread(
            target=lambda n=name, count=count: sent.__setitem__(
                n, produce(world.clusters[n].url, topic, count, n.lower())
            )
        )
        for name, count in (("A", 3000), ("B", 2000), ("C", 500))
    ]
    for thread in producers:
        thread.start()
    for thread in producers:
        thread.join(120)
    assert {name: len(payloads) for name, payloads in sent.items()} == {
        "A": 3000,
        "B": 2000,
        "C": 500,
    }
    wait_for(lambda: world.caught_up("A", topic, 2), timeout_s=90)
    wait_for(lambda: world.caught_up("B", topic, 1), timeout_s=90)

    entries = {name: read_entries(cluster, topic) for name, cluster in world.clusters.items()}
    local = {name: local_positions(entries[name], name) for name in entries}
    # A↔B: each side holds the other's messages once, and its own never come back.
    assert copies_from(entries["B"], "A") == {p: 1 for p in local["A"]}
    assert copies_from(entries["A"], "B") == {p: 1 for p in local["B"]}
    assert copies_from(entries["A"], "A") == {} and copies_from(entries["B"], "B") == {}
    # A→C: C holds A's messages once; B's messages are not passed on by A (no chains).
    assert copies_from(entries["C"], "A") == {p: 1 for p in local["A"]}
    assert copies_from(entries["C"], "B") == {}
    # B and C unrelated: C's messages go nowhere.
    assert copies_from(entries["A"], "C") == {} and copies_from(entries["B"], "C") == {}

    by_payload = {name: payloads_on(cluster.url, topic) for name, cluster in world.clusters.items()}
    mine = {name: {p: 1 for p in sent[name]} for name in sent}
    assert by_payload["A"] == {**mine["A"], **mine["B"]}
    assert by_payload["B"] == {**mine["B"], **mine["A"]}
    assert by_payload["C"] == {**mine["C"], **mine["A"]}


def subscriptions_on(cluster: ClusterProcess, topic: str) -> list[str]:
    path = topic.removeprefix("persistent://")
    status, stats = http("GET", f"{admin_url(cluster)}/admin/v2/persistent/{path}/stats")
    assert status == 200, stats
    return sorted(stats["subscriptions"])


def test_policy_change_at_run_time(world) -> None:
    gateway = world.gateways["A"]
    topic = f"persistent://{CHANGE}/events"
    first = produce(world.a.url, topic, 800, "early")
    assert gateway.replicators(topic) == []  # no policy yet: nothing replicates

    gateway.put_namespace_policy(CHANGE, ["C"])  # added: from the earliest retained entry
    wait_for(lambda: world.caught_up("A", topic, 1), timeout_s=60)
    assert payloads_on(world.c.url, topic) == {p: 1 for p in first}
    assert "georep.repl.C" in subscriptions_on(world.a, topic)

    gateway.put_namespace_policy(CHANGE, [])  # removed: stops, subscription deleted
    wait_for(lambda: gateway.replicators(topic) == [], timeout_s=30)
    wait_for(lambda: "georep.repl.C" not in subscriptions_on(world.a, topic), timeout_s=30)
    second = produce(world.a.url, topic, 300, "while-off")
    assert payloads_on(world.c.url, topic) == {p: 1 for p in first}  # nothing new

    status, _ = http(
        "PUT",
        f"{gateway.url}/admin/georep/v1/persistent/{CHANGE}/events/replication",
        {"clusters": ["B"]},
    )
    assert status == 200  # a topic policy overrides the (empty) namespace policy
    gateway.put_namespace_policy(CHANGE, ["C"])  # and C back at namespace level: ignored
    wait_for(lambda: world.caught_up("A", topic, 1), timeout_s=60)
    assert [r["remoteCluster"] for r in gateway.replicators(topic)] == ["B"]
    assert payloads_on(world.b.url, topic) == {p: 1 for p in first + second}

    status, _ = http(
        "DELETE", f"{gateway.url}/admin/georep/v1/persistent/{CHANGE}/events/replication"
    )
    assert status == 204  # the namespace's [C] applies again: C resumes, nothing twice
    wait_for(
        lambda: [r["remoteCluster"] for r in gateway.replicators(topic)] == ["C"], timeout_s=30
    )
    wait_for(lambda: world.caught_up("A", topic, 1), timeout_s=60)
    entries_on_c = read_entries(world.c, topic)
    assert set(origin_counts(entries_on_c).values()) == {1}
    assert payloads_on(world.c.url, topic) == {p: 1 for p in first + second}


def test_partitioned_topics_are_picked_up(world) -> None:
    gateway = world.gateways["A"]
    topic = f"persistent://{PARTS}/sharded"
    create_partitioned_topic(world.a, topic, 3)
    sent = produce(world.a.url, topic, 3000, "p")
    wait_for(lambda: len(gateway.replicators(topic)) == 3, timeout_s=30)
    wait_for(lambda: world.caught_up("A", f"{topic}-partition-", 3), timeout_s=90)
    path = topic.removeprefix("persistent://")
    status, metadata = http("GET", f"{admin_url(world.b)}/admin/v2/persistent/{path}/partitions")
    assert (status, metadata) == (200, {"partitions": 3})
    for index in range(3):
        partition = f"{topic}-partition-{index}"
        on_a = read_entries(world.a, partition)
        on_b = read_entries(world.b, partition)
        assert on_a, "keys spread the messages over every partition"
        assert origin_counts(on_b) == {p: 1 for p in local_positions(on_a, "A")}
    assert payloads_on(world.b.url, topic) == {p: 1 for p in sent}
