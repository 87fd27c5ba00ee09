"""The gateway beside two real Pulsar standalones, in both deployments, after kill -9.

- ``georep/gsync``, **sync only**: Pulsar's own geo-replication carries the data and the
  side topic; the gateways sync subscriptions.
- ``georep/grepl``, **replicate and sync**: Pulsar's geo-replication off; the gateways
  replicate by policy (Pulsar's deduplication on, as the replicator needs) and sync.
- ``georep/geo``, **Pulsar alone**: its geo-replication and replicated subscriptions,
  no gateway: the anchor, on the same run.

The same application runs on each, on three topics per namespace, one of them
partitioned: a Shared subscription on A acknowledges messages out of order, leaving
every seventh one. Once B holds what A acknowledged (for Pulsar alone:
once its mark-delete position moved on B, or 10 s), A is killed with SIGKILL and the
consumers move to B. On both georep deployments they receive exactly what A left
unacknowledged; Pulsar alone redelivers what A acknowledged above its mark-delete
position. A stays down: the test is marked ``kills_shared_pulsar``, so it runs after every
other test that shares the pair (tests/pulsar/conftest.py says why a restarted A is not
shared again).
"""

from __future__ import annotations

import time
import urllib.parse
import uuid

import pytest

from georep.drill import admin_client
from pulsar_tools.admin import PulsarAdmin, link_geo_replication
from tests.harness.failover_checks import (
    acknowledge_all_but_every_seventh,
    drain,
    leaves,
    positions_and_payloads,
    quiet_client,
    stamps_source_position,
    unacknowledged_on,
    wait_until_synced,
)
from tests.harness.gateway import GatewayProcess, http
from tests.harness.waiting import wait_for

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow, pytest.mark.kills_shared_pulsar]

TENANT = "georep"
SYNC_ONLY = "georep/gsync"
REPLICATE = "georep/grepl"
PULSAR_ALONE = "georep/geo"
MESSAGES = 200
SYNC_TOML = f"""
[subscription_sync]
poll_interval_s = 0.1
[subscription_sync.namespaces."{SYNC_ONLY}"]
[subscription_sync.namespaces."{REPLICATE}"]
"""


@pytest.fixture(scope="module")
def gateways(pulsar_pair, tmp_path_factory):
    a, b = pulsar_pair["A"], pulsar_pair["B"]
    link_geo_replication([a, b], TENANT, SYNC_ONLY.split("/")[1])
    for cluster in (a, b):
        admin = PulsarAdmin(cluster.admin_url)
        admin.ensure_namespace(TENANT, REPLICATE.split("/")[1])
        # The replicator's sequence ids are deduplicated by the receiving broker.
        admin.request("POST", f"/admin/v2/namespaces/{REPLICATE}/deduplication", True)
    root = tmp_path_factory.mktemp("pulsar-gateways")
    started = {}
    try:
        for local, remote in ((a, b), (b, a)):
            gateway = GatewayProcess(
                root / local.name,
                local=local,
                remotes=[remote],
                policies={REPLICATE: [remote.name]},
                extra_toml=SYNC_TOML,
                kind="pulsar",
            )
            gateway.start()
            started[local.name] = gateway
        yield started
    finally:
        for gateway in started.values():
            gateway.kill()


def exposure_on_a(gateway: GatewayProcess, topic: str) -> int | None:
    """Messages of subscription ``s`` of ``topic`` a failover to B would deliver again, as
    A's gateway reports them (None: not known)."""
    stats = gateway.get(f"/admin/georep/v1/stats?topic={urllib.parse.quote(topic, safe='')}")
    _, block = admin_client.sync_of(stats, topic, "s")
    figure = admin_client.exposure_of(block, "B")
    return None if figure is None else int(figure["messages"])


def test_failover_after_kill_9_zero_duplicates_beside_pulsar_which_has_them(
    pulsar_pair, gateways, pulsar_version
):
    """Per namespace a partitioned topic (3 partitions) and two topics more, all synced:
    one side-topic reader per namespace serves them all. On a Pulsar whose replicator
    stamps no source position (3.0) sync only cannot map Pulsar's copies: B's gateway
    must say so, and only its losses are checked there."""
    a, b = pulsar_pair["A"], pulsar_pair["B"]
    mapped = stamps_source_position(pulsar_version)
    run = uuid.uuid4().hex[:8]
    shapes = {f"orders-{run}": 3, f"audit-{run}": 0, f"billing-{run}": 0}
    namespaces = {
        "sync only": SYNC_ONLY,
        "replicate and sync": REPLICATE,
        "Pulsar alone": PULSAR_ALONE,
    }
    checked = ["sync only", "replicate and sync"] if mapped else ["replicate and sync"]
    admin_a = PulsarAdmin(a.admin_url)
    topics: dict[tuple[str, str], int] = {}  # (deployment, topic) -> partitions
    for name, namespace in namespaces.items():
        for local, partitions in shapes.items():
            topic = f"persistent://{namespace}/{local}"
            topics[(name, topic)] = partitions
            if partitions:
                admin_a.request(
                    "PUT", f"/admin/v2/persistent/{namespace}/{local}/partitions", partitions
                )
    client = quiet_client(a.service_url)
    try:
        done = acknowledge_all_but_every_seventh(client, topics, MESSAGES)
        deadline = time.monotonic() + 10
        wait_until_synced(
            b, {k: p for k, p in topics.items() if k[0] in checked}, done.expected, MESSAGES
        )
        # A's exposure towards B, once synced: where the gateways replicate the side
        # topic too, how far B stores it says the markers arrived (0 would come twice);
        # where Pulsar replicates it, not known.
        replicated, pulsars = (f"persistent://{ns}/audit-{run}" for ns in (REPLICATE, SYNC_ONLY))
        assert wait_for(lambda: exposure_on_a(gateways["A"], replicated) == 0, timeout_s=60)
        assert exposure_on_a(gateways["A"], pulsars) is None
        if not mapped:
            problem = wait_for(
                lambda: next(
                    (
                        p
                        for p in gateways["B"].get("/health")["problems"]
                        if "copies from cluster A name no origin" in p
                    ),
                    None,
                ),
                timeout_s=60,
            )
            print(f"Pulsar {pulsar_version}, sync only, B's /health: {problem}")
        # Pulsar alone: its snapshots (one a second by default) had the time georep's
        # sync took, and 10 s in all, to move B's mark-delete position on each topic.
        for (name, topic), partitions in topics.items():
            if name != "Pulsar alone":
                continue
            for leaf in leaves(topic, partitions):

                def copied(leaf: str = leaf) -> dict[tuple[int, int], bytes] | None:
                    return positions_and_payloads(b.service_url, leaf) or None

                copies: dict[tuple[int, int], bytes] = wait_for(copied, timeout_s=120)
                acked_on_a = done.acked[name] & set(copies.values())
                while time.monotonic() < deadline:
                    if acked_on_a - unacknowledged_on(b, leaf, copies):
                        break
                    time.sleep(0.5)
        # How A's changes were found: pages, and the topics just acknowledged read alone.
        changes = gateways["A"].get("/admin/georep/v1/stats?limit=0")["subscriptionSync"]["changes"]
        assert changes["scans"] > 0 and changes["failures"] == 0
        assert changes["hotRounds"] > 0 and changes["hotTopics"] <= changes["hotTopicsMax"]
        _, metrics = http("GET", f"{gateways['A'].url}/metrics")
        assert 'georep_subsync_hot_topics{local_cluster="A",of="hot"}' in str(metrics)
        a.kill()  # SIGKILL: the consumers move to B
        got = {
            name: drain(b.service_url, [topic for (of, topic) in topics if of == name])
            for name in namespaces
        }
    finally:
        client.close()
    counts = {}
    for name in namespaces:
        duplicates = len(got[name]) - len(set(got[name]))
        redelivered = done.acked[name] & set(got[name])
        lost = done.expected[name] - set(got[name])
        counts[name] = (len(redelivered), duplicates, len(lost))
    print(
        f"Pulsar {pulsar_version}: after kill -9 of A, (acknowledged delivered again,"
        f" delivered twice, lost) of {len(done.acked['sync only'])} acknowledged per"
        f" deployment: {counts}"
    )
    for name in checked:
        assert counts[name] == (0, 0, 0), f"{name}: {counts[name]}"
    assert counts["sync only"][2] == 0, "Pulsar's replication lost a message"
    assert counts["Pulsar alone"][2] == 0, "Pulsar lost a message"
    assert counts["Pulsar alone"][0], "Pulsar syncs only its mark-delete position"
