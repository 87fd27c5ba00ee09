"""Several gateway instances for one cluster (gateway/ownership.py), as processes.

Clusters A and B; the gateway of A runs as two, then three instances sharing one SQLite
metadata store; B's single gateway applies the subscription states A's instances send.
Under steady traffic on 12 topic partitions of A, instances are killed with kill -9,
stopped with SIGTERM and added. Checked throughout: every partition runs on exactly one
live instance once ownership settles; at the end every message acknowledged on A is on
B exactly once (by origin position and by payload), and the mark-delete position of a
subscription that A's consumer acknowledges in order never moves backwards on B.

How quickly a takeover happens is measured in ``bench/instances.py``, not here.
"""

from __future__ import annotations

import collections
import contextlib
import threading
import time

import pulsar
import pytest

from tests.harness.gateway import (
    ClusterProcess,
    GatewayProcess,
    admin_url,
    create_namespace,
    create_partitioned_topic,
    http,
    local_positions,
    origin_counts,
    ownership_agreed,
    payloads_on,
    produce,
    read_entries,
)
from tests.harness.waiting import wait_for

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]

NAMESPACE = "geo/instances"
PARTITIONED = f"persistent://{NAMESPACE}/orders"
PLAIN = [f"persistent://{NAMESPACE}/plain-{i}" for i in range(4)]
PARTITIONS = [f"{PARTITIONED}-partition-{i}" for i in range(8)] + PLAIN
ACKED_TOPIC = PLAIN[0]
SYNC_TOML = """
[subscription_sync]
poll_interval_s = 0.1
"""
RECEIVE_TOML = f"""
[subscription_sync]
poll_interval_s = 0.1
[subscription_sync.namespaces."{NAMESPACE}"]
"""


class Instances:
    """The clusters, B's gateway, and the instances of A's gateway by name."""

    def __init__(self, root) -> None:
        self.root = root
        self.a = ClusterProcess(root / "a", name="A")
        self.b = ClusterProcess(root / "b", name="B")
        self.shared_store = root / "gateway-a-shared.db"
        self.instances: dict[str, GatewayProcess] = {}
        self.gateway_b: GatewayProcess | None = None

    def start(self) -> Instances:
        for cluster in (self.a, self.b):
            cluster.start()
            create_namespace(cluster, NAMESPACE)
        create_partitioned_topic(self.a, PARTITIONED, 8)
        for index, topic in enumerate(PLAIN):  # a plain topic exists once written to
            produce(self.a.url, topic, 1, f"first{index}", batching=False)
        self.gateway_b = GatewayProcess(
            self.root / "gw-b", local=self.b, remotes=[self.a], extra_toml=RECEIVE_TOML
        )
        self.gateway_b.start()
        return self

    def add(self, name: str) -> GatewayProcess:
        instance = GatewayProcess(
            self.root / f"gw-a-{name}",
            local=self.a,
            remotes=[self.b],
            policies={NAMESPACE: ["B"]},
            extra_toml=SYNC_TOML,
            metadata=self.shared_store,
            instance=name,
        )
        instance.start()
        self.instances[name] = instance
        return instance

    def alive(self) -> dict[str, GatewayProcess]:
        return {
            name: instance
            for name, instance in self.instances.items()
            if instance.process is not None and instance.process.poll() is None
        }

    def running(self) -> dict[str, set[str]]:
        """Instance -> the partitions it runs a replicator or a sync of."""
        out = {}
        for name, instance in self.alive().items():
            stats = instance.get("/admin/georep/v1/stats?limit=10000")
            topics = {r["topic"] for r in stats["replicators"]}
            topics |= {s["topic"] for s in stats["subscriptionSync"]["topics"]}
            out[name] = topics & set(PARTITIONS)
        return out

    def settled(self) -> dict[str, set[str]] | None:
        """Every partition on exactly one live instance, and the instances agreeing on
        the membership and done handing over; None until then."""
        if not ownership_agreed(self.alive().values()):
            return None
        running = self.running()
        counted = [topic for topics in running.values() for topic in topics]
        if sorted(counted) != sorted(PARTITIONS):
            return None
        return running

    def wait_settled(self, why: str) -> dict[str, set[str]]:
        try:
            return wait_for(self.settled, timeout_s=90)
        except TimeoutError:
            detail = {}
            for name, instance in self.alive().items():
                with contextlib.suppress(Exception):
                    detail[name] = instance.get("/admin/georep/v1/ownership")
            raise AssertionError(
                f"{why}: partitions never settled on one instance each;"
                f" running {self.running()}; ownership {detail}"
            ) from None

    def stop(self) -> None:
        for process in [*self.instances.values(), self.gateway_b, self.a, self.b]:
            if process is not None:
                process.kill()


class Traffic:
    """Steady production on every partition (payloads recorded once acknowledged), and a
    consumer of ``s`` on A acknowledging ``ACKED_TOPIC`` in order."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.acked: list[bytes] = []
        self.stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._produce, daemon=True),
            threading.Thread(target=self._consume, daemon=True),
        ]

    def start(self) -> Traffic:
        for thread in self._threads:
            thread.start()
        return self

    def finish(self) -> list[bytes]:
        self.stop.set()
        for thread in self._threads:
            thread.join(60)
        return self.acked

    def _produce(self) -> None:
        client = pulsar.Client(self.url, operation_timeout_seconds=30)
        producers = [
            client.create_producer(topic, batching_enabled=False) for topic in [PARTITIONED, *PLAIN]
        ]

        def done(result, _message_id, payload: bytes) -> None:
            if result == pulsar.Result.Ok:
                with self._lock:
                    self.acked.append(payload)

        sequence = 0
        try:
            while not self.stop.is_set():
                for producer in producers:
                    payload = f"m-{sequence:07d}".encode()
                    producer.send_async(payload, lambda r, m, p=payload: done(r, m, p))
                    sequence += 1
                time.sleep(0.02)  # about 250 messages a second in all
            for producer in producers:
                producer.flush()
        finally:
            client.close()

    def _consume(self) -> None:
        client = pulsar.Client(self.url, operation_timeout_seconds=30)
        consumer = client.subscribe(
            ACKED_TOPIC,
            "s",
            consumer_type=pulsar.ConsumerType.Failover,
            replicate_subscription_state_enabled=True,
            initial_position=pulsar.InitialPosition.Earliest,
        )
        try:
            while not self.stop.is_set():
                with contextlib.suppress(pulsar.Timeout):
                    consumer.acknowledge(consumer.receive(timeout_millis=500))
        finally:
            client.close()


def mark_delete_on(cluster: ClusterProcess, topic: str) -> tuple[int, int] | None:
    path = topic.removeprefix("persistent://")
    status, document = http(
        "GET", f"{admin_url(cluster)}/admin/georep/v1/persistent/{path}/sync-state"
    )
    state = document.get("subscriptions", {}).get("s") if status == 200 else None
    if state is None:
        return None
    return state["markDelete"]["ledgerId"], state["markDelete"]["entryId"]


class MarkDeleteWatch(threading.Thread):
    """Samples B's mark-delete position of ``s`` on ``ACKED_TOPIC``."""

    def __init__(self, cluster: ClusterProcess) -> None:
        super().__init__(daemon=True)
        self.cluster = cluster
        self.seen: list[tuple[int, int]] = []
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.wait(0.2):
            with contextlib.suppress(Exception):
                position = mark_delete_on(self.cluster, ACKED_TOPIC)
                if position is not None:
                    self.seen.append(position)


@pytest.fixture
def world(tmp_path):
    world = Instances(tmp_path)
    try:
        yield world.start()
    finally:
        world.stop()


def busiest(running: dict[str, set[str]]) -> str:
    return max(running, key=lambda name: (len(running[name]), name))


def check_exactly_once(world: Instances, acked: list[bytes]) -> None:
    """Every partition's origin entries on B once each, every acknowledged payload once."""

    def caught_up() -> bool:
        for instance in world.alive().values():
            stats = instance.get("/admin/georep/v1/stats?limit=10000")
            if any(r["replicationBacklog"] != 0 for r in stats["replicators"]):
                return False
        return True

    wait_for(caught_up, timeout_s=120)
    on_b: collections.Counter = collections.Counter()
    for topic in PARTITIONS:  # each read reaches the last message, then waits 0.5 s more
        copies = origin_counts(read_entries(world.b, topic, quiet_s=0.5))
        origin = local_positions(read_entries(world.a, topic, quiet_s=0.5), "A")
        assert set(copies) == origin, topic
        assert [p for p, n in copies.items() if n > 1] == [], f"{topic}: stored twice"
        on_b.update(payloads_on(world.b.url, topic, quiet_ms=500))
    assert {p: n for p, n in on_b.items() if n != 1} == {}, "a payload stored twice"
    assert set(acked) <= set(on_b), f"{len(set(acked) - set(on_b))} acknowledged messages lost"


def test_two_instances_share_take_over_after_kill_hand_over_on_stop(world) -> None:
    world.add("a1")
    world.add("a2")
    shares = world.wait_settled("two instances")
    assert all(shares.values()), f"one instance runs nothing: {shares}"
    watch = MarkDeleteWatch(world.b)
    watch.start()
    traffic = Traffic(world.a.url).start()
    try:
        wait_for(lambda: len(traffic.acked) >= 500, timeout_s=60)
        victim = busiest(shares)
        world.instances[victim].kill()  # kill -9 under traffic
        after_kill = world.wait_settled(f"after kill -9 of {victim}")
        assert set(after_kill) == {"a1", "a2"} - {victim}

        world.add("a3")  # a new instance takes its share
        joined = world.wait_settled("after a3 joined")
        assert joined["a3"], f"the new instance runs nothing: {joined}"

        leaving = next(name for name in joined if name != "a3")
        assert world.instances[leaving].terminate() == 0  # a clean stop hands over
        world.wait_settled(f"after SIGTERM of {leaving}")
        wait_for(lambda: len(traffic.acked) >= 2_000, timeout_s=60)
    finally:
        acked = traffic.finish()
    try:
        check_exactly_once(world, acked)
        wait_for(lambda: mark_delete_on(world.b, ACKED_TOPIC) is not None, timeout_s=60)
    finally:
        watch.halt.set()
        watch.join(5)
    assert watch.seen and watch.seen == sorted(watch.seen), "B's mark-delete moved backwards"


def test_three_instances_each_own_a_third_and_survive_a_kill(world) -> None:
    for name in ("a1", "a2", "a3"):
        world.add(name)
    shares = world.wait_settled("three instances")
    assert all(shares.values()), f"an instance runs nothing: {shares}"
    ownership = world.instances["a1"].get(f"/admin/georep/v1/ownership?topic={PLAIN[1]}")
    assert ownership["owner"] in shares and PLAIN[1] in shares[ownership["owner"]]
    traffic = Traffic(world.a.url).start()
    try:
        wait_for(lambda: len(traffic.acked) >= 500, timeout_s=60)
        world.instances[busiest(shares)].kill()
        world.wait_settled("after kill -9 of the busiest of three")
        wait_for(lambda: len(traffic.acked) >= 1_500, timeout_s=60)
    finally:
        acked = traffic.finish()
    check_exactly_once(world, acked)
