"""Schemas replicated with their messages: two ``georep cluster`` processes and a gateway
A→B. A schema'd topic whose schema changes (compatibly) mid-stream reaches B with every
message stamped with B's version of its schema, so a consumer that resolves schemas by
version decodes each one; and a remote that refuses a schema stops the topic's
replication loudly, losing nothing, until the remote accepts it."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import fastavro
import pulsar
import pytest
from pulsar.schema import AvroSchema, Integer, Record, String

from tests.harness.broker_cluster import open_client
from tests.harness.gateway import World, admin_url, endpoint_urls, http, payloads_on
from tests.harness.waiting import wait_for

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]

EVOLVING = "geo/schemas"
STRICT = "geo/strict"


def _reading_v1() -> type[Record]:
    class Reading(Record):
        a = Integer()

    return Reading


def _reading_v2() -> type[Record]:
    class Reading(Record):
        a = Integer()
        b = String(required_default=True)

    return Reading


V1 = _reading_v1()
V2 = _reading_v2()


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Iterator[World]:
    running = World(tmp_path_factory.mktemp("schemas"), names=("A", "B"))
    policies = {EVOLVING: ["B"], STRICT: ["B"]}
    remotes = [running.clusters["B"]]
    running.start([EVOLVING, STRICT], {"A": {"remotes": remotes, "policies": policies}})
    yield running
    running.stop()


def schemas_url(cluster, topic: str) -> str:
    """The admin v2 schemas path of ``topic`` on a georep cluster or a Pulsar standalone."""
    admin = endpoint_urls(cluster)[1]
    return f"{admin}/admin/v2/schemas/{topic.removeprefix('persistent://')}"


def history(cluster, topic: str) -> dict[int, str]:
    """version -> schema data of the topic's schemas on ``cluster``."""
    status, document = http("GET", f"{schemas_url(cluster, topic)}/schemas")
    assert status == 200, document
    return {entry["version"]: entry["data"] for entry in document["getSchemaResponses"]}


def publish(url: str, topic: str, schema_class: type[Record], values: range) -> None:
    with open_client(url) as client:
        producer = client.create_producer(topic, schema=AvroSchema(schema_class))
        for value in values:
            fields = {"a": value} if schema_class is V1 else {"a": value, "b": f"b{value}"}
            producer.send_async(schema_class(**fields), None)
        producer.flush()


def read_by_version(cluster, topic: str, count: int) -> list[tuple[int, Any]]:
    """(schema version, record decoded with that version's schema) of the topic's first
    ``count`` messages on ``cluster``: a consumer that resolves schemas by version."""
    written = []
    with open_client(endpoint_urls(cluster)[0]) as client:
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        for _ in range(count):
            message = reader.read_next(timeout_millis=60_000)
            raw = message.schema_version()
            version = int.from_bytes(raw.encode("latin-1") if isinstance(raw, str) else raw, "big")
            written.append((version, message.data()))
        with pytest.raises(pulsar.Timeout):
            reader.read_next(timeout_millis=1_500)  # nothing twice
    schemas = history(cluster, topic)
    return [
        (version, fastavro.schemaless_reader(io.BytesIO(data), json.loads(schemas[version]), None))
        for version, data in written
    ]


def message_count(cluster, topic: str) -> int:
    return sum(payloads_on(cluster.url, topic, quiet_ms=200).values())


def test_every_message_on_b_decodes_by_its_version(world: World) -> None:
    a, b = world.clusters["A"], world.clusters["B"]
    topic = f"persistent://{EVOLVING}/readings"
    # B numbers the schemas its own way: A's v1 is B's v0, so a copy stamped with A's
    # version would name the wrong schema on B.
    payload = {"type": "AVRO", "schema": json.dumps(V2.schema()), "properties": {}}
    assert http("POST", f"{schemas_url(b, topic)}/schema", payload)[0] == 200
    publish(a.url, topic, V1, range(0, 40))
    publish(a.url, topic, V2, range(40, 80))  # a compatible change mid-stream: A's v1
    publish(a.url, topic, V1, range(80, 100))  # the first schema again: A's v0
    wait_for(lambda: message_count(b, topic) >= 100, timeout_s=120, interval_s=1)
    on_a, on_b = history(a, topic), history(b, topic)
    assert {json.dumps(json.loads(data)) for data in on_a.values()} == {
        json.dumps(json.loads(data)) for data in on_b.values()
    }
    assert json.loads(on_b[0]) == V2.schema() and json.loads(on_a[0]) == V1.schema()
    decoded = read_by_version(b, topic, 100)
    assert [record["a"] for _, record in decoded] == list(range(100))  # 0 lost, 0 twice
    for version, record in decoded:
        expected = V2.schema() if 40 <= record["a"] < 80 else V1.schema()
        assert json.loads(on_b[version]) == expected
        assert record.get("b") == (f"b{record['a']}" if 40 <= record["a"] < 80 else None)


def test_a_refused_schema_stops_the_topic_loudly_then_resumes(world: World) -> None:
    a, b, gateway = world.clusters["A"], world.clusters["B"], world.gateways["A"]
    topic = f"persistent://{STRICT}/refused"
    clashing = {"type": "record", "name": "Reading", "fields": [{"name": "a", "type": "string"}]}
    payload = {"type": "AVRO", "schema": json.dumps(clashing), "properties": {}}
    status, answer = http("POST", f"{schemas_url(b, topic)}/schema", payload)
    assert status == 200, answer  # B's v0: A's schema cannot follow it under FULL
    publish(a.url, topic, V1, range(10))

    def refused() -> list[str]:
        health = gateway.get("/health")
        return [p for p in health["problems"] if "refused a schema" in p]

    problems = wait_for(refused, timeout_s=60)
    assert "IncompatibleSchema" in problems[0]
    (stats,) = gateway.replicators(topic)
    assert stats["schemaRefused"] is not None
    assert message_count(b, topic) == 0  # nothing sent under another version
    _, metrics = http("GET", f"{gateway.url}/metrics")
    namespace = topic.split("://", 1)[1].rsplit("/", 1)[0]  # per namespace by default
    labels = f'local_cluster="A",namespace="{namespace}",remote_cluster="B"'
    refused_line = f"georep_replication_schema_refused{{{labels}}} 1.0"
    assert refused_line in metrics
    strategy = f"{admin_url(b)}/admin/v2/namespaces/{STRICT}/schemaCompatibilityStrategy"
    assert http("POST", strategy, "ALWAYS_COMPATIBLE")[0] == 204
    wait_for(lambda: message_count(b, topic) >= 10, timeout_s=90, interval_s=1)
    assert [record["a"] for _, record in read_by_version(b, topic, 10)] == list(range(10))
    wait_for(lambda: not refused(), timeout_s=30)
    assert json.loads(history(b, topic)[1]) == V1.schema()
