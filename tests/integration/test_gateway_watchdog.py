"""The gateway's watchdog across real processes (``ReplicationManager.heal_stalled``).

Cluster B frozen (SIGSTOP): its kernel still accepts connections and nothing answers,
so A's replicator moves nothing on while A takes messages. Within ``stuck_after_s`` and a
watchdog pass the gateway says so (one WARNING for the remote, with a count),
``georep_gateway_replication_stuck`` counts it, ``/health`` is degraded, and the replicator
is restarted. Once B runs again (SIGCONT) it moves again, ``/health`` clears, and B holds
every message of A exactly once.

A real Prometheus (Debian's package) scrapes the gateway with the shipped alerting rules
(docker/prometheus/georep-alerts.yml): ``GeorepReplicationStuck`` fires for B while it
is frozen and clears once replication moves again.

A remote that accepts a connection and never answers is the black-holed link of
tests/integration/test_wan_link.py, which checks the same watchdog on it.
"""

from __future__ import annotations

import os
import signal
import uuid

import pytest

from tests.harness.gateway import metric, produce, stuck_to
from tests.harness.prometheus import PrometheusProcess
from tests.harness.waiting import wait_for
from tests.integration.test_wan_link import NAMESPACE, across_a_link, all_once_on_b

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

#: ``[gateway] stuck_after_s``: its least, to be seen within a test.
STUCK_S = 5.0


def test_a_frozen_remote_is_said_stuck_restarted_healed_and_alerted(tmp_path, toxiproxy):
    topic = f"persistent://{NAMESPACE}/frozen-{uuid.uuid4().hex[:6]}"
    keys = {
        "gateway_keys": {"stuck_after_s": STUCK_S},
        "remote_keys": {"B": {"keepalive_interval_s": 6.0}},
    }
    stuck = {"local_cluster": "A", "remote_cluster": "B"}
    with (
        across_a_link(tmp_path, toxiproxy, 0, **keys) as world,
        PrometheusProcess(tmp_path / "prometheus", [f"127.0.0.1:{world.gateway.port}"]) as prom,
    ):
        a, b, gateway = world.a, world.b, world.gateway
        sent = produce(a.url, topic, 100, "before", batching=False)
        all_once_on_b(world, topic, sent)
        assert metric(gateway, "georep_gateway_replication_stuck", remote_cluster="B") == 0

        os.kill(b.process.pid, signal.SIGSTOP)
        try:
            sent += produce(a.url, topic, 200, "frozen", batching=False)
            problem = wait_for(lambda: stuck_to(gateway, "B"), timeout_s=120)
            print(f"/health: {problem}")
            assert metric(gateway, "georep_gateway_replication_stuck", remote_cluster="B") == 1
            restarts = "georep_gateway_replication_restarts_total"
            wait_for(lambda: (metric(gateway, restarts, remote_cluster="B") or 0) >= 1, 60)
            said = gateway.log_path.read_text()
            assert "replication to B: 1 topic partitions moved nothing on" in said
            (replicator,) = gateway.replicators(topic)
            assert replicator["stalledSeconds"] >= 0 and replicator["restarts"] >= 1
            (alert,) = wait_for(lambda: prom.firing("GeorepReplicationStuck", **stuck), 60)
            print(f"Prometheus fires {alert['labels']['alertname']}: {alert['annotations']}")
        finally:
            os.kill(b.process.pid, signal.SIGCONT)

        all_once_on_b(world, topic, sent)
        wait_for(lambda: gateway.get("/health")["status"] == "ok", timeout_s=120)
        assert metric(gateway, "georep_gateway_replication_stuck", remote_cluster="B") == 0
        wait_for(lambda: "replication to B: 1 topic partitions move again" in
                 gateway.log_path.read_text(), timeout_s=60)  # fmt: skip
        wait_for(lambda: not prom.firing("GeorepReplicationStuck", **stuck), 60)
