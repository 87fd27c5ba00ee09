"""The gateway beside two Pulsar standalones secured as production runs them: TLS-only
client ports, token authentication, authorization on; the gateways on the role
``docs/PULSAR.md`` "Least privilege" documents, and nothing more.

The pair is this module's own (started once for it): every other test of tests/pulsar
shares a plaintext pair, and this one ends by killing A.

- ``georep/gsync``, **sync only**: Pulsar's geo-replication (over TLS: the clusters are
  registered with their TLS URLs) carries the data; the role may consume in the
  namespace and produce on its side topic only.
- ``georep/grepl``, **replicate and sync**: the gateways replicate; the role may produce
  and consume in the namespace; the partitioned topic was made on both clusters by the
  operator (creating it is a tenant admin's right).

First a right is withdrawn (``revoke-permission``) and the gateway must say so: one
WARNING naming the refused operation, the metric, ``/health`` degraded; granted again,
the refusal clears. Then, as in test_gateway_pulsar.py, a Shared subscription on A
acknowledges out of order, A is killed with SIGKILL, and the consumers that move to B
receive exactly what A left unacknowledged: 0 lost, 0 delivered twice.
"""

from __future__ import annotations

import asyncio
import os
import re
import socket
import urllib.error
import urllib.request
import uuid
from http.client import HTTPException
from pathlib import Path
from typing import Any

import pulsar
import pytest

from georep.client.errors import ServerError
from georep.client.link import PulsarLink
from georep.client.refusals import Refusals
from georep.runtime.loopback_ca import LoopbackCa
from pulsar_tools.admin import PulsarAdmin, PulsarAdminError, link_geo_replication
from pulsar_tools.security import PulsarSecurity
from pulsar_tools.standalone import PulsarStandalone, StandaloneSpec
from tests.harness.failover_checks import (
    acknowledge_all_but_every_seventh,
    drain,
    quiet_client,
    stamps_source_position,
    wait_until_synced,
)
from tests.harness.gateway import GatewayProcess, http
from tests.harness.waiting import wait_for

pytestmark = [pytest.mark.timeout(900), pytest.mark.slow]

TENANT = "georep"
SYNC_ONLY = "georep/gsync"
REPLICATE = "georep/grepl"
SIDE_TOPIC = "georep-subscription-sync"
ROLE = "georep-gateway"
MESSAGES = 100
PARTITIONS = 2
SYNC_TOML = f"""
[subscription_sync]
poll_interval_s = 0.1
[subscription_sync.namespaces."{SYNC_ONLY}"]
[subscription_sync.namespaces."{REPLICATE}"]
"""


class Secured:
    """The pair, the superuser's admin clients and client options, the gateways."""

    def __init__(self, security: PulsarSecurity, pair: dict[str, PulsarStandalone]) -> None:
        self.security = security
        self.pair = pair
        self.context = security.client_context()
        self.admins = {
            name: PulsarAdmin(
                cluster.admin_url, token=security.superuser_token, context=self.context
            )
            for name, cluster in pair.items()
        }
        self.client_options: dict[str, Any] = {
            "authentication": pulsar.AuthenticationToken(security.superuser_token),
            "tls_trust_certs_file_path": str(security.ca_file),
            "tls_validate_hostname": True,
        }
        self.gateways: dict[str, GatewayProcess] = {}


def grant_least_privilege(admin: PulsarAdmin) -> None:
    """The rights docs/PULSAR.md lists, on one cluster, for both deployments."""
    admin.grant_permission(SYNC_ONLY, ROLE, ["consume"])
    admin.request(
        "POST", f"/admin/v2/persistent/{SYNC_ONLY}/{SIDE_TOPIC}/permissions/{ROLE}", ["produce"]
    )
    admin.grant_permission(REPLICATE, ROLE, ["produce", "consume"])


@pytest.fixture(scope="module")
def secured(pulsar_jars, tmp_path_factory):
    base = tmp_path_factory.mktemp("pulsar-secure")
    ca = LoopbackCa.create(base / "tls")
    security = PulsarSecurity.create(base / "secrets", ca, "loopback")
    pair = {
        name: PulsarStandalone(StandaloneSpec(name, base / name, security=security), pulsar_jars)
        for name in ("A", "B")
    }
    world = Secured(security, pair)
    try:
        for standalone in pair.values():
            standalone.start()
        link_geo_replication(
            list(pair.values()),
            TENANT,
            SYNC_ONLY.split("/")[1],
            token=security.superuser_token,
            context=world.context,
        )
        for admin in world.admins.values():
            admin.ensure_namespace(TENANT, REPLICATE.split("/")[1])
            admin.request("POST", f"/admin/v2/namespaces/{REPLICATE}/deduplication", True)
            # a topic's right is granted once the topic exists
            # (allowAclChangesOnNonExistentTopics=false)
            admin.request("PUT", f"/admin/v2/persistent/{SYNC_ONLY}/{SIDE_TOPIC}")
            grant_least_privilege(admin)
        token_file = base / "gateway.token"
        token_file.write_text(security.token(ROLE))
        os.chmod(token_file, 0o600)
        keys = {"tls_trust_certs_file": str(security.ca_file), "token_file": str(token_file)}
        a, b = pair["A"], pair["B"]
        for local, remote in ((a, b), (b, a)):
            gateway = GatewayProcess(
                base / f"gw-{local.name}",
                local=local,
                remotes=[remote],
                policies={REPLICATE: [remote.name]},
                extra_toml=SYNC_TOML,
                kind="pulsar",
                cluster_keys=keys,
            )
            world.gateways[local.name] = gateway
            gateway.start()
        yield world
    finally:
        for gateway in world.gateways.values():
            gateway.kill()
        for standalone in pair.values():
            standalone.stop()


def listening_ports(pid: int) -> set[int]:
    """The TCP ports process ``pid`` listens on (/proc: its sockets, the kernel's table)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def bookie_port(standalone: PulsarStandalone) -> int:
    """The port of the standalone's bookie: with RocksDB metadata the starter picks it
    (not ``--bookkeeper-port``), and its log says which."""
    found = re.search(r"Binding bookie-rpc endpoint to \S+:(\d+)", standalone.log_path.read_text())
    assert found, f"no bookie port in {standalone.log_path}"
    return int(found.group(1))


def test_no_plaintext_port_to_connect_to(secured):
    """Each standalone listens on its two TLS ports and its bookie's (the bookie
    protocol, which no client of Pulsar speaks), nothing else; both TLS ports complete a
    handshake verified against the CA, and plain HTTP is refused."""
    for standalone in secured.pair.values():
        spec = standalone.spec
        assert listening_ports(standalone.pid) == {
            spec.broker_port,
            spec.web_port,
            bookie_port(standalone),
        }
        for port in (spec.broker_port, spec.web_port):
            with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
                with secured.context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                    assert tls.version() is not None
        with pytest.raises((urllib.error.URLError, ConnectionError, HTTPException)):
            urllib.request.urlopen(
                f"http://127.0.0.1:{spec.web_port}/admin/v2/clusters", timeout=10
            )
        # the gateways' own URLs are TLS only
        for gateway in secured.gateways.values():
            text = gateway.config_path.read_text()
            assert "pulsar://" not in text and "http://" not in text


def test_the_role_has_nothing_more(secured):
    """The gateways' role is refused what is not on the list: it is no tenant admin."""
    role = PulsarAdmin(
        secured.pair["B"].admin_url, token=secured.security.token(ROLE), context=secured.context
    )
    for method, path, body in (
        ("GET", f"/admin/v2/namespaces/{REPLICATE}", None),
        ("PUT", f"/admin/v2/persistent/{REPLICATE}/made-by-the-role/partitions", 2),
        ("POST", f"/admin/v2/namespaces/{REPLICATE}/permissions/{ROLE}", ["produce"]),
    ):
        with pytest.raises(PulsarAdminError) as refused:
            role.request(method, path, body)
        assert refused.value.status in (401, 403), (method, path, refused.value)

    async def subscribe_where_not_granted() -> Refusals:
        link = PulsarLink(
            secured.pair["B"].service_url,
            token=secured.security.token(ROLE),
            ssl_context=secured.context,
            cluster="B",
        )
        try:
            with pytest.raises(ServerError) as refused:
                await link.subscribe("persistent://public/default/not-granted", "georep.x")
            assert refused.value.refused and not refused.value.retriable
            return link.refusals
        finally:
            await link.close()

    refusals = asyncio.run(subscribe_where_not_granted())
    assert list(refusals.current()) == ["consume on public/default"]


def refused_lines(gateway: GatewayProcess, operation: str) -> list[str]:
    return [
        line
        for line in gateway.log_path.read_text().splitlines()
        if "WARNING" in line and f"refused the gateway's role: {operation}" in line
    ]


def test_a_withdrawn_right_is_reported_once_and_clears(secured):
    """Revoke the role's rights on the sync-only namespace on A: the gateway of A may no
    longer list its topics. One WARNING names the operation, however many passes meet
    it; the metric counts them; /health is degraded; granted again, it clears."""
    gateway, admin = secured.gateways["A"], secured.admins["A"]
    operation = f"GET /admin/v2/persistent/{{namespace}} on {SYNC_ONLY}"
    admin.revoke_permission(SYNC_ONLY, ROLE)
    try:
        prefix = f"cluster A refused the gateway's role: {operation}: 403 "

        def refused_often() -> str | None:
            for problem in gateway.get("/health")["problems"]:
                count = re.search(r"\((\d+) times", problem)
                if problem.startswith(prefix) and count and int(count.group(1)) >= 3:
                    return str(problem)
            return None

        problem = wait_for(refused_often, timeout_s=60)
        assert "GET_TOPICS" in problem, problem
        assert gateway.get("/health")["status"] == "degraded"
        _, metrics = http("GET", f"{gateway.url}/metrics")
        metric = (
            'georep_gateway_cluster_refused{cluster="A",local_cluster="A",'
            f'operation="{operation}"}}'
        )
        assert metric in str(metrics), str(metrics)[-2000:]
        # refused on three passes at least, said once
        assert len(refused_lines(gateway, operation)) == 1
    finally:
        grant_least_privilege(admin)
    wait_for(
        lambda: not any("refused" in p for p in gateway.get("/health")["problems"]),
        timeout_s=60,
    )


def test_failover_after_kill_9_on_least_privilege(secured, pulsar_version):
    """Per deployment a partitioned topic and a plain one, synced by the gateways on the
    documented role; A is killed and the consumers move to B: 0 lost, 0 twice.

    On a Pulsar whose replicator stamps no source position (3.0) the sync-only deployment
    cannot map Pulsar's copies: there B's gateway must say so on ``/health`` and in its
    stats, and nothing Pulsar carried is lost; replicate and sync is checked in full."""
    a, b = secured.pair["A"], secured.pair["B"]
    options = secured.client_options
    mapped = stamps_source_position(pulsar_version)
    run = uuid.uuid4().hex[:8]
    shapes = {f"orders-{run}": PARTITIONS, f"audit-{run}": 0}
    namespaces = {"sync only": SYNC_ONLY, "replicate and sync": REPLICATE}
    topics: dict[tuple[str, str], int] = {}
    for name, namespace in namespaces.items():
        for local, partitions in shapes.items():
            topic = f"persistent://{namespace}/{local}"
            topics[(name, topic)] = partitions
            if not partitions:
                continue
            # sync only: Pulsar's replicator makes it on B; replicate: the operator does,
            # on both (a tenant admin's right, which the gateway's role does not have)
            for cluster in ("A", "B") if namespace == REPLICATE else ("A",):
                secured.admins[cluster].request(
                    "PUT", f"/admin/v2/persistent/{namespace}/{local}/partitions", partitions
                )
    synced = {key: p for key, p in topics.items() if mapped or key[0] != "sync only"}
    client = quiet_client(a.service_url, **options)
    try:
        done = acknowledge_all_but_every_seventh(client, topics, MESSAGES)

        def sync_stats() -> str:
            stats = secured.gateways["B"].get("/admin/georep/v1/stats")
            return f"B's gateway: {str(stats.get('subscriptionSync'))[:3000]}"

        wait_until_synced(
            b,
            synced,
            done.expected,
            MESSAGES,
            admin=secured.admins["B"],
            explain=sync_stats,
            **options,
        )
        if not mapped:
            problem = wait_for(
                lambda: next(
                    (
                        p
                        for p in secured.gateways["B"].get("/health")["problems"]
                        if "copies from cluster A name no origin" in p
                    ),
                    None,
                ),
                timeout_s=60,
            )
            print(f"Pulsar {pulsar_version}, sync only, B's /health: {problem}")
        else:
            for gateway in secured.gateways.values():
                assert gateway.get("/health")["status"] == "ok", gateway.get("/health")
        a.kill()  # SIGKILL: the consumers move to B
        got = {
            name: drain(b.service_url, [t for (of, t) in topics if of == name], **options)
            for name in namespaces
        }
    finally:
        client.close()
    for name in namespaces:
        counts = (
            len(done.acked[name] & set(got[name])),  # acknowledged on A, delivered again
            len(got[name]) - len(set(got[name])),  # delivered twice
            len(done.expected[name] - set(got[name])),  # lost
        )
        print(
            f"Pulsar {pulsar_version}, {name}: (delivered again, twice, lost) = {counts}"
            f" of {len(done.acked[name])} acked"
        )
        if mapped or name != "sync only":
            assert counts == (0, 0, 0), f"{name}: {counts}"
        else:
            assert counts[2] == 0, f"{name}: Pulsar lost a message: {counts}"
