"""The embedded broker's schema registry with the official client: a producer's schema is
stored and listed over admin v2, versions increment, the namespace's strategy refuses an
incompatible producer (BACKWARD) and lets it through (ALWAYS_COMPATIBLE), schema-less
producers still publish, and a consumer that resolves each message's schema by its
version (AUTO_CONSUME) decodes every message."""

from __future__ import annotations

import asyncio
import io
import json
import urllib.error
import urllib.request
import uuid
from collections.abc import Awaitable, Iterator
from typing import Any

import _pulsar
import fastavro
import pulsar
import pytest
from pulsar.schema import AvroSchema, Integer, JsonSchema, Record, String

from georep.client.errors import ServerError
from georep.client.link import PulsarLink
from georep.wire import commands, frames
from georep.wire import pulsar_wire_pb2 as pb
from georep.wire.commands import Type
from tests.harness.broker_cluster import InProcessCluster, open_client, receive_all


def _reading_v1() -> type[Record]:
    class Reading(Record):
        a = Integer()

    return Reading


def _reading_v2() -> type[Record]:
    class Reading(Record):
        a = Integer()
        b = String(required_default=True)  # "default": null, so v2 reads v1's data

    return Reading


def _reading_breaking() -> type[Record]:
    class Reading(Record):
        a = Integer()
        c = String(required=True)  # no default: cannot read v1's data

    return Reading


# Three versions of one Avro record (Avro matches records by name).
V1 = _reading_v1()
V2 = _reading_v2()
Breaking = _reading_breaking()


class AutoConsume(pulsar.schema.Schema):
    """The client's AUTO_CONSUME: subscribes naming no schema of its own, payloads
    handed over as bytes (the Python client has no AutoConsume class of its own)."""

    def __init__(self) -> None:
        super().__init__(bytes, _pulsar.SchemaType.AUTO_CONSUME, None, "AUTO_CONSUME")

    def encode(self, data: Any) -> bytes:
        raise NotImplementedError("a consumer's schema")

    def decode(self, data: bytes) -> bytes:
        return data


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[InProcessCluster]:
    running = InProcessCluster(tmp_path_factory.mktemp("schemas") / "cluster", admin_port=0)
    running.start()
    yield running
    running.stop()
    assert running.errors == []


def call(cluster: InProcessCluster, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        cluster.admin_url + path,
        data=data,
        method=method,
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            raw = response.read()
            return response.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as error:
        raw = error.read()
        return error.code, json.loads(raw) if raw else None


def new_namespace(cluster: InProcessCluster, strategy: str | None = None) -> str:
    namespace = f"public/s{uuid.uuid4().hex[:8]}"
    assert call(cluster, "PUT", f"/admin/v2/namespaces/{namespace}")[0] == 204
    if strategy is not None:
        path = f"/admin/v2/namespaces/{namespace}/schemaCompatibilityStrategy"
        assert call(cluster, "POST", path, strategy)[0] == 204
        assert call(cluster, "GET", path) == (200, strategy)
    return namespace


def schemas_path(topic: str) -> str:
    return "/admin/v2/schemas/" + topic.removeprefix("persistent://")


def version_of(message: pulsar.Message) -> int | None:
    raw = message.schema_version()
    raw = raw.encode("latin-1") if isinstance(raw, str) else raw
    return int.from_bytes(raw, "big") if raw else None


def test_versions_are_stored_listed_and_stamped(cluster: InProcessCluster) -> None:
    namespace = new_namespace(cluster)  # Pulsar's default, FULL
    topic = f"persistent://{namespace}/avro"
    path = schemas_path(topic)
    assert call(cluster, "GET", f"{path}/schema")[0] == 404
    with open_client(cluster.url) as client:
        first = client.create_producer(topic, schema=AvroSchema(V1))
        consumer = client.subscribe(topic, "s", schema=AvroSchema(V2))
        first.send(V1(a=1))
        second = client.create_producer(topic, schema=AvroSchema(V2))
        second.send(V2(a=2, b="two"))
        again = client.create_producer(topic, schema=AvroSchema(V1))  # equal: version 0
        again.send(V1(a=3))
        messages = receive_all(consumer, 3)
        versions = [version_of(message) for message in messages]
        values = [(message.value().a, message.value().b) for message in messages]
    assert versions == [0, 1, 0]
    assert values == [(1, None), (2, "two"), (3, None)]
    status, latest = call(cluster, "GET", f"{path}/schema")
    assert status == 200 and latest["version"] == 1 and latest["type"] == "AVRO"
    assert json.loads(latest["data"]) == V2.schema()
    status, listed = call(cluster, "GET", f"{path}/schemas")
    assert status == 200
    assert [entry["version"] for entry in listed["getSchemaResponses"]] == [0, 1]
    assert json.loads(call(cluster, "GET", f"{path}/schema/0")[1]["data"]) == V1.schema()
    assert call(cluster, "GET", f"{path}/schema/7")[0] == 404


def test_incompatible_producer_refused_under_backward(cluster: InProcessCluster) -> None:
    namespace = new_namespace(cluster, "BACKWARD")
    topic = f"persistent://{namespace}/evolving"
    path = schemas_path(topic)
    with open_client(cluster.url) as client:
        client.create_producer(topic, schema=AvroSchema(V1)).send(V1(a=1))
        with pytest.raises(pulsar.IncompatibleSchema):
            client.create_producer(topic, schema=AvroSchema(Breaking))
        payload = {"type": "AVRO", "schema": json.dumps(Breaking.schema()), "properties": {}}
        assert call(cluster, "POST", f"{path}/compatibility", payload) == (
            200,
            {"isCompatibility": False, "schemaCompatibilityStrategy": "BACKWARD"},
        )
        status, refused = call(cluster, "POST", f"{path}/schema", payload)
        assert status == 409 and "cannot read" in refused["reason"]
        assert [
            e["version"] for e in call(cluster, "GET", f"{path}/schemas")[1]["getSchemaResponses"]
        ] == [0]
        call(cluster, "POST", f"/admin/v2/namespaces/{namespace}/schemaCompatibilityStrategy",
             "ALWAYS_COMPATIBLE")  # fmt: skip
        producer = client.create_producer(topic, schema=AvroSchema(Breaking))
        producer.send(Breaking(a=2, c="c"))
    assert call(cluster, "GET", f"{path}/schema")[1]["version"] == 1


def test_json_schema_and_schema_less_producers(cluster: InProcessCluster) -> None:
    namespace = new_namespace(cluster)
    topic = f"persistent://{namespace}/json"
    with open_client(cluster.url) as client:
        consumer = client.subscribe(topic, "s")
        client.create_producer(topic, schema=JsonSchema(V1)).send(V1(a=1))
        client.create_producer(topic).send(b"raw")  # no schema: accepted, no version
        payloads = [message.data() for message in receive_all(consumer, 2)]
    assert json.loads(payloads[0]) == {"a": 1}
    assert payloads[1] == b"raw"
    status, latest = call(cluster, "GET", f"{schemas_path(topic)}/schema")
    assert status == 200 and latest["type"] == "JSON" and latest["version"] == 0


def test_auto_consume_decodes_by_version(cluster: InProcessCluster) -> None:
    namespace = new_namespace(cluster)
    topic = f"persistent://{namespace}/auto"
    path = schemas_path(topic)
    with open_client(cluster.url) as client:
        consumer = client.subscribe(topic, "s", schema=AutoConsume())
        client.create_producer(topic, schema=AvroSchema(V1)).send(V1(a=1))
        client.create_producer(topic, schema=AvroSchema(V2)).send(V2(a=2, b="x"))
        messages = receive_all(consumer, 2)
        written = [(version_of(message), message.data()) for message in messages]
    decoded = []
    for version, data in written:
        writer = json.loads(call(cluster, "GET", f"{path}/schema/{version}")[1]["data"])
        decoded.append(fastavro.schemaless_reader(io.BytesIO(data), writer, None))
    assert decoded == [{"a": 1}, {"a": 2, "b": "x"}]


def test_delete_starts_a_new_history(cluster: InProcessCluster) -> None:
    namespace = new_namespace(cluster, "BACKWARD")
    topic = f"persistent://{namespace}/deleted"
    path = schemas_path(topic)
    with open_client(cluster.url) as client:
        client.create_producer(topic, schema=AvroSchema(V1)).close()
    assert call(cluster, "DELETE", f"{path}/schema") == (200, {"version": 1})
    assert call(cluster, "GET", f"{path}/schema")[0] == 404
    with open_client(cluster.url) as client:
        client.create_producer(topic, schema=AvroSchema(Breaking)).close()  # nothing to check
    assert call(cluster, "GET", f"{path}/schema")[1]["version"] == 2
    assert call(cluster, "GET", f"{path}/schema/0")[0] == 404


def test_bad_input_is_refused(cluster: InProcessCluster) -> None:
    namespace = new_namespace(cluster)
    path = schemas_path(f"persistent://{namespace}/bad")
    strategy = f"/admin/v2/namespaces/{namespace}/schemaCompatibilityStrategy"
    assert call(cluster, "POST", strategy, "SIDEWAYS")[0] == 400
    assert call(cluster, "GET", strategy) == (200, "UNDEFINED")
    status, answer = call(cluster, "POST", f"{path}/schema", {"type": "AVRO", "schema": "{"})
    assert status == 409 and "not a valid Avro schema" in answer["reason"]
    assert call(cluster, "POST", f"{path}/schema", {"type": "NOPE", "schema": "x"})[0] == 400
    assert call(cluster, "GET", f"{path}/schemas") == (200, {"getSchemaResponses": []})
    assert call(cluster, "GET", "/admin/v2/schemas/public/missing/t/schema")[0] == 404


def test_get_schema_and_get_or_create_schema(cluster: InProcessCluster) -> None:
    """What AUTO_PRODUCE_BYTES asks of the broker (GET_SCHEMA: the latest, or a version)
    and what a replicator asks of a remote (GET_OR_CREATE_SCHEMA), over our own link."""
    namespace = new_namespace(cluster)
    topic = f"persistent://{namespace}/commands"
    with open_client(cluster.url) as client:
        client.create_producer(topic, schema=AvroSchema(V1)).close()

    def get_schema(connection, version: bytes | None) -> Awaitable[frames.Frame]:
        request_id = connection.next_request_id()
        fields = {} if version is None else {"schema_version": version}
        command = commands.build(Type.GET_SCHEMA, request_id=request_id, topic=topic, **fields)
        return connection.request(command, request_id)

    async def run() -> tuple:
        link = PulsarLink(cluster.url)
        try:
            connection = await link.lookup(topic)
            latest = (await get_schema(connection, None)).command.get_schema_response
            producer = await link.create_producer(topic, "schema-test")
            v2 = pb.Schema(name=topic, type=pb.Schema.AVRO, data=json.dumps(V2.schema()).encode())
            created = await producer.get_or_create_schema(v2)
            again = await producer.get_or_create_schema(v2)
            bad = pb.Schema(name=topic, type=pb.Schema.STRING, data=b"")
            with pytest.raises(ServerError) as refused:
                await producer.get_or_create_schema(bad)
            missing = await get_schema(connection, (7).to_bytes(8, "big"))
            await producer.close()
            return latest, created, again, refused.value.code, missing.command.get_schema_response
        finally:
            await link.close()

    latest, created, again, refused_code, missing = asyncio.run(run())
    assert latest.schema_version == bytes(8) and latest.schema.type == pb.Schema.AVRO
    assert json.loads(latest.schema.data) == V1.schema()
    assert created == again == (1).to_bytes(8, "big")
    assert refused_code == pb.INCOMPATIBLE_SCHEMA  # another type under FULL
    assert missing.error_code == pb.TOPIC_NOT_FOUND
