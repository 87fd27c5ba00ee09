"""Admin REST tenants and namespaces, through a real metadata store (SQLite, and
PostgreSQL when GEOREP_TEST_POSTGRES_URL is set): CRUD, policies, defaults, and bad input
refused with a clear 4xx while nothing is stored."""

from __future__ import annotations

import asyncio

import pytest

from georep import limits
from georep.broker.meta.store import BrokerRepositories
from georep.storage.meta.store import MetadataStore
from tests.unit.test_admin_support import running_admin

T = "/admin/v2/tenants"
N = "/admin/v2/namespaces"


async def test_defaults_exist_from_the_start(metadata_url: str) -> None:
    async with running_admin(metadata_url) as admin:
        assert (await admin.get(T)).body == ["public"]
        tenant = await admin.get(f"{T}/public")
        assert tenant.status == 200
        assert tenant.body == {"adminRoles": [], "allowedClusters": ["A"]}
        assert (await admin.get(f"{N}/public")).body == ["public/default"]
        assert (await admin.get("/admin/v2/clusters")).body == ["A"]
    async with running_admin(metadata_url) as admin:  # a second start changes nothing
        assert (await admin.get(f"{N}/public")).body == ["public/default"]


async def test_tenant_crud_round_trip(metadata_url: str) -> None:
    async with running_admin(metadata_url) as admin:
        unknown = {"adminRoles": ["ops"], "allowedClusters": ["A", "B"]}
        refused = await admin.put(f"{T}/acme", unknown)
        assert refused.status == 412 and "['B'] do not exist" in refused.body["reason"]
        assert (await admin.get(f"{T}/acme")).status == 404
        info = {"adminRoles": ["ops"], "allowedClusters": ["A"]}
        assert (await admin.put(f"{T}/acme", info)).status == 204
        assert (await admin.get(f"{T}/acme")).body == info
        again = await admin.put(f"{T}/acme", info)
        assert again.status == 409
        assert "already exists" in again.body["reason"]
        assert (await admin.post(f"{T}/acme", {"adminRoles": ["dev"]})).status == 204
        assert (await admin.get(f"{T}/acme")).body == {"adminRoles": ["dev"], "allowedClusters": []}
        assert (await admin.get(T)).body == ["acme", "public"]
        assert (await admin.delete(f"{T}/acme")).status == 204
        missing = await admin.get(f"{T}/acme")
        assert missing.status == 404
        assert missing.body == {"reason": "tenant acme does not exist"}
        assert (await admin.delete(f"{T}/acme")).status == 404
        assert (await admin.post(f"{T}/acme", info)).status == 404
    store = await MetadataStore.open(metadata_url)
    try:
        assert await BrokerRepositories(store.engine).catalog.list_tenants() == ["public"]
    finally:
        await store.close()


async def test_namespace_crud_and_policies_round_trip(metadata_url: str) -> None:
    async with running_admin(metadata_url) as admin:
        await admin.put(f"{T}/acme", {})
        ns = f"{N}/acme/orders"
        assert (await admin.put(ns)).status == 204
        assert (await admin.put(ns)).status == 409
        assert (await admin.get(f"{N}/acme")).body == ["acme/orders"]
        assert (await admin.get(ns)).body == {
            "retention_policies": None,
            "message_ttl_in_seconds": None,
        }
        assert (await admin.get(f"{ns}/retention")).body is None
        assert (await admin.get(f"{ns}/messageTTL")).body is None

        retention = {"retentionTimeInMinutes": 60, "retentionSizeInMB": -1}
        assert (await admin.post(f"{ns}/retention", retention)).status == 204
        assert (await admin.post(f"{ns}/messageTTL", 3600)).status == 204
        # the broker is told, so a topic loaded next reads the new policies
        assert admin.cluster.calls.count(("namespace_changed", ("acme/orders",))) == 2
        assert (await admin.get(f"{ns}/retention")).body == retention
        assert (await admin.get(f"{ns}/messageTTL")).body == 3600
        assert (await admin.get(ns)).body == {
            "retention_policies": retention,
            "message_ttl_in_seconds": 3600,
        }
        assert (await admin.delete(f"{ns}/retention")).status == 204
        assert (await admin.delete(f"{ns}/messageTTL")).status == 204
        assert (await admin.get(ns)).body == {
            "retention_policies": None,
            "message_ttl_in_seconds": None,
        }

        # created with policies in the body
        policies = {"retention_policies": retention, "message_ttl_in_seconds": 5}
        assert (await admin.put(f"{N}/acme/billing", policies)).status == 204
        assert (await admin.get(f"{N}/acme/billing")).body == policies

        assert (await admin.delete(f"{T}/acme")).status == 409  # still has namespaces
        assert (await admin.delete(ns)).status == 204
        assert ("namespace_deleted", ("acme/orders",)) in admin.cluster.calls
        assert (await admin.delete(ns)).status == 404
        assert (await admin.get(f"{ns}/retention")).status == 404
        assert (await admin.post(f"{ns}/messageTTL", 1)).status == 404
        assert (await admin.delete(f"{N}/acme/billing")).status == 204
        assert (await admin.delete(f"{T}/acme")).status == 204


async def test_namespace_of_missing_tenant_is_404(metadata_url: str) -> None:
    async with running_admin(metadata_url) as admin:
        assert (await admin.put(f"{N}/nobody/ns")).status == 404
        assert (await admin.get(f"{N}/nobody")).status == 404
        assert (await admin.get(f"{N}/nobody/ns")).status == 404


async def test_namespace_with_topics_is_not_deleted(metadata_url: str) -> None:
    async with running_admin(metadata_url) as admin:
        admin.cluster.add_topic("persistent://public/default/orders")
        answer = await admin.delete(f"{N}/public/default")
        assert answer.status == 409
        assert "topics" in answer.body["reason"]
        assert (await admin.get(f"{N}/public")).body == ["public/default"]


async def test_concurrent_policy_changes_all_apply_in_some_order(metadata_url: str) -> None:
    async with running_admin(metadata_url) as admin:
        ttls = list(range(1, 9))
        answers = await asyncio.gather(
            *(admin.post(f"{N}/public/default/messageTTL", ttl) for ttl in ttls)
        )
        assert [answer.status for answer in answers] == [204] * len(ttls)
        assert (await admin.get(f"{N}/public/default/messageTTL")).body in ttls
    store = await MetadataStore.open(metadata_url)
    try:
        record = await BrokerRepositories(store.engine).catalog.get_namespace("public", "default")
        assert record is not None and record.version == 1 + len(ttls)
    finally:
        await store.close()


BAD_REQUESTS: list[tuple[str, str, object, int, str]] = [
    # (method, path, body, status, words in the reason)
    ("PUT", f"{T}/bad name", {}, 400, "may use only"),
    ("PUT", f"{T}/{'x' * 65}", {}, 400, "at most 64"),
    ("PUT", f"{T}/acme", None, 400, "needs a JSON body"),
    ("PUT", f"{T}/acme", b"{not json", 400, "not valid JSON"),
    ("PUT", f"{T}/acme", b"\xff\xfe", 400, "not UTF-8"),
    ("PUT", f"{T}/acme", b'{"adminRoles": [NaN]}', 400, "NaN"),
    ("PUT", f"{T}/acme", [], 400, "must be a JSON object"),
    ("PUT", f"{T}/acme", {"adminRole": []}, 400, "unknown fields adminRole"),
    ("PUT", f"{T}/acme", {"adminRoles": "ops"}, 400, "list of strings"),
    ("PUT", f"{T}/acme", {"adminRoles": [""]}, 400, "empty"),
    ("PUT", f"{T}/acme", {"allowedClusters": ["a/b"]}, 400, "cluster name"),
    ("PUT", f"{T}/acme", {"allowedClusters": ["c"] * 257}, 400, "at most 256"),
    ("PUT", f"{N}/public/bad*ns", None, 400, "may use only"),
    ("PUT", f"{N}/public/ns", {"bundles": 4}, 400, "unknown fields bundles"),
    ("PUT", f"{N}/public/ns", {"message_ttl_in_seconds": -1}, 400, "0..2147483647"),
    ("POST", f"{N}/public/default/retention", {"retentionTimeInMinutes": 1}, 400, "missing"),
    ("POST", f"{N}/public/default/retention",
     {"retentionTimeInMinutes": -2, "retentionSizeInMB": 0}, 400, "-1.."),
    ("POST", f"{N}/public/default/retention",
     {"retentionTimeInMinutes": 1.5, "retentionSizeInMB": 0}, 400, "integer"),
    ("POST", f"{N}/public/default/messageTTL", "60", 400, "integer"),
    ("POST", f"{N}/public/default/messageTTL", True, 400, "integer"),
    ("POST", f"{N}/public/default/messageTTL", 2**31, 400, "0..2147483647"),
    ("GET", "/admin/v2/nothing/here", ..., 404, "Not Found"),
    ("PATCH", f"{T}/public", {}, 405, "Method Not Allowed"),
]  # fmt: skip


@pytest.mark.parametrize(("method", "path", "body", "status", "words"), BAD_REQUESTS)
async def test_bad_input_is_a_clear_4xx_and_stores_nothing(
    metadata_url: str, method: str, path: str, body: object, status: int, words: str
) -> None:
    async with running_admin(metadata_url) as admin:
        if isinstance(body, bytes):
            answer = await admin.request(
                method, path, data=body, headers={"Content-Type": "application/json"}
            )
        elif body is None:
            answer = await admin.request(method, path)
        else:
            answer = await admin.request(method, path, body)
        assert answer.status == status, answer.body
        assert answer.headers["Content-Type"].startswith("application/json")
        assert words in answer.body["reason"]
        assert (await admin.get(T)).body == ["public"]
        assert (await admin.get(f"{N}/public")).body == ["public/default"]
        default = await admin.get(f"{N}/public/default")
        assert default.body == {"retention_policies": None, "message_ttl_in_seconds": None}


async def test_oversized_body_is_413_before_parsing(metadata_url: str) -> None:
    async with running_admin(metadata_url, request_body_bytes_max=1024) as admin:
        roles = ["r" * 200] * 10
        answer = await admin.put(f"{T}/acme", {"adminRoles": roles})
        assert answer.status == 413
        assert "at most 1024" in answer.body["reason"]
        assert (await admin.get(T)).body == ["public"]


async def test_oversized_chunked_body_is_413(metadata_url: str) -> None:
    async def chunks():
        for _ in range(64):
            yield b"x" * 1024

    async with running_admin(metadata_url, request_body_bytes_max=4096) as admin:
        async with admin.client.put(
            f"{T}/acme", data=chunks(), headers={"Content-Type": "application/json"}
        ) as response:
            assert response.status == 413
            assert "larger than 4096" in (await response.json())["reason"]
        assert (await admin.get(T)).body == ["public"]


async def test_body_must_be_application_json(metadata_url: str) -> None:
    async with running_admin(metadata_url) as admin:
        answer = await admin.request(
            "PUT", f"{T}/acme", data=b"{}", headers={"Content-Type": "text/plain"}
        )
        assert answer.status == 415
        assert "application/json" in answer.body["reason"]
        assert (await admin.get(T)).body == ["public"]


async def test_tenant_limit_is_409(metadata_url: str, monkeypatch) -> None:
    monkeypatch.setattr(limits, "tenants_count_max", 1)
    async with running_admin(metadata_url) as admin:
        answer = await admin.put(f"{T}/acme", {})
        assert answer.status == 409
        assert "maximum" in answer.body["reason"]
