"""Schemas replicated with their messages beside real Pulsar (replicate and sync): a
gateway A→B between two standalones, Pulsar's geo-replication off, a schema'd topic whose
schema changes (compatibly) mid-stream. B numbers the schemas its own way (one was
registered there first); every message on B is stamped with B's version of its schema,
so a consumer resolving schemas by version decodes each one, none lost or twice."""

from __future__ import annotations

import json
import uuid

import pytest

from pulsar_tools.admin import PulsarAdmin
from tests.harness.gateway import GatewayProcess, http
from tests.integration.test_gateway_schemas import (
    V1,
    V2,
    history,
    publish,
    read_by_version,
    schemas_url,
)

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]

NAMESPACE = "georep/gschemas"


def test_every_message_on_b_decodes_by_its_version(pulsar_pair, tmp_path_factory) -> None:
    a, b = pulsar_pair["A"], pulsar_pair["B"]
    for cluster in (a, b):
        admin = PulsarAdmin(cluster.admin_url)
        admin.ensure_namespace(*NAMESPACE.split("/"))
        # The replicator's sequence ids are deduplicated by the receiving broker.
        admin.request("POST", f"/admin/v2/namespaces/{NAMESPACE}/deduplication", True)
    topic = f"persistent://{NAMESPACE}/readings-{uuid.uuid4().hex[:8]}"
    payload = {"type": "AVRO", "schema": json.dumps(V2.schema()), "properties": {}}
    status, answer = http("POST", f"{schemas_url(b, topic)}/schema", payload)
    assert status == 200, answer  # B's v0 is A's v1
    gateway = GatewayProcess(
        tmp_path_factory.mktemp("schemas-pulsar"),
        local=a,
        remotes=[b],
        policies={NAMESPACE: [b.name]},
        kind="pulsar",
    )
    gateway.start()
    try:
        publish(a.service_url, topic, V1, range(0, 40))
        publish(a.service_url, topic, V2, range(40, 80))
        publish(a.service_url, topic, V1, range(80, 100))
        decoded = read_by_version(b, topic, 100)  # waits for each message
    finally:
        gateway.kill()
    on_b = history(b, topic)
    assert json.loads(on_b[0]) == V2.schema()
    assert [record["a"] for _, record in decoded] == list(range(100))  # 0 lost, 0 twice
    for version, record in decoded:
        expected = V2.schema() if 40 <= record["a"] < 80 else V1.schema()
        assert json.loads(on_b[version]) == expected
