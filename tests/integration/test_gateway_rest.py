"""The gateway's REST admin as a process: policies set, read, replaced by version and
deleted; clear 4xx answers for bad input; tokens for changes; the OpenAPI document and
the metrics endpoint. No replication happens here (the clusters are not started: the
REST does not need them)."""

from __future__ import annotations

import json

import pytest
from openapi_spec_validator import validate

from georep.gateway.admin_app import ROUTES
from tests.harness.gateway import ClusterProcess, GatewayProcess, http

pytestmark = [pytest.mark.timeout(120)]

TOKEN = "gateway-admin-token-0123456789"
V1 = "/admin/georep/v1"
NS = f"{V1}/namespaces/geo/rest/replication"
TOPIC = f"{V1}/persistent/geo/rest/orders/replication"
SYNC_NS = f"{V1}/namespaces/geo/rest/subscription-sync"
SYNC_TOPIC = f"{V1}/persistent/geo/rest/orders/subscription-sync"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    root = tmp_path_factory.mktemp("rest")
    a, b, c = (ClusterProcess(root / n, name=n.upper()) for n in ("a", "b", "c"))
    process = GatewayProcess(root / "gw", local=a, remotes=[b, c], token=TOKEN)
    process.start()
    yield process
    process.kill()


def call(gateway, method, path, body=None, token=TOKEN):
    return http(method, f"{gateway.url}{path}", body, token=token)


def test_namespace_policy_life_cycle(gateway) -> None:
    assert call(gateway, "GET", NS)[0] == 404
    status, policy = call(gateway, "PUT", NS, {"clusters": ["C", "A", "B"]})
    assert status == 200
    assert policy == {"clusters": ["B", "C"], "version": 1}  # the local name is dropped
    assert call(gateway, "GET", NS) == (200, policy)
    status, answer = call(gateway, "PUT", NS, {"clusters": ["B"], "version": 7})
    assert status == 409 and "version 1" in answer["reason"]
    status, policy = call(gateway, "PUT", NS, {"clusters": ["B"], "version": 1})
    assert (status, policy) == (200, {"clusters": ["B"], "version": 2})
    assert call(gateway, "PUT", NS, {"clusters": [], "version": 0})[0] == 409
    status, listed = call(gateway, "GET", f"{V1}/policies")
    assert listed["namespaces"]["geo/rest"] == policy
    assert call(gateway, "DELETE", f"{NS}?version=1")[0] == 409
    # Not decimals: a 400, never a 500 (isdigit() accepts a superscript two, int() not).
    for version in ("%C2%B2", "%D9%A3", "0", "-1", "1" * 5000):
        assert call(gateway, "DELETE", f"{NS}?version={version}")[0] == 400, version
    assert call(gateway, "DELETE", f"{NS}?version=2")[0] == 204
    assert call(gateway, "DELETE", NS)[0] == 404


def test_topic_policy_overrides(gateway) -> None:
    status, policy = call(gateway, "PUT", TOPIC, {"clusters": []})
    assert (status, policy) == (200, {"clusters": [], "version": 1})
    status, listed = call(gateway, "GET", f"{V1}/policies")
    assert listed["topics"] == {"persistent://geo/rest/orders": policy}
    assert call(gateway, "DELETE", TOPIC)[0] == 204


@pytest.mark.parametrize(
    ("path", "body", "words"),
    [
        (NS, {"clusters": ["X"]}, "unknown cluster(s) ['X']"),
        (NS, {"clusters": "B"}, "list of cluster names"),
        (NS, {}, "list of cluster names"),
        (NS, {"clusters": ["B"], "extra": 1}, "unknown field(s) ['extra']"),
        (NS, {"clusters": ["B"], "version": "1"}, "integer"),
        (NS, {"clusters": ["B"], "version": -1}, ">= 0"),
        (NS, ["B"], "must be an object"),
        (f"{V1}/namespaces/geo/bad%20name/replication", {"clusters": []}, "namespace"),
        (f"{V1}/persistent/geo/rest/{'x' * 200}/replication", {"clusters": []}, "characters"),
    ],
)
def test_bad_input_is_400_with_a_reason(gateway, path, body, words) -> None:
    status, answer = call(gateway, "PUT", path, body)
    assert status == 400, answer
    assert words in answer["reason"]


def test_malformed_json_and_large_bodies(gateway) -> None:
    import urllib.request

    def raw(data: bytes, content_type: str = "application/json") -> tuple[int, dict]:
        request = urllib.request.Request(f"{gateway.url}{NS}", data=data, method="PUT")
        request.add_header("Authorization", f"Bearer {TOKEN}")
        request.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    assert raw(b"{not json")[0] == 400
    status, answer = raw(b'{"clusters": ["B"], "clusters": []}')
    assert status == 400 and "more than once" in answer["reason"]
    status, answer = raw(b'{"clusters": ["B"]}', "text/plain")
    assert status == 415 and "application/json" in answer["reason"]
    status, answer = raw(b'{"clusters": [' + b'"B",' * 30_000 + b'"B"]}')
    assert status == 413 and "reason" in answer  # JSON, like every other answer
    assert call(gateway, "GET", NS)[0] == 404, "a refused body changed nothing"


def test_subscription_sync_policy_life_cycle(gateway) -> None:
    assert call(gateway, "GET", SYNC_NS)[0] == 404
    status, policy = call(gateway, "PUT", SYNC_NS, {"subscriptions": "flagged", "pattern": "o-.*"})
    assert (status, policy) == (200, {"subscriptions": "flagged", "pattern": "o-.*", "version": 1})
    assert call(gateway, "GET", SYNC_NS) == (200, policy)
    status, answer = call(gateway, "PUT", SYNC_NS, {"subscriptions": "all", "version": 7})
    assert status == 409 and "version 1" in answer["reason"]
    status, policy = call(gateway, "PUT", SYNC_NS, {"subscriptions": "all", "version": 1})
    assert (status, policy) == (200, {"subscriptions": "all", "pattern": None, "version": 2})
    status, topic = call(gateway, "PUT", SYNC_TOPIC, {"subscriptions": "flagged", "version": 0})
    assert (status, topic["version"]) == (200, 1)
    status, listed = call(gateway, "GET", f"{V1}/subscription-sync-policies")
    assert listed == {
        "namespaces": {"geo/rest": policy},
        "topics": {"persistent://geo/rest/orders": topic},
    }
    assert "geo/rest" not in call(gateway, "GET", f"{V1}/policies")[1]["namespaces"]
    assert call(gateway, "DELETE", f"{SYNC_NS}?version=1")[0] == 409
    assert call(gateway, "DELETE", f"{SYNC_NS}?version=2")[0] == 204
    assert call(gateway, "DELETE", SYNC_NS)[0] == 404
    assert call(gateway, "DELETE", SYNC_TOPIC)[0] == 204
    status, answer = call(gateway, "PUT", SYNC_NS, {"subscriptions": "all"}, token=None)
    assert status == 401 and "Bearer" in answer["reason"]


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"subscriptions": "flagged", "pattern": "orders-("}, "is not a regular expression"),
        ({"subscriptions": "flagged", "pattern": "x" * 300}, "1..256 characters"),
        ({"subscriptions": "flagged", "pattern": ""}, "1..256 characters"),
        ({"subscriptions": "all", "pattern": "o.*"}, 'beside subscriptions "all"'),
        ({"subscriptions": "some"}, '"all" or "flagged"'),
        ({}, '"all" or "flagged"'),
        ({"subscriptions": "flagged", "pattern": 3}, "a string"),
        ({"subscriptions": "all", "version": -1}, ">= 0"),
        ({"subscriptions": "all", "clusters": []}, "unknown field(s) ['clusters']"),
    ],
)
def test_bad_subscription_sync_policies_are_400_with_a_reason(gateway, body, words) -> None:
    for path in (SYNC_NS, SYNC_TOPIC):
        status, answer = call(gateway, "PUT", path, body)
        assert status == 400, answer
        assert words in answer["reason"]
    assert call(gateway, "GET", SYNC_NS)[0] == 404, "a refused body changed nothing"


def test_tokens(gateway) -> None:
    status, answer = call(gateway, "PUT", NS, {"clusters": ["B"]}, token=None)
    assert status == 401 and "Bearer" in answer["reason"]
    assert call(gateway, "PUT", NS, {"clusters": ["B"]}, token="wrong-token-wrong-token")[0] == 401
    assert call(gateway, "GET", f"{V1}/stats", token=None)[0] == 401
    status, metrics = call(gateway, "GET", "/metrics", token=None)
    assert status == 200
    # how late the gateway's event loop runs what is due (runtime/loop_lag.py)
    assert 'georep_gateway_event_loop_lag_seconds{local_cluster="A"}' in metrics
    assert 'georep_gateway_event_loop_stalls_total{local_cluster="A"}' in metrics
    assert call(gateway, "GET", "/health", token=None)[1]["cluster"] == "A"
    status, page = call(gateway, "GET", "/status", token=None)  # public, as /metrics is
    assert status == 200 and "<title>georep gateway A</title>" in page
    assert "nothing replicated yet" in page and "page 1 of 1" in page
    assert call(gateway, "GET", "/status?page=x", token=None)[0] == 400


def test_clusters_and_stats(gateway) -> None:
    status, clusters = call(gateway, "GET", f"{V1}/clusters")
    assert status == 200
    assert clusters["local"]["name"] == "A"
    assert [r["name"] for r in clusters["remotes"]] == ["B", "C"]
    status, stats = call(gateway, "GET", f"{V1}/stats")
    assert status == 200 and stats["localCluster"] == "A" and stats["replicators"] == []


def test_openapi_document_lists_every_route(gateway) -> None:
    status, document = call(gateway, "GET", f"{V1}/openapi.json", token=None)
    assert status == 200
    validate(document)
    documented = {(m.upper(), p) for p, ops in document["paths"].items() for m in ops}
    assert documented == {(r.method, r.path) for r in ROUTES}
