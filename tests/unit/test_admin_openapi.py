"""The admin REST's OpenAPI document, metrics and health: the document is valid OpenAPI 3.1
listing every route the app serves (and nothing else), the metrics are Prometheus text,
and a bounded schemathesis run finds no server error or undocumented answer."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from typing import NoReturn

import hypothesis
import pytest
import schemathesis
from openapi_spec_validator import validate
from prometheus_client.parser import text_string_to_metric_families
from schemathesis import checks as schemathesis_checks

from georep.broker.admin import AdminServer, AdminSettings, create_app, openapi
from georep.broker.admin.routes import OPENAPI_PATH, ROUTES
from georep.broker.admin.state import CATALOG
from georep.rest.openapi import path_parameters
from georep.rest.tokens import tokens
from georep.storage.errors import MetadataUnavailable
from tests.unit.test_admin_support import ADMIN_TOKEN, READ_TOKEN, MemoryCluster, running_admin


@pytest.fixture
def sqlite_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path}/meta.db"


def test_document_is_valid_openapi() -> None:
    document = openapi.build(ROUTES)
    validate(document)
    operation_ids = [
        operation["operationId"]
        for path in document["paths"].values()
        for operation in path.values()
    ]
    assert len(operation_ids) == len(set(operation_ids)) == len(ROUTES)


async def test_every_served_route_is_documented_and_back(sqlite_url: str) -> None:
    app = create_app(AdminSettings("A", sqlite_url), MemoryCluster())
    served = set()
    for route in app.router.routes():
        info = route.resource.get_info() if route.resource is not None else {}
        path = info.get("formatter") or info.get("path")
        served.add((route.method.lower(), path))
    document = openapi.build(ROUTES)
    documented = {
        (method, path) for path, operations in document["paths"].items() for method in operations
    }
    assert served == documented
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            names = path_parameters(path)
            assert [p["name"] for p in operation.get("parameters", [])] == names, (method, path)
            assert operation["summary"]
            assert set(operation["responses"]) & {"200", "204"}, (method, path)


async def test_served_document_matches(sqlite_url: str) -> None:
    async with running_admin(sqlite_url) as admin:
        answer = await admin.get(OPENAPI_PATH)
        assert answer.status == 200
        assert answer.body == json.loads(json.dumps(openapi.build(ROUTES)))


async def test_metrics_are_prometheus_text(sqlite_url: str) -> None:
    async with running_admin(sqlite_url, tokens=True) as admin:
        await admin.get("/admin/v2/tenants")
        await admin.get("/admin/v2/tenants/nobody")
        await admin.put("/admin/v2/tenants/acme", {}, token=READ_TOKEN)
        answer = await admin.get("/metrics", token=None)
        assert answer.status == 200
        assert answer.headers["Content-Type"].startswith("text/plain")
        samples = {
            (sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(answer.body)
            for sample in family.samples
        }
    tenant_route = "/admin/v2/tenants/{tenant}"
    key = ("georep_admin_requests_total",
           (("method", "GET"), ("route", tenant_route), ("status", "404")))  # fmt: skip
    assert samples[key] == 1
    assert samples[("georep_admin_auth_refusals_total", (("status", "403"),))] == 1
    assert samples[("georep_metadata_store_operations_total", ())] >= 3
    assert ADMIN_TOKEN not in answer.body


async def test_health(sqlite_url: str) -> None:
    async with running_admin(sqlite_url, tokens=True) as admin:
        answer = await admin.get("/health", token=None)
        assert (answer.status, answer.body) == (200, {"status": "ok", "cluster": "A"})
        catalog = admin.app[CATALOG]

        async def unavailable(name: str) -> NoReturn:
            raise MetadataUnavailable("database is locked")

        catalog.get_tenant = unavailable  # type: ignore[method-assign]
        answer = await admin.get("/health", token=None)
        assert answer.status == 503
        assert "locked" in answer.body["reason"]


async def test_admin_server_serves_on_a_free_port(sqlite_url: str) -> None:
    settings = AdminSettings("A", sqlite_url, port=0, admin_tokens=tokens([ADMIN_TOKEN]))
    server = await AdminServer.start(settings, MemoryCluster())
    try:
        assert server.port > 0
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        status_line = await reader.readline()
        writer.close()
        await writer.wait_closed()
        assert status_line.startswith(b"HTTP/1.1 200")
    finally:
        await server.close()


# --- schemathesis -----------------------------------------------------------------------
SCHEMA = schemathesis.openapi.from_dict(openapi.build(ROUTES))


@pytest.fixture(scope="module")
def live_admin(tmp_path_factory) -> Iterator[str]:
    """The admin app on a free port, served from its own thread and event loop."""
    url = f"sqlite:///{tmp_path_factory.mktemp('schemathesis')}/meta.db"
    cluster = MemoryCluster()
    cluster.add_topic("persistent://public/default/t", entries=5)
    loop = asyncio.new_event_loop()
    started: dict[str, object] = {}
    ready = threading.Event()

    async def serve() -> None:
        settings = AdminSettings("A", url, port=0, admin_tokens=tokens([ADMIN_TOKEN]))
        server = await AdminServer.start(settings, cluster)
        started["server"] = server
        ready.set()

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(serve(), loop).result(timeout=30)
    ready.wait(timeout=30)
    server = started["server"]
    assert isinstance(server, AdminServer)
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        asyncio.run_coroutine_threadsafe(server.close(), loop).result(timeout=30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=30)
        loop.close()


@SCHEMA.parametrize()
@hypothesis.settings(
    max_examples=6,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(hypothesis.HealthCheck),
)
def test_schemathesis_finds_no_server_error_or_undocumented_answer(case, live_admin) -> None:
    case.call_and_validate(
        base_url=live_admin,
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        checks=[
            schemathesis_checks.not_a_server_error,
            schemathesis_checks.status_code_conformance,
            schemathesis_checks.content_type_conformance,
            schemathesis_checks.response_schema_conformance,
        ],
        timeout=30,
    )
