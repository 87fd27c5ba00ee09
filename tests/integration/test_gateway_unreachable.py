"""A gateway process whose remote cannot be reached: a remote over TLS whose certificate
comes from a CA the gateway does not trust, beside a real cluster A with many topics.

What an operator must see (issue: production Pulsar, TLS): one WARNING naming the
cluster and the reason, however many topics wait on it; ``/health`` degraded with the
same words; ``georep_gateway_cluster_reachable`` 0; nothing sent in plaintext; and A's
data untouched, replicated once the remote is reachable (here: never, so the
replication subscriptions keep their backlog)."""

from __future__ import annotations

import asyncio
import re
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web

from georep.runtime.loopback_ca import LoopbackCa
from tests.harness.gateway import (
    ClusterProcess,
    GatewayProcess,
    create_namespace,
    produce,
)
from tests.harness.waiting import wait_for

pytestmark = pytest.mark.slow

NAMESPACE = "tls/unreachable"
TOPICS = 12


class TlsServers:
    """A TLS port that answers nothing and an https admin that answers 200, both with a
    certificate of a CA of their own, on a loop in a thread. Records what reached them
    after a handshake (nothing should)."""

    def __init__(self, directory: Path) -> None:
        self.files = LoopbackCa.create(directory / "strangers-ca").server_files("B")
        self.received = bytearray()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.broker_port = self.admin_port = 0
        self._runner: web.AppRunner | None = None
        self._server: asyncio.Server | None = None

    def __enter__(self) -> TlsServers:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(10)
        return self

    def __exit__(self, *_exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()

    async def _start(self) -> None:
        context = self.files.server_context()

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                while data := await reader.read(65536):
                    self.received += data
            except Exception:
                pass
            finally:
                writer.close()

        self._server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=context)
        self.broker_port = self._server.sockets[0].getsockname()[1]

        async def anything(request: web.Request) -> web.Response:
            self.received += b"HTTP " + request.path.encode()
            return web.json_response({})

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", anything)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=context)
        await site.start()
        self.admin_port = self._runner.addresses[0][1]

    async def _stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        if self._runner is not None:
            await self._runner.cleanup()


class Remote:
    """What GatewayProcess needs of a remote: its name and URLs."""

    def __init__(self, servers: TlsServers) -> None:
        self.name = "B"
        self.service_url = f"pulsar+ssl://127.0.0.1:{servers.broker_port}"
        self.admin_url = f"https://127.0.0.1:{servers.admin_port}"


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Iterator[tuple[ClusterProcess, GatewayProcess, TlsServers]]:
    root = tmp_path_factory.mktemp("unreachable")
    a = ClusterProcess(root / "a", name="A")
    a.start()
    create_namespace(a, NAMESPACE)
    ours = LoopbackCa.create(root / "our-ca")  # the CA the gateway trusts: not B's
    with TlsServers(root) as servers:
        gateway = GatewayProcess(
            root / "gw-a", local=a, remotes=[Remote(servers)], policies={NAMESPACE: ["B"]}
        )
        text = gateway.config_path.read_text()
        gateway.config_path.write_text(
            text.replace(
                "[remotes.B]\n", f'[remotes.B]\ntls_trust_certs_file = "{ours.ca_file}"\n', 1
            )
        )
        try:
            gateway.start()
            yield a, gateway, servers
        finally:
            gateway.kill()
            a.kill()


def test_an_untrusted_remote_is_one_line_a_degraded_health_and_a_metric(world) -> None:
    a, gateway, servers = world
    for index in range(TOPICS):
        produce(a.url, f"persistent://{NAMESPACE}/t-{index}", 3, "m")
    # the replicators ask B's admin REST first (the topic must exist there), so that is
    # where they meet the certificate; the brokers' link says the same when it is tried
    wanted = "TLS: certificate verify failed: unable to get local issuer certificate"

    def degraded() -> list[str]:
        health = gateway.get("/health")
        problems = [p for p in health["problems"] if p.startswith("cluster B unreachable")]
        return problems if health["status"] == "degraded" else []

    assert wait_for(lambda: any(wanted in p for p in degraded()), timeout_s=60)

    with urllib.request.urlopen(f"{gateway.url}/metrics", timeout=15) as answer:
        metrics = answer.read().decode()
    assert re.search(
        r'georep_gateway_cluster_reachable\{cluster="B",local_cluster="A"\} 0\.0', metrics
    ), metrics
    assert re.search(
        r'georep_gateway_cluster_reachable\{cluster="A",local_cluster="A"\} 1\.0', metrics
    )

    # Every replicator of the namespace meets the same cause: the log says it once per
    # interface (brokers, admin REST), not once per topic.
    wait_for(lambda: len(gateway.replicators(f"persistent://{NAMESPACE}")) == TOPICS)
    log = gateway.log_path.read_text()
    lines = [line for line in log.splitlines() if "certificate verify failed" in line]
    assert 1 <= len(lines) <= 2, lines
    assert all("cluster B: " in line for line in lines), lines
    # nothing reached B's servers past a handshake: no Pulsar frame, no HTTP request
    assert not servers.received
