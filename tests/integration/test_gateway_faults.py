"""A cluster killed (SIGKILL) and restarted under replication both ways, with gateway
processes. While B is down, A's replicator towards B builds backlog on A (nothing is
lost: the entries wait on A's topic) and B's gateway has lost its local cluster; when B
is back both catch up, and each side holds every message of the other exactly once."""

from __future__ import annotations

import threading
import time

import pytest

from tests.harness.gateway import (
    ClusterProcess,
    GatewayProcess,
    admin_url,
    create_namespace,
    http,
    local_positions,
    origin_counts,
    payloads_on,
    produce,
    read_entries,
)
from tests.harness.waiting import wait_for

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

NAMESPACE = "geo/faults"
TOPIC = f"persistent://{NAMESPACE}/payments"


def keep_producing(url: str, prefix: str, stop: threading.Event, sent: list[bytes]) -> None:
    """Chunks of 200 until ``stop``; a chunk that fails (its cluster is down) is retried
    under new payloads, so ``sent`` holds exactly what the broker acknowledged."""
    start = 0
    while not stop.is_set():
        try:
            sent.extend(produce(url, TOPIC, 200, prefix, start=start))
        except Exception:
            time.sleep(0.5)
        start += 200
        time.sleep(0.05)


def waiting_on(cluster: ClusterProcess) -> int:
    """Messages of ``TOPIC`` its cluster holds for the gateway's subscriptions, as the
    cluster's admin counts them now."""
    path = TOPIC.removeprefix("persistent://")
    status, stats = http("GET", f"{admin_url(cluster)}/admin/v2/persistent/{path}/stats")
    assert status == 200, stats
    return sum(s["msgBacklog"] for s in stats["subscriptions"].values())


def test_remote_killed_and_restarted(tmp_path) -> None:
    a = ClusterProcess(tmp_path / "a", name="A")
    b = ClusterProcess(tmp_path / "b", name="B")
    gateways: list[GatewayProcess] = []
    stop = threading.Event()
    try:
        for cluster in (a, b):
            cluster.start()
            create_namespace(cluster, NAMESPACE)
        ga = GatewayProcess(tmp_path / "gw-a", local=a, remotes=[b], policies={NAMESPACE: ["B"]})
        gb = GatewayProcess(tmp_path / "gw-b", local=b, remotes=[a], policies={NAMESPACE: ["A"]})
        gateways = [ga, gb]
        for gateway in gateways:
            gateway.start()

        sent_a: list[bytes] = []
        producer = threading.Thread(target=keep_producing, args=(a.url, "a", stop, sent_a))
        producer.start()
        sent_b = produce(b.url, TOPIC, 1000, "b")
        wait_for(lambda: (ga.replicators(TOPIC) or [{}])[0].get("msgOutCounter", 0) >= 400)

        b.kill()
        wait_for(lambda: not ga.replicators(TOPIC)[0]["remoteConnected"], timeout_s=30)
        # A's own count, not the gateway's: the gateway asks for its backlog less and less
        # often while nothing moves (limits.replicator_stats_idle_interval_s)
        backlog_before = waiting_on(a)
        wait_for(lambda: waiting_on(a) > backlog_before + 50, timeout_s=60)  # entries
        down = ga.replicators(TOPIC)[0]
        assert down["lastError"] and not down["connected"]

        b.start()
        sent_b += produce(b.url, TOPIC, 1000, "b", start=1000)
        stop.set()
        producer.join(60)

        def caught_up(gateway: GatewayProcess) -> bool:
            found = gateway.replicators(TOPIC)
            return bool(found) and found[0]["replicationBacklog"] == 0 and found[0]["connected"]

        wait_for(lambda: caught_up(ga), timeout_s=120)
        wait_for(lambda: caught_up(gb), timeout_s=120)
        on_a, on_b = read_entries(a, TOPIC), read_entries(b, TOPIC)
        copies_on_b = {k: n for k, n in origin_counts(on_b).items() if k[0] == "A"}
        copies_on_a = {k: n for k, n in origin_counts(on_a).items() if k[0] == "B"}
        assert copies_on_b == {p: 1 for p in local_positions(on_a, "A")}
        assert copies_on_a == {p: 1 for p in local_positions(on_b, "B")}
        everything = {p: 1 for p in sent_a + sent_b}
        assert payloads_on(b.url, TOPIC) == everything
        assert payloads_on(a.url, TOPIC) == everything
    finally:
        stop.set()
        for process in [*gateways, a, b]:
            process.kill()
