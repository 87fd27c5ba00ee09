"""Replication across an emulated WAN link (georep/wan/toxiproxy.py, docs/WAN.md):
cluster B is reached by A's gateway only through a proxy that delays every byte by 40 ms
each way, and then drops every byte without closing anything (a black hole).

The gateway must notice the black hole by its keep-alive (silence for an interval, then
a PING unanswered for another, each checked every half interval: within three times
``keepalive_interval_s``, here 6 s), reconnect once the link
heals, and leave B holding every message of A exactly once. Nothing may reach B while
the link is black: the proof that the gateway's traffic takes the link and no other way.
A remote that accepts connections and never answers, said stuck by the gateway's
watchdog, restarted and healed: a frozen remote, test_gateway_watchdog.py.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from georep.wan.toxiproxy import Toxiproxy, WanLink
from tests.harness.gateway import (
    ClusterProcess,
    GatewayProcess,
    admin_url,
    create_namespace,
    keepalive_close,
    origin_counts,
    payloads_on,
    produce,
    read_entries,
)
from tests.harness.waiting import wait_for

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

NAMESPACE = "geo/wan"
KEEPALIVE_S = 6.0


@contextlib.contextmanager
def across_a_link(
    tmp_path, toxiproxy: Toxiproxy, round_trip_ms: float, **gateway_keys
) -> Iterator[SimpleNamespace]:
    """Clusters A and B, and A's gateway replicating ``NAMESPACE`` to B, which it reaches
    only through links (broker and admin) with ``round_trip_ms`` of delay."""
    a = ClusterProcess(tmp_path / "a", name="A")
    b = ClusterProcess(tmp_path / "b", name="B")
    gateway: GatewayProcess | None = None
    try:
        for cluster in (a, b):
            cluster.start()
            create_namespace(cluster, NAMESPACE)
        run = uuid.uuid4().hex[:6]
        broker = toxiproxy.link(f"b-broker-{run}", f"127.0.0.1:{b.broker_port}")
        admin = toxiproxy.link(f"b-admin-{run}", admin_url(b).removeprefix("http://"))
        for link in (broker, admin):
            link.delay(round_trip_ms)
        far_b = SimpleNamespace(
            name="B", service_url=f"pulsar://{broker.address}", admin_url=f"http://{admin.address}"
        )
        gateway = GatewayProcess(
            tmp_path / "gw-a", local=a, remotes=[far_b], policies={NAMESPACE: ["B"]}, **gateway_keys
        )
        gateway.start()
        links: list[WanLink] = [broker, admin]
        yield SimpleNamespace(a=a, b=b, gateway=gateway, broker=broker, links=links)
    finally:
        if gateway is not None:
            gateway.kill()
        for cluster in (a, b):
            cluster.kill()


def all_once_on_b(world: SimpleNamespace, topic: str, sent: list[bytes]) -> None:
    """B holds every message sent on A exactly once (read back, and by origin)."""
    b = world.b
    wait_for(lambda: sum(payloads_on(b.url, topic).values()) >= len(sent), timeout_s=180)
    on_b = payloads_on(b.url, topic)
    assert set(on_b) == set(sent), f"{len(set(sent) - set(on_b))} lost"
    assert max(on_b.values()) == 1, "a message reached B twice"
    counts = origin_counts(read_entries(b, topic))
    assert sum(counts.values()) == len(sent) and max(counts.values()) == 1


def test_a_black_holed_link_is_noticed_and_nothing_is_lost_or_doubled(tmp_path, toxiproxy):
    topic = f"persistent://{NAMESPACE}/orders-{uuid.uuid4().hex[:6]}"
    keys = {"remote_keys": {"B": {"keepalive_interval_s": KEEPALIVE_S}}}
    with across_a_link(tmp_path, toxiproxy, 80, **keys) as world:
        a, b, gateway = world.a, world.b, world.gateway
        sent = produce(a.url, topic, 300, "before", batching=False)
        wait_for(lambda: sum(payloads_on(b.url, topic).values()) >= len(sent), timeout_s=120)

        world.broker.black_hole()
        holed_at = time.monotonic()
        sent += produce(a.url, topic, 300, "during", batching=False)
        error = keepalive_close(gateway, topic)
        print(
            f"black hole noticed after {time.monotonic() - holed_at:.1f} s"
            f" (bound {3 * KEEPALIVE_S} s): {error}"
        )
        # while it is black, nothing reaches B: the gateway's only way is the link
        on_b = payloads_on(b.url, topic)
        assert not [p for p in on_b if p.startswith(b"during")], "B was reached around the link"

        world.broker.heal()
        all_once_on_b(world, topic, sent)
        wait_for(lambda: gateway.get("/health")["status"] == "ok", timeout_s=120)


def test_after_an_outage_the_backlog_drains_under_the_rate_limit(tmp_path, toxiproxy):
    """The link down (connections reset, new ones refused) while A takes 3,000 messages:
    the outage compressed in time. Healed, the replicator drains the backlog at most at
    its rate limit, ``/health`` shows it catching up with the backlog falling (nothing is
    produced meanwhile), and B ends with every message once."""
    topic = f"persistent://{NAMESPACE}/ledger-{uuid.uuid4().hex[:6]}"
    limit = "[rate_limits]\nmessages_per_s = 400\n"
    with across_a_link(tmp_path, toxiproxy, 40, extra_toml=limit) as world:
        a, b, gateway = world.a, world.b, world.gateway
        sent = produce(a.url, topic, 200, "before", batching=False)
        wait_for(lambda: sum(payloads_on(b.url, topic).values()) >= len(sent), timeout_s=120)

        for link in world.links:
            link.outage()
        sent += produce(a.url, topic, 3000, "during", batching=False)

        def behind() -> dict | None:
            summary = gateway.get("/health")["replication"].get("B", {})
            return summary if summary.get("backlogEntries", 0) >= 3000 else None

        down = wait_for(behind, timeout_s=120)
        assert down["notConnected"] == 1, down
        assert gateway.get("/health")["status"] == "degraded"  # B unreachable

        for link in world.links:
            link.heal()
        samples: list[tuple[float, int]] = []

        def drained() -> bool:
            summary = gateway.get("/health")["replication"]["B"]
            if summary["catchingUp"]:
                samples.append((time.monotonic(), summary["backlogEntries"]))
            return summary["backlogEntries"] == 0 and summary["notConnected"] == 0

        wait_for(drained, timeout_s=180, interval_s=0.5)
        backlogs = [backlog for _, backlog in samples]
        assert backlogs, "never seen catching up"
        assert backlogs == sorted(backlogs, reverse=True), f"the backlog rose: {backlogs}"
        if len(samples) > 1:
            (t0, first), (t1, last) = samples[0], samples[-1]
            print(f"drained {first - last} entries at {(first - last) / (t1 - t0):.0f}/s"
                  " (limit 400 msgs/s, one message an entry)")  # fmt: skip
        all_once_on_b(world, topic, sent)
        wait_for(lambda: gateway.get("/health")["status"] == "ok", timeout_s=60)
