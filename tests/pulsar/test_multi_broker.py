"""The gateway beside a real Pulsar cluster of two brokers, while its bundles move.

A is a cluster of ZooKeeper, one bookie and two brokers (``pulsar_tools/cluster.py``),
B the session's standalone B; a gateway beside each replicates ``georep/grepl`` both
ways and syncs its subscriptions (Pulsar's deduplication on, as the replicator needs).
On A, a partitioned topic (4 partitions) and two topics more, over 8 bundles spread
across both brokers. While an application produces to A and a Shared subscription
acknowledges out of order (every seventh message left unacknowledged), A's bundles move
three ways:

1. every topic is unloaded (its broker closes producers and consumers, and the next
   lookup may name the other broker);
2. the bundle of one topic is split (``unload=true``): its topics move to two new
   bundles;
3. a rolling restart: broker 0, then broker 1, each with SIGTERM and started again on
   its own ports (the gateway's service URL is broker 0's, so its lookups fail while
   broker 0 is down, and follow redirects to whichever broker owns a topic after).

The gateways follow lookups, redirects and the brokers' close commands. Afterwards B
holds every message once, its subscription leaves unacknowledged exactly what A's left,
and a consumer that fails over to B receives exactly those: 0 lost, 0 delivered twice.
"""

from __future__ import annotations

import threading
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pulsar
import pytest

from pulsar_tools.admin import PulsarAdmin, topic_path
from pulsar_tools.cluster import ClusterSpec, PulsarCluster
from pulsar_tools.standalone import PulsarStandalone
from tests.harness.failover_checks import (
    drain,
    leaves,
    positions_and_payloads,
    quiet_client,
    unacknowledged_on,
)
from tests.harness.gateway import GatewayProcess, payloads_on
from tests.harness.waiting import wait_for

pytestmark = [pytest.mark.timeout(900), pytest.mark.slow]

TENANT = "georep"
NAMESPACE = "georep/grepl"
PARTITIONS = 4
SYNC_TOML = f"""
[subscription_sync]
poll_interval_s = 0.1
[subscription_sync.namespaces."{NAMESPACE}"]
"""


@pytest.fixture(scope="module")
def clusters(
    pulsar_jars: Path, pulsar_pair: dict[str, PulsarStandalone], tmp_path_factory
) -> Iterator[tuple[PulsarCluster, PulsarStandalone]]:
    """A: two brokers; B: the session's standalone B (one JVM fewer to start). Both with
    the namespace, deduplication on; B's tenant is the session's, left as it is."""
    base = tmp_path_factory.mktemp("pulsar-multi")
    a = PulsarCluster(ClusterSpec("A", base / "A"), pulsar_jars)
    b = pulsar_pair["B"]
    try:
        started = time.monotonic()
        a.start()
        print(f"pulsar cluster A (2 brokers) started in {time.monotonic() - started:.1f} s")
        PulsarAdmin(a.admin_url).ensure_tenant(TENANT, [a.name])
        for cluster in (a, b):
            admin = PulsarAdmin(cluster.admin_url)
            admin.ensure_namespace(*NAMESPACE.split("/"))
            admin.request("POST", f"/admin/v2/namespaces/{NAMESPACE}/deduplication", True)
        yield a, b
    finally:  # a failed start or set-up leaves no JVM behind either
        a.stop()


@pytest.fixture(scope="module")
def gateways(clusters, tmp_path_factory) -> Iterator[dict[str, GatewayProcess]]:
    a, b = clusters
    root = tmp_path_factory.mktemp("multi-gateways")
    started: dict[str, GatewayProcess] = {}
    try:
        for local, remote in ((a, b), (b, a)):
            gateway = GatewayProcess(
                root / local.name,
                local=local,
                remotes=[remote],
                policies={NAMESPACE: [remote.name]},
                extra_toml=SYNC_TOML,
                kind="pulsar",
            )
            gateway.start()
            started[local.name] = gateway
        yield started
    finally:
        for gateway in started.values():
            gateway.kill()


# --- where topics live, and moving them ----------------------------------------------------


def lookup(admin: PulsarAdmin, topic: str) -> dict[str, Any]:
    """Where ``topic`` is served now: ``brokerUrl`` and ``httpUrl`` of its owner."""
    document: dict[str, Any] = admin.request("GET", f"/lookup/v2/topic/{topic_path(topic)}")
    return document


def owner(admin: PulsarAdmin, topic: str) -> str:
    return str(lookup(admin, topic)["brokerUrl"])


def bundle_of(admin: PulsarAdmin, topic: str) -> str:
    """The bundle range holding ``topic``, as Pulsar writes it (plain text)."""
    url = f"{admin.admin_url}/lookup/v2/topic/{topic_path(topic)}/bundle"
    with urllib.request.urlopen(url, timeout=30) as response:
        return str(response.read().decode())


def unload_bundle(admin: PulsarAdmin, bundle: str, destination: str | None = None) -> None:
    query = f"?destinationBroker={urllib.parse.quote(destination)}" if destination else ""
    admin.request("PUT", f"/admin/v2/namespaces/{NAMESPACE}/{bundle}/unload{query}")


class Application:
    """A producer and a Shared consumer on A, each in a thread, while bundles move: the
    official client reconnects on its own. Every seventh message of a topic is left
    unacknowledged; the others are acknowledged in the order received."""

    def __init__(self, url: str, topics: list[str]) -> None:
        self.client = quiet_client(url)
        self.topics = topics
        self.sent: set[bytes] = set()
        self.send_failures = 0
        self.received: set[bytes] = set()
        self.acked: set[bytes] = set()
        self.kept: set[bytes] = set()
        self.producing = threading.Event()
        self.producing.set()
        self.consuming = threading.Event()
        self.consuming.set()
        # Replicated: the subscriptions the gateway syncs by default.
        self.consumer = self.client.subscribe(
            topics,
            "s",
            consumer_type=pulsar.ConsumerType.Shared,
            replicate_subscription_state_enabled=True,
        )
        self.threads = [
            threading.Thread(target=self._produce, daemon=True),
            threading.Thread(target=self._consume, daemon=True),
        ]
        for thread in self.threads:
            thread.start()

    def _produce(self) -> None:
        producers = [
            self.client.create_producer(
                topic,
                batching_enabled=False,
                send_timeout_millis=60_000,
                message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution,
            )
            for topic in self.topics
        ]
        index = 0
        while self.producing.is_set():
            for topic, producer in zip(self.topics, producers, strict=True):
                payload = f"{topic.rsplit('/', 1)[1]}-{index}".encode()
                try:
                    producer.send(payload)
                    self.sent.add(payload)
                except pulsar.PulsarException:
                    self.send_failures += 1
            index += 1
            time.sleep(0.02)
        for producer in producers:
            producer.close()

    def _consume(self) -> None:
        while self.consuming.is_set():
            try:
                message = self.consumer.receive(500)
            except pulsar.Timeout:
                continue
            payload = message.data()
            self.received.add(payload)
            if int(payload.rsplit(b"-", 1)[1]) % 7 == 3:
                self.kept.add(payload)
            else:
                self.consumer.acknowledge(message)
                self.acked.add(payload)

    def stop_producing(self) -> None:
        self.producing.clear()
        self.threads[0].join(120)

    def close(self) -> None:
        self.producing.clear()
        self.consuming.clear()
        for thread in self.threads:
            thread.join(120)
        self.client.close()


def test_unloads_split_and_rolling_restart_zero_lost_zero_twice(clusters, gateways):
    a, b = clusters
    admin_a = PulsarAdmin(a.admin_url)
    run = uuid.uuid4().hex[:8]
    shapes = {
        f"persistent://{NAMESPACE}/orders-{run}": PARTITIONS,
        f"persistent://{NAMESPACE}/audit-{run}": 0,
        f"persistent://{NAMESPACE}/billing-{run}": 0,
    }
    for topic, partitions in shapes.items():
        if partitions:
            admin_a.request("PUT", f"/admin/v2/{topic_path(topic)}/partitions", partitions)
    leaf_topics = [leaf for topic, n in shapes.items() for leaf in leaves(topic, n)]
    app = Application(a.service_urls, list(shapes))
    moves: list[str] = []
    try:
        wait_for(lambda: len(app.received) >= 60, timeout_s=120)
        owners = {leaf: owner(admin_a, leaf) for leaf in leaf_topics}
        brokers = [ports.service_url for ports in a.spec.broker_ports]
        if len(set(owners.values())) < 2:  # spread them: one topic's bundle to the other
            leaf = leaf_topics[0]
            other = next(p for p in a.spec.broker_ports if p.service_url != owners[leaf])
            unload_bundle(admin_a, bundle_of(admin_a, leaf), other.broker_id)
            wait_for(lambda: owner(admin_a, leaf) == other.service_url, timeout_s=60)
            owners = {leaf: owner(admin_a, leaf) for leaf in leaf_topics}
        assert set(owners.values()) == set(brokers), owners
        moves.append(f"spread {sorted(owners.values()).count(brokers[0])}:{len(owners)}")

        def traffic_flows() -> None:
            before = len(app.received)
            wait_for(lambda: len(app.received) >= before + 30, timeout_s=120)

        # 1. every topic unloaded
        for leaf in leaf_topics:
            admin_a.request("PUT", f"/admin/v2/{topic_path(leaf)}/unload")
        moves.append("unloaded every topic")
        traffic_flows()
        # 2. a bundle split, its topics unloaded to the halves
        leaf = leaf_topics[PARTITIONS]  # audit
        bundle = bundle_of(admin_a, leaf)
        admin_a.request("PUT", f"/admin/v2/namespaces/{NAMESPACE}/{bundle}/split?unload=true")
        wait_for(lambda: bundle_of(admin_a, leaf) != bundle, timeout_s=60)
        moves.append(f"split {bundle} -> {bundle_of(admin_a, leaf)}")
        traffic_flows()
        # 3. a rolling restart, SIGTERM, one broker after the other
        for index in range(len(a.brokers)):
            code = a.stop_broker(index)
            a.start_broker(index)
            moves.append(f"broker {index} restarted (SIGTERM exit {code})")
            traffic_flows()
        app.stop_producing()
        wait_for(lambda: app.sent <= app.received, timeout_s=180)
        # A's own cursor holds what the application did (an acknowledgement sent while
        # its topic moved may be lost, and the message is then delivered and acked again).
        on_a = {leaf: positions_and_payloads(a.service_urls, leaf) for leaf in leaf_topics}
        for leaf in leaf_topics:

            def as_the_application_left(leaf: str = leaf) -> bool:
                return unacknowledged_on(a, leaf, on_a[leaf]) == app.kept & set(on_a[leaf].values())

            wait_for(as_the_application_left, timeout_s=120)
        # B: every message, and the subscription as A left it
        for leaf in leaf_topics:
            expected = set(on_a[leaf].values())

            def all_copied(
                leaf: str = leaf, expected: set[bytes] = expected
            ) -> dict[tuple[int, int], bytes] | None:
                found = positions_and_payloads(b.service_url, leaf)
                return found if set(found.values()) >= expected else None

            try:
                copies = wait_for(all_copied, timeout_s=180)
            except TimeoutError:
                missing = expected - set(positions_and_payloads(b.service_url, leaf).values())
                replicators = gateways["A"].replicators(leaf)
                raise AssertionError(
                    f"{leaf} (on {owner(admin_a, leaf)}): {len(missing)} of {len(expected)}"
                    f" messages not on B; A's replicator: {replicators}"
                ) from None

            def synced_as_a_left(
                leaf: str = leaf,
                copies: dict[tuple[int, int], bytes] = copies,
                expected: set[bytes] = expected,
            ) -> bool:
                return unacknowledged_on(b, leaf, copies) == app.kept & expected

            try:
                wait_for(synced_as_a_left, timeout_s=180)
            except TimeoutError:
                left = unacknowledged_on(b, leaf, copies)
                for name, gateway in gateways.items():
                    sync = gateway.get("/admin/georep/v1/stats")["subscriptionSync"]
                    mine = [t for t in sync["topics"] if t["topic"] == leaf]
                    print(f"gateway {name}: {sync['changes']} {sync['sideChannels']} {mine}")
                raise AssertionError(
                    f"{leaf} (on {owner(admin_a, leaf)}) not synced to B:"
                    f" {len(left - app.kept)} acknowledged on A are not on B,"
                    f" {len(app.kept & expected - left)} left on A are acknowledged on B"
                ) from None
        twice_on_b = {
            payload
            for leaf in leaf_topics
            for payload, count in payloads_on(b.service_url, leaf).items()
            if count > 1
        }
        stats = gateways["A"].get("/admin/georep/v1/stats")
        app.consuming.clear()
        app.threads[1].join(60)
        app.consumer.close()
        got = drain(b.service_url, list(shapes))  # the failover: the subscription on B
    finally:
        app.close()
    replicators = [r for r in stats["replicators"] if run in r["topic"]]
    errors = sum(r["errorsCounter"] for r in replicators)
    lost = app.kept - set(got)
    redelivered = app.acked & set(got)
    duplicates = len(got) - len(set(got))
    print(
        f"A's bundles moved: {'; '.join(moves)}. {len(app.sent)} sent ({app.send_failures}"
        f" sends failed), {len(app.acked)} acknowledged, {len(app.kept)} left; the A->B"
        f" replicators met {errors} errors on the way. After failover to B: {len(lost)} lost,"
        f" {len(redelivered)} acknowledged delivered again, {duplicates} delivered twice,"
        f" {len(twice_on_b)} stored twice on B"
    )
    assert errors, "the replicators never met a move: the gateway was not put to the test"
    assert app.sent <= app.received, "A lost a message the application had sent"
    assert not twice_on_b
    assert (len(lost), len(redelivered), duplicates) == (0, 0, 0)
    assert app.kept, "no message was left unacknowledged: the failover checked nothing"
