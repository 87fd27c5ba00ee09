"""The gateway replicating to a real Pulsar cluster that it reaches only through an
emulated WAN link (georep/wan/toxiproxy.py, docs/WAN.md), as a region behind a proxy or
NAT is reached: the remote cluster C's broker advertises two listeners, ``internal``
(its own port, for the cluster itself) and ``wan`` (the link's port), and the gateway
names ``wan`` (``listener_name``), so every lookup answers with the link's address.
Without it a lookup answers with the internal address, and the traffic would go around
the link. C is a cluster (ZooKeeper, a bookie, a broker: pulsar_tools/cluster.py), not
a standalone: a standalone answers every lookup "through the service URL", whatever
listener is named, so it could not show the difference.

The link delays every byte by 40 ms each way. Then it drops every byte (a black hole):
nothing may reach C (the proof that no connection goes around it), the gateway must
notice by its keep-alive, and once the link heals C holds every message of A once.
"""

from __future__ import annotations

import time
import uuid
from types import SimpleNamespace

import pytest

from pulsar_tools.admin import PulsarAdmin
from pulsar_tools.cluster import BrokerPorts, ClusterSpec, PulsarCluster
from tests.harness.failover_checks import positions_and_payloads, quiet_client
from tests.harness.gateway import GatewayProcess, keepalive_close
from tests.harness.waiting import wait_for

pytestmark = [pytest.mark.timeout(400), pytest.mark.slow]

TENANT = "georep"
NAMESPACE = "georep/gwan"
KEEPALIVE_S = 6.0


@pytest.fixture(scope="module")
def far(pulsar_pair, pulsar_jars, toxiproxy, tmp_path_factory):
    """C behind the link, and A's gateway replicating ``NAMESPACE`` to it."""
    a = pulsar_pair["A"]
    run = uuid.uuid4().hex[:6]
    broker_link = toxiproxy.link(f"c-broker-{run}")
    admin_link = toxiproxy.link(f"c-admin-{run}")
    root = tmp_path_factory.mktemp("pulsar-wan")
    ports = BrokerPorts()
    listeners = f"internal:{ports.service_url},wan:pulsar://{broker_link.address}"
    settings = {"advertisedListeners": listeners, "internalListenerName": "internal"}
    c = PulsarCluster(
        ClusterSpec("C", root / "C", brokers=1, broker_ports=[ports], settings=settings),
        pulsar_jars,
    )
    gateway = None
    try:
        c.start()
        broker_link.point_at(f"127.0.0.1:{ports.broker_port}")
        admin_link.point_at(f"127.0.0.1:{ports.web_port}")
        for link in (broker_link, admin_link):
            link.delay(80)
        admin_c = PulsarAdmin(c.admin_url)
        admin_c.request("PUT", f"/admin/v2/tenants/{TENANT}", {"allowedClusters": ["C"]})
        for admin, in_tenant in ((PulsarAdmin(a.admin_url), TENANT), (admin_c, TENANT)):
            admin.ensure_namespace(in_tenant, NAMESPACE.split("/")[1])
        # The replicator's sequence ids are deduplicated by the receiving broker.
        admin_c.request("POST", f"/admin/v2/namespaces/{NAMESPACE}/deduplication", True)
        remote = SimpleNamespace(
            name="C",
            service_url=f"pulsar://{broker_link.address}",
            admin_url=f"http://{admin_link.address}",
        )
        gateway = GatewayProcess(
            root / "gw-A",
            local=a,
            remotes=[remote],
            policies={NAMESPACE: ["C"]},
            kind="pulsar",
            remote_keys={"C": {"listener_name": "wan", "keepalive_interval_s": KEEPALIVE_S}},
        )
        gateway.start()
        yield SimpleNamespace(a=a, c=c, link=broker_link, gateway=gateway)
    finally:
        if gateway is not None:
            gateway.kill()
        c.stop()


def produce(url: str, topic: str, prefix: str, count: int) -> list[bytes]:
    client = quiet_client(url)
    try:
        producer = client.create_producer(topic, batching_enabled=False)
        sent = [f"{prefix}-{index}".encode() for index in range(count)]
        for payload in sent:
            producer.send(payload)
        return sent
    finally:
        client.close()


def test_a_remote_behind_a_wan_link_is_reached_by_its_advertised_listener(far):
    topic = f"persistent://{NAMESPACE}/orders-{uuid.uuid4().hex[:6]}"
    # The topic is made on C first, so that its bundle is owned before anyone looks it
    # up. Otherwise this test's own reader (no listener named) and the gateway's producer
    # ("wan") may look it up while the broker acquires the bundle, and Pulsar's modular
    # load manager then answers both with the first lookup's listener
    # (apache/pulsar#26244): seen once on 3.0.7, the gateway sent to C's internal address.
    PulsarAdmin(far.c.admin_url).request(
        "PUT", f"/admin/v2/persistent/{topic[len('persistent://') :]}"
    )
    sent = produce(far.a.service_url, topic, "before", 200)

    def on_c() -> list[bytes]:
        return list(positions_and_payloads(far.c.service_url, topic).values())

    wait_for(lambda: len(on_c()) >= len(sent), timeout_s=120)

    far.link.black_hole()
    holed_at = time.monotonic()
    sent += produce(far.a.service_url, topic, "during", 200)

    error = keepalive_close(far.gateway, topic)
    print(
        f"black hole noticed after {time.monotonic() - holed_at:.1f} s"
        f" (bound {3 * KEEPALIVE_S} s): {error}"
    )
    assert not [p for p in on_c() if p.startswith(b"during")], "C was reached around the link"

    far.link.heal()
    wait_for(lambda: len(on_c()) >= len(sent), timeout_s=180)
    got = on_c()
    assert sorted(got) == sorted(sent), (
        f"{len(set(sent) - set(got))} lost, {len(got) - len(set(got))} twice"
    )
