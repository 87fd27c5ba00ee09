"""Handlers for topics' schemas and namespaces' schema compatibility strategy, on Pulsar's
admin v2 paths and JSON (``/admin/v2/schemas/{tenant}/{namespace}/{topic}/...``), over
the broker's registry (``broker/schema_registry.py``), which reads and writes the
metadata store the broker uses: a schema posted here is the one a producer gets checked
against, and a version a producer was given is listed here.

A schema document is Pulsar's ``GetSchemaResponse``: ``{"version": 1, "type": "AVRO",
"timestamp": 1732780000000, "data": "<the Avro definition>", "properties": {}}``.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from georep import limits
from georep.broker.admin import bodies, names
from georep.broker.admin.cluster_admin import InvalidArgument, NotFound
from georep.broker.admin.state import CATALOG, SCHEMAS
from georep.broker.meta.schemas import SchemaRecord
from georep.broker.schema_compatibility import IncompatibleSchema
from georep.domain.topic_name import TopicName
from georep.rest.json_io import json_response, read_json
from georep.wire import pulsar_wire_pb2 as pb

#: Types a schema may be posted with (the protocol's, less what only a client names).
_POSTABLE_TYPES = frozenset(pb.Schema.Type.keys()) - {"NONE", "AUTO_CONSUME", "EXTERNAL"}

OPENAPI_SCHEMAS: dict[str, Any] = {
    "PostSchemaPayload": {
        "type": "object",
        "properties": {
            "type": {"type": "string", "enum": sorted(_POSTABLE_TYPES)},
            "schema": {"type": "string", "maxLength": limits.schema_data_bytes_max},
            "properties": {
                "type": "object",
                "maxProperties": limits.schema_properties_count_max,
                "additionalProperties": {"type": "string"},
            },
        },
        "required": ["type", "schema"],
        "additionalProperties": False,
    },
    "SchemaCompatibilityStrategy": {
        "type": "string",
        "description": "UNDEFINED (Pulsar's default, FULL, applies) or a strategy",
    },
    "GetSchemaResponse": {
        "type": "object",
        "properties": {
            "version": {"type": "integer", "minimum": 0},
            "type": {"type": "string"},
            "timestamp": {"type": "integer"},
            "data": {"type": "string"},
            "properties": {"type": "object", "additionalProperties": {"type": "string"}},
        },
        "required": ["version", "type", "timestamp", "data", "properties"],
    },
    "GetAllVersionsSchemaResponse": {
        "type": "object",
        "properties": {
            "getSchemaResponses": {
                "type": "array",
                "items": {"$ref": "#/components/schemas/GetSchemaResponse"},
            }
        },
        "required": ["getSchemaResponses"],
    },
    "PostSchemaResponse": {
        "type": "object",
        "properties": {"version": {"$ref": "#/components/schemas/LongSchemaVersion"}},
        "required": ["version"],
    },
    "LongSchemaVersion": {
        "type": "object",
        "properties": {"version": {"type": "integer"}},
        "required": ["version"],
    },
    "DeleteSchemaResponse": {
        "type": "object",
        "properties": {"version": {"type": "integer"}},
        "required": ["version"],
    },
    "IsCompatibilityResponse": {
        "type": "object",
        "properties": {
            "isCompatibility": {"type": "boolean"},
            "schemaCompatibilityStrategy": {"type": "string"},
        },
        "required": ["isCompatibility", "schemaCompatibilityStrategy"],
    },
}


async def get_schema(request: web.Request) -> web.Response:
    """The latest version (404 when the topic has no schema)."""
    topic = await _topic(request)
    return json_response(_document(await _found(request, topic, None)))


async def get_schema_version(request: web.Request) -> web.Response:
    topic = await _topic(request)
    version = bodies.path_integer(
        "version", request.match_info["version"], 0, limits.schema_versions_per_topic_max
    )
    return json_response(_document(await _found(request, topic, version)))


async def get_all_schemas(request: web.Request) -> web.Response:
    """Every version since the last deletion, oldest first (an empty list: no schema)."""
    topic = await _topic(request)
    history = await request.app[SCHEMAS].history(topic)
    return json_response({"getSchemaResponses": [_document(record) for record in history]})


async def post_schema(request: web.Request) -> web.Response:
    """Register a schema as a producer would: the version of an equal one, or a new version
    if the namespace's strategy accepts it (409 otherwise, touching nothing)."""
    topic = await _topic(request)
    schema_type, data, properties = _payload(await read_json(request, required=True))
    try:
        record = await request.app[SCHEMAS].register(topic, schema_type, data, properties)
    except IncompatibleSchema as error:
        raise _Incompatible(str(error)) from error
    return json_response({"version": {"version": record.version}})


async def delete_schema(request: web.Request) -> web.Response:
    topic = await _topic(request)
    version = await request.app[SCHEMAS].delete(topic)
    if version is None:
        raise NotFound(f"{topic} has no schema")
    return json_response({"version": version})


async def test_compatibility(request: web.Request) -> web.Response:
    topic = await _topic(request)
    schema_type, data, _properties = _payload(await read_json(request, required=True))
    registry = request.app[SCHEMAS]
    try:
        strategy = (await registry.compatible(topic, schema_type, data)).value
        compatible = True
    except IncompatibleSchema:
        strategy, compatible = (await registry.strategy(topic.namespace)).value, False
    return json_response({"isCompatibility": compatible, "schemaCompatibilityStrategy": strategy})


async def get_version_by_schema(request: web.Request) -> web.Response:
    """The version of an equal schema in the history (404 when none is)."""
    topic = await _topic(request)
    schema_type, data, _properties = _payload(await read_json(request, required=True))
    for record in await request.app[SCHEMAS].history(topic):
        if record.same_schema(schema_type, data):
            return json_response({"version": record.version})
    raise NotFound(f"{topic} has no such schema")


async def get_strategy(request: web.Request) -> web.Response:
    namespace = await _namespace(request)
    return json_response(await request.app[SCHEMAS].strategy_name(namespace))


async def set_strategy(request: web.Request) -> web.Response:
    namespace = await _namespace(request)
    name = await read_json(request, required=True)
    if not isinstance(name, str):
        raise InvalidArgument("the body must be a strategy's name as a JSON string")
    try:
        await request.app[SCHEMAS].set_strategy(namespace, name)
    except ValueError as error:
        raise InvalidArgument(str(error)) from error
    return web.Response(status=204)


async def post_strategy(request: web.Request) -> web.Response:
    """``set_strategy`` under POST as well as Pulsar's PUT."""
    return await set_strategy(request)


# --- plumbing ---------------------------------------------------------------------------
class _Incompatible(InvalidArgument):
    """Pulsar answers an incompatible schema 409."""

    status = 409


async def _namespace(request: web.Request) -> str:
    tenant, namespace = request.match_info["tenant"], request.match_info["namespace"]
    full = names.namespace(tenant, namespace)
    if await request.app[CATALOG].get_namespace(tenant, namespace) is None:
        raise NotFound(f"namespace {full} does not exist")
    return full


async def _topic(request: web.Request) -> TopicName:
    await _namespace(request)
    return names.topic(
        request.match_info["tenant"], request.match_info["namespace"], request.match_info["topic"]
    )


async def _found(request: web.Request, topic: TopicName, version: int | None) -> SchemaRecord:
    record = await request.app[SCHEMAS].get(topic, version)
    if record is None:
        which = "no schema" if version is None else f"no schema version {version}"
        raise NotFound(f"{topic} has {which}")
    return record


def _document(record: SchemaRecord) -> dict[str, Any]:
    return {
        "version": record.version,
        "type": record.schema_type,
        "timestamp": int(record.created_at * 1000),
        "data": record.data.decode("utf-8", errors="replace"),
        "properties": dict(record.properties),
    }


def _payload(document: Any) -> tuple[str, bytes, dict[str, str]]:
    """(type, data, properties) of a PostSchemaPayload; 400 for anything else."""
    if not isinstance(document, dict):
        raise InvalidArgument("the body must be a PostSchemaPayload JSON object")
    unknown = sorted(set(document) - {"type", "schema", "properties"})
    if unknown:
        raise InvalidArgument(
            f"unknown fields {', '.join(unknown)}; known: type, schema, properties"
        )
    schema_type, data = document.get("type"), document.get("schema")
    properties = document.get("properties") or {}
    if schema_type not in _POSTABLE_TYPES:
        raise InvalidArgument(f"type must be one of {', '.join(sorted(_POSTABLE_TYPES))}")
    if not isinstance(data, str):
        raise InvalidArgument("schema must be a string (an Avro definition for AVRO and JSON)")
    encoded = data.encode()
    if len(encoded) > limits.schema_data_bytes_max:
        raise InvalidArgument(f"schema has more than {limits.schema_data_bytes_max} bytes")
    if not (
        isinstance(properties, dict)
        and len(properties) <= limits.schema_properties_count_max
        and all(
            isinstance(key, str)
            and isinstance(value, str)
            and len(key) <= limits.schema_property_chars_max
            and len(value) <= limits.schema_property_chars_max
            for key, value in properties.items()
        )
    ):
        raise InvalidArgument(
            f"properties must map at most {limits.schema_properties_count_max} strings of at"
            f" most {limits.schema_property_chars_max} characters to such strings"
        )
    return str(schema_type), encoded, dict(properties)
