"""Subscription sync end to end: clusters and gateways as processes, pulsar-client apps.

Topology: A↔B both ways and A→C one way for namespace ``geo/sync`` (full mode); A↔B for
``geo/compat`` (pulsar-compatible mode). C replicates nothing; it names ``geo/sync`` in
its ``[subscription_sync]`` table so that it applies what A sends.

Each test consumes on A with a subscription opted in by the consumer flag, then checks
what a consumer that fails over would see: a fresh consumer of the same subscription on
B (or C) receives exactly the messages A did not acknowledge (full mode), or at least
those, and nothing below A's mark-delete position (pulsar-compatible mode).
"""

from __future__ import annotations

import json
import os
import random
import signal
import threading
import time

import pulsar
import pytest

from tests.harness.broker_cluster import open_client
from tests.harness.gateway import (
    ClusterProcess,
    World,
    admin_url,
    create_partitioned_topic,
    http,
    metric,
    produce,
    read_entries,
)
from tests.harness.waiting import wait_for

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

SYNC = "geo/sync"
COMPAT = "geo/compat"
SYNC_TOML = """
[subscription_sync]
snapshot_interval_s = 0.5
snapshot_timeout_s = 4.0
poll_interval_s = 0.1
[subscription_sync.namespaces."geo/compat"]
mode = "pulsar-compatible"
"""
RECEIVE_ONLY_TOML = """
[subscription_sync]
poll_interval_s = 0.1
[subscription_sync.namespaces."geo/sync"]
"""


class SyncWorld(World):
    def start_topology(self) -> SyncWorld:
        """Start the clusters and gateways of this module's topology."""
        a, b, c = (self.clusters[name] for name in ("A", "B", "C"))
        return self.start(
            (SYNC, COMPAT),
            {
                "A": {
                    "remotes": [b, c],
                    "policies": {SYNC: ["B", "C"], COMPAT: ["B"]},
                    "extra_toml": SYNC_TOML,
                },
                "B": {
                    "remotes": [a, c],
                    "policies": {SYNC: ["A"], COMPAT: ["A"]},
                    "extra_toml": SYNC_TOML,
                },
                "C": {"remotes": [a, b], "extra_toml": RECEIVE_ONLY_TOML},
            },
        )

    def sync_state(self, cluster: str, topic: str) -> dict:
        path = topic.removeprefix("persistent://")
        status, document = http(
            "GET",
            f"{admin_url(self.clusters[cluster])}/admin/georep/v1/persistent/{path}/sync-state",
        )
        assert status == 200, (status, document)
        return document

    def diagnosis(self, topic: str) -> str:
        """Every cluster's sync state of ``topic``, every gateway's sync stats of it, and
        the end of each gateway's log."""
        lines = []
        for name in sorted(self.clusters):
            state: dict | str | None
            try:
                state = self.sync_state(name, topic)["subscriptions"].get("s")
            except Exception as error:  # a diagnosis never hides the failure it explains
                state = repr(error)
            lines.append(f"sync-state of s on {name}: {json.dumps(state)}")
        for name, gateway in sorted(self.gateways.items()):
            stats: dict | str | None
            try:
                stats = self.topic_sync_stats(name, topic)
            except Exception as error:
                stats = repr(error)
            lines.append(f"gateway {name} sync stats: {json.dumps(stats)}")
            log_lines = gateway.log_path.read_text(errors="replace").splitlines()
            lines.append(f"gateway {name} log, last lines:")
            lines += [f"  {line}" for line in log_lines[-30:]]
        return "\n".join(lines)

    def topic_sync_stats(self, gateway: str, topic: str) -> dict | None:
        stats = self.gateways[gateway].get("/admin/georep/v1/stats")
        for entry in stats["subscriptionSync"]["topics"]:
            if entry["topic"] == topic:
                return entry
        return None


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    world = SyncWorld(tmp_path_factory.mktemp("subsync"))
    try:
        yield world.start_topology()
    finally:
        world.stop()


def subscribe_on_a(world, topic, *, sub_type=pulsar.ConsumerType.Shared, batch_ack=False):
    """A client and a consumer of subscription ``s`` on A, opted in to sync."""
    client = pulsar.Client(world.a.url, operation_timeout_seconds=30)
    consumer = client.subscribe(
        topic,
        "s",
        consumer_type=sub_type,
        replicate_subscription_state_enabled=True,
        batch_index_ack_enabled=batch_ack,
        initial_position=pulsar.InitialPosition.Earliest,
    )
    return client, consumer


def receive_and_ack(consumer, wanted):
    """Receive everything, then acknowledge (in a shuffled order) the messages whose
    payload ``wanted(payload)`` says; returns (acked payloads, received payloads)."""
    received = []
    while True:
        try:
            received.append(consumer.receive(timeout_millis=3000))
        except pulsar.Timeout:
            break
    random.Random(7).shuffle(received)  # out of order on purpose
    acked = set()
    for message in received:
        if wanted(message.data()):
            consumer.acknowledge(message)
            acked.add(message.data())
    return acked, {m.data() for m in received}


def consume_on_a(world, topic, wanted, *, sub_type=pulsar.ConsumerType.Shared, batch_ack=False):
    """Subscribe on A and :func:`receive_and_ack`. The consumer stays connected (the
    client is returned) so that A remains the source of the subscription's state."""
    client, consumer = subscribe_on_a(world, topic, sub_type=sub_type, batch_ack=batch_ack)
    acked, received = receive_and_ack(consumer, wanted)
    return client, consumer, acked, received


def drain_on(cluster: ClusterProcess, topic: str, *, batch_ack=False) -> list[bytes]:
    """What a consumer of subscription ``s`` that failed over to ``cluster`` receives."""
    with open_client(cluster.url) as client:
        consumer = client.subscribe(
            topic,
            "s",
            consumer_type=pulsar.ConsumerType.Shared,
            batch_index_ack_enabled=batch_ack,
            initial_position=pulsar.InitialPosition.Earliest,
        )
        got = []
        while True:
            try:
                message = consumer.receive(timeout_millis=3000)
            except pulsar.Timeout:
                break
            got.append(message.data())
            consumer.acknowledge(message)
        consumer.close()
    return got


def unacked_messages(world, cluster: str, topic: str, entries, subscription="s") -> int | None:
    """Messages of ``entries`` (data entries of ``topic`` on ``cluster``) that
    ``subscription`` there has not acknowledged (markers do not count)."""
    state = world.sync_state(cluster, topic)["subscriptions"].get(subscription)
    if state is None:
        return None
    mark_delete = (state["markDelete"]["ledgerId"], state["markDelete"]["entryId"])
    ranges = [
        (
            (r["first"]["ledgerId"], r["first"]["entryId"]),
            (r["last"]["ledgerId"], r["last"]["entryId"]),
        )
        for r in state["ranges"]
    ]
    batches = {(b["ledgerId"], b["entryId"]): len(b["ackedIndexes"]) for b in state["batches"]}
    left = 0
    for entry in entries:
        where = entry.position
        if where <= mark_delete or any(first <= where <= last for first, last in ranges):
            continue
        left += entry.messages - batches.get(where, 0)
    return left


def data_entries(world, cluster: str, topic: str, messages: int):
    """``topic``'s data entries on ``cluster`` once all ``messages`` have arrived."""

    def complete():
        entries = read_entries(world.clusters[cluster], topic, quiet_s=0.5)
        return entries if sum(e.messages for e in entries) >= messages else None

    return wait_for(complete, timeout_s=60)


def settle_on(
    world, cluster: str, topic: str, messages: int, expected_unacked: int, subscription="s"
) -> None:
    """Wait until the subscription on ``cluster`` holds exactly what A left unacked.
    If it never does, the failure shows where each side stood (a convergence bug must
    be diagnosable from one CI log)."""
    entries = data_entries(world, cluster, topic, messages)
    seen: list[int | None] = []

    def settled() -> bool:
        seen.append(unacked_messages(world, cluster, topic, entries, subscription))
        return seen[-1] == expected_unacked

    try:
        wait_for(settled, timeout_s=120)
    except TimeoutError:
        raise AssertionError(
            f"{cluster} never settled at {expected_unacked} unacknowledged messages of"
            f" {topic}; last counts {seen[-5:]}\n{world.diagnosis(topic)}"
        ) from None


def test_full_mode_out_of_order_acks_fail_over_to_b_and_to_one_way_c(world) -> None:
    topic = f"persistent://{SYNC}/orders"
    produce(world.a.url, topic, 300, "m", batching=False)
    client, _consumer, acked, received = consume_on_a(
        world, topic, lambda p: int(p.split(b"-")[1]) % 3 != 1
    )
    try:
        assert len(received) == 300
        unacked = received - acked
        for cluster in ("B", "C"):
            settle_on(world, cluster, topic, 300, len(unacked))
        stats = world.topic_sync_stats("B", topic)
        applied = stats["subscriptions"]["s"]["applied"]["A"]
        assert applied["applies"] >= 1 and applied["syncLagMs"] is not None
        status, metrics = http("GET", f"{world.gateways['B'].url}/metrics")
        assert status == 200
        namespace = topic.split("://", 1)[1].rsplit("/", 1)[0]  # per namespace by default
        assert (
            f'georep_subsync_lag_ms{{local_cluster="B",namespace="{namespace}",source_cluster="A"}}'
        ) in metrics
        assert "georep_subsync_snapshots_completed_total" in metrics
        # C first: what a consumer acknowledges on B travels back to A and from A on to
        # C (one subscription across the clusters), while C replicates nowhere.
        got_c = drain_on(world.c, topic)
        got_b = drain_on(world.b, topic)
    finally:
        client.close()
    for got in (got_b, got_c):
        assert len(got) == len(set(got)), "a message delivered twice"
        assert set(got) == unacked, "lost or redelivered"


def test_full_mode_batch_messages_acknowledged_one_by_one(world) -> None:
    topic = f"persistent://{SYNC}/batched"
    produce(world.a.url, topic, 200, "b", batching=True)
    client, _consumer, acked, received = consume_on_a(
        world, topic, lambda p: int(p.split(b"-")[1]) % 4 != 0, batch_ack=True
    )
    try:
        unacked = received - acked
        settle_on(world, "B", topic, 200, len(unacked))
        got = drain_on(world.b, topic, batch_ack=True)
    finally:
        client.close()
    assert len(got) == len(set(got))
    assert set(got) == unacked


def test_pulsar_compatible_mode_moves_the_mdp_only(world) -> None:
    topic = f"persistent://{COMPAT}/orders"
    # Pulsar snapshots only a topic with a replicated subscription: subscribe first.
    client, consumer = subscribe_on_a(world, topic)
    for chunk in range(4):  # snapshots land between the chunks
        produce(world.a.url, topic, 50, "c", batching=False, start=50 * chunk)

        def snapshotted(chunk: int = chunk) -> bool:
            stats = world.topic_sync_stats("A", topic) or {}
            completed: int = stats.get("snapshots", {}).get("completed", 0)
            return completed > chunk

        wait_for(snapshotted, timeout_s=60)

    def wanted(payload: bytes) -> bool:
        index = int(payload.split(b"-")[1])
        return index < 100 or index % 2 == 0  # in order up to 99, then out of order

    acked, received = receive_and_ack(consumer, wanted)
    try:
        first_hundred = {f"c-{i}".encode() for i in range(100)}
        entries = data_entries(world, "B", topic, 200)
        wait_for(
            lambda: (unacked_messages(world, "B", topic, entries) or 10**9) <= 100, timeout_s=60
        )
        got = drain_on(world.b, topic)
    finally:
        client.close()
    unacked = received - acked
    assert unacked <= set(got), "a message A never acknowledged is lost on B"
    assert not first_hundred & set(got), "B redelivered below A's mark-delete position"
    duplicates = acked & set(got)
    assert duplicates, "acknowledged out of order above the MDP: Pulsar redelivers those"


def test_gateway_killed_during_sync_converges_without_moving_back(world) -> None:
    topic = f"persistent://{SYNC}/restarts"
    produce(world.a.url, topic, 400, "r", batching=False)
    seen_mdps: list[tuple[int, int]] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            try:
                state = world.sync_state("B", topic)["subscriptions"].get("s")
            except Exception:
                state = None
            if state is not None:
                mdp = state["markDelete"]
                seen_mdps.append((mdp["ledgerId"], mdp["entryId"]))
            time.sleep(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    client, consumer = subscribe_on_a(world, topic)
    try:
        messages = [consumer.receive(timeout_millis=10_000) for _ in range(400)]
        order = list(range(400))
        random.Random(11).shuffle(order)
        skipped = set(order[:40])
        for step, index in enumerate(order):
            if index in skipped:
                continue
            consumer.acknowledge(messages[index])
            if step == 120:
                world.gateways["B"].kill()  # the receiver dies mid-sync
            if step == 200:
                world.gateways["B"].start()
            if step == 260:
                world.gateways["A"].kill()  # then the source
            if step % 20 == 0:
                time.sleep(0.1)
        world.gateways["A"].start()
        unacked = {messages[i].data() for i in skipped}
        settle_on(world, "B", topic, 400, len(unacked))
        stop.set()
        watcher.join()
        got = drain_on(world.b, topic)
    finally:
        stop.set()
        client.close()
    assert seen_mdps == sorted(seen_mdps), "an MDP on B moved backwards"
    assert set(got) == unacked and len(got) == len(unacked)


def test_snapshots_time_out_while_the_remote_cannot_answer_and_resume(world) -> None:
    topic = f"persistent://{COMPAT}/timeouts"
    produce(world.a.url, topic, 20, "t", batching=False)
    wait_for(lambda: world.topic_sync_stats("A", topic) is not None, timeout_s=30)
    client, consumer = subscribe_on_a(world, topic)
    try:
        world.gateways["B"].kill()  # B's cluster is up, nobody there answers
        produce(world.a.url, topic, 20, "t", batching=False, start=20)
        wait_for(
            lambda: world.topic_sync_stats("A", topic)["snapshots"]["timedOut"] >= 1,
            timeout_s=60,
        )
        completed = world.topic_sync_stats("A", topic)["snapshots"]["completed"]
        world.gateways["B"].start()
        produce(world.a.url, topic, 20, "t", batching=False, start=40)
        try:  # B's gateway starts every sync and replicator again first: give it time
            wait_for(
                lambda: world.topic_sync_stats("A", topic)["snapshots"]["completed"] > completed,
                timeout_s=120,
            )
        except TimeoutError:
            raise AssertionError(
                f"no snapshot completed after B's gateway came back\n{world.diagnosis(topic)}"
            ) from None
        produce(world.a.url, topic, 1, "t", batching=False, start=60)  # a snapshot above
        time.sleep(1.5)
        for _ in range(60):  # everything, in order: the MDP passes the snapshots
            consumer.acknowledge(consumer.receive(timeout_millis=10_000))
        settle_on(world, "B", topic, 61, 1)
    finally:
        client.close()


def test_full_mode_partitioned_topic_each_partition_synced(world) -> None:
    base = f"persistent://{SYNC}/parted"
    create_partitioned_topic(world.a, base, 3)
    produce(world.a.url, base, 300, "p", batching=True)
    client, _consumer, acked, received = consume_on_a(
        world, base, lambda p: int(p.split(b"-")[1]) % 5 != 2, batch_ack=True
    )
    try:
        assert len(received) == 300
        unacked = received - acked
        counts = {}
        for partition in range(3):
            name = f"{base}-partition-{partition}"
            entries = data_entries(world, "A", name, 1)
            counts[name] = sum(e.messages for e in entries)
        assert sum(counts.values()) == 300
        for name, messages in counts.items():
            left_on_a = unacked_messages(world, "A", name, data_entries(world, "A", name, messages))
            assert left_on_a is not None, f"no subscription s on A of {name}"
            settle_on(world, "B", name, messages, left_on_a)
        got = drain_on(world.b, base, batch_ack=True)
    finally:
        client.close()
    assert len(got) == len(set(got)) and set(got) == unacked


def test_a_topic_longer_than_a_consumers_unacked_limit_still_syncs(world) -> None:
    """The sync readers hold no more than the broker lets one consumer hold unacked
    (limits.consumer_unacked_messages_max, 50,000): they acknowledge as they read."""
    topic = f"persistent://{SYNC}/long"
    messages = 60_000
    produce(world.a.url, topic, messages, "l", batching=True)
    client, consumer = subscribe_on_a(world, topic, sub_type=pulsar.ConsumerType.Exclusive)
    try:
        last = None
        for _ in range(messages):
            last = consumer.receive(timeout_millis=10_000)
        consumer.acknowledge_cumulative(last)
        settle_on(world, "B", topic, messages, 0)
    finally:
        client.close()


def exposure_to(world, topic: str, remote: str) -> int | None:
    """A's gateway's exposure of subscription ``s`` towards ``remote`` (``/stats``)."""
    stats = world.topic_sync_stats("A", topic) or {}
    figure = ((stats.get("subscriptions") or {}).get("s") or {}).get("exposure", {}).get(remote)
    return None if figure is None else figure["messages"]


def await_exposure(world, topic: str, remote: str, expected: int, timeout_s: float = 60) -> None:
    seen: list[int | None] = []

    def reached() -> bool:
        seen.append(exposure_to(world, topic, remote))
        return seen[-1] == expected

    try:
        wait_for(reached, timeout_s=timeout_s)
    except TimeoutError:
        raise AssertionError(
            f"A's exposure to {remote} never {expected}; last {seen[-5:]}\n{world.diagnosis(topic)}"
        ) from None


def test_exposure_counts_what_a_frozen_remote_would_deliver_again(world) -> None:
    """Acknowledgements made on A while B is frozen (SIGSTOP) cannot reach B: A's gateway
    says how many (its ``/stats`` and ``/metrics``), C's figure stays 0, and B's returns to
    0 once B runs again."""
    topic = f"persistent://{SYNC}/exposure"
    produce(world.a.url, topic, 30, "x", batching=False)
    data_entries(world, "B", topic, 30)  # every copy is on B before it freezes
    data_entries(world, "C", topic, 30)
    client, consumer = subscribe_on_a(world, topic)
    b = world.clusters["B"]
    try:
        received = [consumer.receive(timeout_millis=10_000) for _ in range(30)]
        for message in received[:10]:
            consumer.acknowledge(message)
        settle_on(world, "B", topic, 30, 20)  # B applied the state of the first ten
        await_exposure(world, topic, "B", 0)
        assert b.process is not None
        os.kill(b.process.pid, signal.SIGSTOP)
        try:
            for message in received[10:22]:  # out of order on purpose: ranges, then more
                consumer.acknowledge(message)
            await_exposure(world, topic, "B", 12)
            await_exposure(world, topic, "C", 0)
            gauge = metric(
                world.gateways["A"],
                "georep_subsync_exposure_messages",
                namespace=SYNC,
                remote_cluster="B",
            )
            assert gauge is not None and gauge >= 12, gauge
        finally:
            os.kill(b.process.pid, signal.SIGCONT)
        await_exposure(world, topic, "B", 0, timeout_s=120)
        settle_on(world, "B", topic, 30, 8)
    finally:
        client.close()


def test_a_namespace_policy_syncs_the_unflagged_subscriptions_its_pattern_names(world) -> None:
    """No consumer sets the flag: once A's gateway holds a namespace policy whose pattern
    names ``orders-app``, its acknowledgements reach B, and ``audit-app``'s do not."""
    topic = f"persistent://{SYNC}/by-policy"
    produce(world.a.url, topic, 60, "p", batching=False)
    gateway = world.gateways["A"]
    policy_url = f"{gateway.url}/admin/georep/v1/namespaces/{SYNC}/subscription-sync"
    client = pulsar.Client(world.a.url, operation_timeout_seconds=30)
    try:
        acked = {}
        for name in ("orders-app", "audit-app"):
            consumer = client.subscribe(
                topic,
                name,
                consumer_type=pulsar.ConsumerType.Shared,
                initial_position=pulsar.InitialPosition.Earliest,
            )  # stays connected: A stays the source
            received = [consumer.receive(timeout_millis=10_000) for _ in range(60)]
            acked[name] = [m for m in received if int(m.data().split(b"-")[1]) % 2 == 0]
            for message in acked[name]:
                consumer.acknowledge(message)
        status, answer = http(
            "PUT",
            policy_url,
            {"subscriptions": "flagged", "pattern": "orders-.*"},
            token=gateway.token,
        )
        assert status == 200, answer
        settle_on(world, "B", topic, 60, 60 - len(acked["orders-app"]), "orders-app")
        assert "audit-app" not in world.sync_state("B", topic)["subscriptions"]
        stats = world.topic_sync_stats("A", topic)
        assert stats["subscriptions"]["orders-app"]["syncedBy"] == "policy"
        assert "audit-app" not in stats["subscriptions"]
        assert stats["subscriptionChoice"] == {
            "subscriptions": "flagged",
            "pattern": "orders-.*",
            "chosenBy": "namespace policy",
        }
    finally:
        http("DELETE", policy_url, token=gateway.token)
        client.close()
