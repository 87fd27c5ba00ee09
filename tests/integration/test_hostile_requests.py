"""Hostile requests against real processes: a cluster (``georep cluster``) and its gateway
(``georep gateway``), both with tokens on. Every request here is refused with a JSON
reason, and afterwards nothing has changed: the tenants, namespaces, topics and
policies are what they were, and the logs hold no forged line.

Requests are written byte by byte (http.client, the Host header ours), as a browser
page, a DNS-rebinding page or a careless script could send them.
"""

from __future__ import annotations

import concurrent.futures
import http.client
import json
import re
import socket
import time

import pulsar
import pytest

from georep.broker.admin.routes import ROUTES as CLUSTER_ROUTES
from georep.gateway.admin_app import ROUTES as GATEWAY_ROUTES
from georep.rest.auth import Role
from tests.harness.gateway import ClusterProcess, GatewayProcess, admin_url

pytestmark = [pytest.mark.timeout(180)]

ADMIN_TOKEN = "hostile-admin-token-0123456789"
GATEWAY_TOKEN = "hostile-gateway-token-0123456789"
NAMESPACE = "public/default"
PARAMETERS = {
    "tenant": "public",
    "namespace": "default",
    "topic": "orders",
    "subscription": "s",
    "timestamp": "1",
    "numMessages": "1",
}


class Server:
    def __init__(self, base_url: str, token: str, log_path) -> None:
        self.broker_url = ""
        self.port = int(base_url.rsplit(":", 1)[1])
        self.token = token
        self.log_path = log_path

    def send(
        self,
        method: str,
        path: str,
        *,
        headers: dict[str, str] | None = None,
        body: bytes | None = None,
        token: bool = True,
    ) -> tuple[int, object]:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=15)
        try:
            connection.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
            sent = {"Host": f"127.0.0.1:{self.port}"}
            if token:
                sent["Authorization"] = f"Bearer {self.token}"
            sent.update(headers or {})
            if body is not None:
                sent["Content-Length"] = str(len(body))
            for name, value in sent.items():
                connection.putheader(name, value)
            connection.endheaders(body)
            answer = connection.getresponse()
            raw = answer.read()
        finally:
            connection.close()
        kind = answer.getheader("Content-Type", "")
        return answer.status, json.loads(raw) if kind.startswith("application/json") else raw


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    tokens = {"GEOREP_ADMIN_TOKENS": ADMIN_TOKEN}
    cluster = ClusterProcess(root / "a", name="A", env=tokens)
    remote = ClusterProcess(root / "b", name="B", env=tokens)
    gateway = GatewayProcess(root / "gw", local=cluster, remotes=[remote], token=GATEWAY_TOKEN)
    gateway.env = tokens  # the gateway sends the first admin token to its clusters
    try:
        cluster.start()
        gateway.start()
        servers = {
            "cluster": Server(admin_url(cluster), ADMIN_TOKEN, cluster.log_path),
            "gateway": Server(gateway.url, GATEWAY_TOKEN, gateway.log_path),
        }
        servers["cluster"].broker_url = cluster.url
        servers["gateway"].send(
            "PUT",
            f"/admin/georep/v1/namespaces/{NAMESPACE}/replication",
            headers={"Content-Type": "application/json"},
            body=b'{"clusters": ["B"]}',
        )
        client = pulsar.Client(cluster.url)
        try:
            client.subscribe(f"persistent://{NAMESPACE}/orders", "s").close()
        finally:
            client.close()
        await_gateway_cursors(servers)
        before = state(servers)
    except BaseException:  # a failed setup leaves no process behind
        gateway.kill()
        cluster.kill()
        raise
    try:
        yield servers
        after = state(servers)
    finally:
        gateway.kill()
        cluster.kill()
    assert after == before, "a hostile request changed something"
    for server in servers.values():
        for line in server.log_path.read_text(errors="replace").splitlines():
            assert not line.startswith("forged"), f"a forged log line: {line!r}"
        assert b"\x00" not in server.log_path.read_bytes()
    logs = b"".join(server.log_path.read_bytes() for server in servers.values())
    for token in (ADMIN_TOKEN, GATEWAY_TOKEN):
        assert token[:12].encode() not in logs, "a token (or part of one) in a log"


#: The gateway's replication cursor on the topic, made when its replicator starts.
GATEWAY_CURSOR = "georep.repl.B"


def _cursors(servers: dict[str, Server]) -> dict:
    status, document = servers["cluster"].send(
        "GET", f"/admin/v2/persistent/{NAMESPACE}/orders/internalStats"
    )
    assert status == 200, document
    assert isinstance(document, dict), document
    return document.get("cursors", {})


def await_gateway_cursors(servers: dict[str, Server]) -> None:
    """Wait until the gateway's replicator holds its cursor, so the state compared before
    and after the hostile requests does not race its start."""
    deadline = time.monotonic() + 60
    while GATEWAY_CURSOR not in _cursors(servers):
        assert time.monotonic() < deadline, "the gateway's replicator never subscribed"
        time.sleep(0.2)


def state(servers: dict[str, Server]) -> dict:
    cluster, gateway = servers["cluster"], servers["gateway"]
    out = {}
    for path in (
        "/admin/v2/tenants",
        f"/admin/v2/namespaces/{NAMESPACE.split('/')[0]}",
        f"/admin/v2/persistent/{NAMESPACE}",
        f"/admin/v2/persistent/{NAMESPACE}/orders/internalStats",
    ):
        status, document = cluster.send("GET", path)
        assert status == 200, (path, document)
        if isinstance(document, dict):
            document = {k: v for k, v in document.items() if k == "cursors"}
            cursors = document.get("cursors", {})
            for name in list(cursors):
                if name.startswith("pulsar."):
                    # The broker's own (deduplication, readers): made and moved by the
                    # gateway's traffic at any time, and no request can name them.
                    del cursors[name]
                elif name.startswith("georep."):
                    cursors[name] = "present"  # the gateway moves it as it replicates
            for cursor in cursors.values():
                if isinstance(cursor, dict):
                    for volatile in ("lastLedgerSwitchTimestamp", "messagesConsumedCounter"):
                        cursor.pop(volatile, None)
        out[path] = document
    status, document = gateway.send("GET", "/admin/georep/v1/policies")
    assert status == 200
    out["policies"] = document
    return out


def filled(path: str) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: PARAMETERS[m[1]], path)


def mutations(which: str):
    routes = CLUSTER_ROUTES if which == "cluster" else GATEWAY_ROUTES
    return [route for route in routes if route.role is Role.ADMIN]


JSON = {"Content-Type": "application/json"}


@pytest.mark.parametrize("which", ["cluster", "gateway"])
def test_every_mutation_without_a_token_is_401(world, which) -> None:
    server = world[which]
    for route in mutations(which):
        body = b"{}" if route.request else None
        for token in (False, "wrong"):
            headers = dict(JSON)
            if token == "wrong":
                headers["Authorization"] = "Bearer not-the-token-0123456789"
            status, answer = server.send(
                route.method, filled(route.path), headers=headers, body=body, token=False
            )
            assert status == 401, (route.method, route.path, status, answer)
            assert "reason" in answer


@pytest.mark.parametrize("which", ["cluster", "gateway"])
@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"Content-Type": "application/x-www-form-urlencoded"}, 415),  # a form post
        ({"Content-Type": "text/plain"}, 415),
        ({"Origin": "http://attacker.example", **JSON}, 403),
        ({"Origin": "null", **JSON}, 403),
        ({"Sec-Fetch-Site": "cross-site", **JSON}, 403),
        ({"Host": "attacker.example", **JSON}, 403),  # DNS rebinding
        ({"Host": "attacker.example:8080", **JSON}, 403),
    ],
)
def test_a_browser_page_cannot_change_anything(world, which, headers, status) -> None:
    server = world[which]
    for route in mutations(which):
        if route.method != "POST" and status == 415:
            continue  # PUT and DELETE never leave a browser cross-site without a preflight
        body = b"{}" if route.request else None
        got, answer = server.send(route.method, filled(route.path), headers=headers, body=body)
        assert got == status, (route.method, route.path, got, answer)
        assert "reason" in answer


@pytest.mark.parametrize(
    "path",
    [
        "/admin/v2/tenants/%2E%2E",
        "/admin/v2/tenants/%2e",
        "/admin/v2/tenants/%C3%A9t%C3%A9",  # a unicode tenant, refused as by Pulsar
        "/admin/v2/tenants/forged%0Aforged%20line",
        "/admin/v2/namespaces/public/%2E%2E",
        "/admin/v2/namespaces/public/a%00b",
        "/admin/v2/persistent/public/default/%2E/partitions",
        "/admin/v2/persistent/public/default/%0Aforged/partitions",
        "/admin/v2/persistent/public/default/orders/subscription/%2E%2E",
        "/admin/v2/persistent/public/default/orders/subscription/a%0D%0Aforged",
    ],
)
def test_dotted_and_control_character_names_are_refused_by_the_cluster(world, path) -> None:
    body = b"{}" if "tenants" in path else (b"1" if path.endswith("partitions") else None)
    status, answer = world["cluster"].send("PUT", path, headers=JSON, body=body)
    assert status == 400, (path, status, answer)
    assert "name" in answer["reason"]


@pytest.mark.parametrize(
    "path",
    [
        "/admin/georep/v1/namespaces/%2E%2E/%2E%2E/replication",
        "/admin/georep/v1/namespaces/public/%2E/replication",
        "/admin/georep/v1/persistent/public/default/%2E%2E/replication",
        "/admin/georep/v1/persistent/public/default/forged%0Aforged/replication",
    ],
)
def test_dotted_and_control_character_names_are_refused_by_the_gateway(world, path) -> None:
    status, answer = world["gateway"].send("PUT", path, headers=JSON, body=b'{"clusters": ["B"]}')
    assert status == 400, (path, status, answer)


@pytest.mark.parametrize("which", ["cluster", "gateway"])
@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        (b"{not json", 400, "not valid JSON"),
        (b'{"clusters": ["B"], "clusters": []}', 400, "more than once"),
        (b"[" * 20_000 + b"]" * 20_000, 400, "nests too deeply"),
        (b'{"clusters": ["' + b"B" * 2_000_000 + b'"]}', 413, "at most"),
        (b"\xff\xfe", 400, "UTF-8"),
        (b'{"clusters": ["B"], "n": ' + b"9" * 5_000 + b"}", 400, "integer"),
        (b'{"clusters": ["B"], "n": -' + b"9" * 5_000 + b"}", 400, "integer"),
    ],
)
def test_malformed_and_oversized_bodies(world, which, body, status, words) -> None:
    path = (
        "/admin/v2/tenants/public"
        if which == "cluster"
        else f"/admin/georep/v1/namespaces/{NAMESPACE}/replication"
    )
    method = "POST" if which == "cluster" else "PUT"
    got, answer = world[which].send(method, path, headers=JSON, body=body)
    assert (got, isinstance(answer, dict)) == (status, True), (got, answer)
    assert words in answer["reason"]


def test_unknown_clusters_in_a_tenant_are_412(world) -> None:
    body = json.dumps({"allowedClusters": ["A", "nowhere"]}).encode()
    status, answer = world["cluster"].send("PUT", "/admin/v2/tenants/t412", headers=JSON, body=body)
    assert status == 412 and "nowhere" in answer["reason"]


def test_a_subscription_named_dot_dot_is_refused_over_the_binary_protocol(world) -> None:
    client = pulsar.Client(world["cluster"].broker_url, operation_timeout_seconds=10)
    try:
        for name in ("..", "."):
            with pytest.raises(pulsar.PulsarException):
                client.subscribe(f"persistent://{NAMESPACE}/orders", name)
    finally:
        client.close()


def _raw_exchange(port: int, request: bytes, timeout_s: float = 30) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
        sock.sendall(request)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


@pytest.mark.parametrize("which", ["cluster", "gateway"])
@pytest.mark.parametrize(
    "authorization",
    ["Authorization: Bearer {token}\x01", "Authorization : Bearer {token}"],
)
def test_a_malformed_authorization_header_leaks_no_token(world, which, authorization) -> None:
    """aiohttp's own parse-error path once echoed the header and logged it; the fixture
    checks the logs at the end."""
    server = world[which]
    header = authorization.format(token=server.token)
    answer = _raw_exchange(
        server.port,
        f"GET /admin/v2/tenants HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
        f"{header}\r\n\r\n".encode("latin-1"),
    )
    assert answer.split(b"\r\n", 1)[0].endswith(b" 400 Bad Request")
    assert server.token[:12].encode() not in answer


def test_a_connection_that_sends_nothing_is_closed(world) -> None:
    """A request head that never ends: closed by each server (recv returns b"") well
    before the client's own 30 s timeout (tests/unit/test_rest_server.py: idle too).
    Both servers are asked at once: each waits out its idle limit."""
    head = b"GET /health HTTP/1.1\r\nHost: x\r\n"
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        answers = pool.map(
            lambda which: _raw_exchange(world[which].port, head), ["cluster", "gateway"]
        )
        assert list(answers) == [b"", b""]
