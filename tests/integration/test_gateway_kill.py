"""kill -9 of the gateway mid-stream, twice, and restarts: every message of A is on B
exactly once, checked by origin position (entries as stored on B) and by payload (what a
pulsar-client reader of B sees). The remote's producer deduplication, keyed by the
origin position, is what keeps the re-sent entries out. The gateway's rate limit keeps
replication behind the producer, so the kills land while entries are in flight."""

from __future__ import annotations

import threading

import pytest

from tests.harness.gateway import (
    ClusterProcess,
    GatewayProcess,
    create_namespace,
    local_positions,
    origin_counts,
    payloads_on,
    produce,
    read_entries,
)
from tests.harness.waiting import wait_for

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

NAMESPACE = "geo/kill"
TOPIC = f"persistent://{NAMESPACE}/orders"
MESSAGES = 20_000
RATE = 4_000


def test_gateway_killed_mid_stream_loses_and_duplicates_nothing(tmp_path) -> None:
    a = ClusterProcess(tmp_path / "a", name="A")
    b = ClusterProcess(tmp_path / "b", name="B")
    gateway = None
    try:
        a.start()
        b.start()
        create_namespace(a, NAMESPACE)
        gateway = GatewayProcess(
            tmp_path / "gw",
            local=a,
            remotes=[b],
            policies={NAMESPACE: ["B"]},
            # slower than the producer, so that both kills land mid-stream
            extra_toml=f"[rate_limits]\nmessages_per_s = {RATE}\n",
        )
        gateway.start()

        sent: list[bytes] = []
        producer = threading.Thread(
            target=lambda: sent.extend(produce(a.url, TOPIC, MESSAGES, "a")), daemon=True
        )
        producer.start()

        def replicated() -> int:
            found = gateway.replicators(TOPIC)
            return found[0]["msgOutCounter"] + found[0]["duplicatesCounter"] if found else 0

        for threshold in (2_000, 1_000):  # kill, restart, kill again soon after

            def reached(t: int = threshold) -> bool:
                return replicated() >= t

            wait_for(reached, timeout_s=90)
            gateway.kill()
            gateway.start()
        producer.join(120)
        assert not producer.is_alive() and len(sent) == MESSAGES

        def caught_up() -> bool:
            found = gateway.replicators(TOPIC)
            return bool(found) and found[0]["replicationBacklog"] == 0 and found[0]["connected"]

        wait_for(caught_up, timeout_s=120)
        on_a = read_entries(a, TOPIC)
        on_b = read_entries(b, TOPIC)
        copies = origin_counts(on_b)
        assert set(copies) == local_positions(on_a, "A"), "every origin entry reached B"
        assert [p for p, n in copies.items() if n > 1] == [], "none twice"
        assert sum(e.messages for e in on_b) == MESSAGES
        assert payloads_on(b.url, TOPIC) == {payload: 1 for payload in sent}
    finally:
        if gateway is not None:
            gateway.kill()
        a.kill()
        b.kill()
