"""JSON Schemas of the admin REST's bodies, for the OpenAPI document.

Request schemas are written out here and mirror the parsers in ``bodies.py`` (a test sends
schema-valid bodies generated from them and expects no 400 for their shape). Response
schemas of documents the cluster returns are derived from the TypedDicts in
``cluster_admin.py``, so the promise and its documentation cannot drift apart.
"""

from __future__ import annotations

import types
import typing
from typing import Any, get_args, get_origin, get_type_hints, is_typeddict

from georep import limits
from georep.broker.admin import cluster_admin, schema_admin, shapes
from georep.domain.position import ID_MAX

Schema = dict[str, Any]

_I64_MAX = ID_MAX  # the wire protocol's int64 ids
# JSON Schema's \w is ASCII, like the broker's rule.
ENTITY_PATTERN = r"^[-=:.\w]+$"


def ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def _int(minimum: int, maximum: int) -> Schema:
    return {"type": "integer", "minimum": minimum, "maximum": maximum}


_ROLE = {"type": "string", "minLength": 1, "maxLength": limits.role_name_chars_max}
_CLUSTER = {
    "type": "string",
    "pattern": ENTITY_PATTERN,
    "minLength": 1,
    "maxLength": limits.cluster_name_chars_max,
}

_SYNC_POSITION = {
    "type": "object",
    "properties": {"ledgerId": _int(0, _I64_MAX), "entryId": _int(0, _I64_MAX)},
    "required": ["ledgerId", "entryId"],
    "additionalProperties": False,
}

REQUEST_SCHEMAS: dict[str, Schema] = {
    "TenantInfo": {
        "type": "object",
        "properties": {
            "adminRoles": {
                "type": "array",
                "items": _ROLE,
                "maxItems": limits.tenant_admin_roles_count_max,
            },
            "allowedClusters": {
                "type": "array",
                "items": _CLUSTER,
                "maxItems": limits.tenant_allowed_clusters_count_max,
            },
        },
        "additionalProperties": False,
    },
    "RetentionPolicies": {
        "type": "object",
        "properties": {
            "retentionTimeInMinutes": _int(-1, limits.retention_minutes_max),
            "retentionSizeInMB": _int(-1, limits.retention_size_mb_max),
        },
        "required": ["retentionTimeInMinutes", "retentionSizeInMB"],
        "additionalProperties": False,
    },
    "MessageTTL": {**_int(0, limits.message_ttl_s_max), "description": "seconds; 0 = none"},
    "Policies": {
        "type": "object",
        "description": "The namespace policies georep keeps; other Pulsar policies are refused.",
        "properties": {
            "retention_policies": {"anyOf": [ref("RetentionPolicies"), {"type": "null"}]},
            "message_ttl_in_seconds": {"anyOf": [ref("MessageTTL"), {"type": "null"}]},
        },
        "additionalProperties": False,
    },
    "Partitions": {**_int(1, limits.partitions_count_max), "description": "number of partitions"},
    "ResetCursorData": {
        "type": "object",
        "description": (
            "A message id. -1:-1 is the earliest position and"
            f" {_I64_MAX}:{_I64_MAX} the latest. partitionIndex, batchIndex and"
            " properties are accepted and unused; excluded may only be false."
        ),
        "properties": {
            "ledgerId": _int(-1, _I64_MAX),
            "entryId": _int(-1, _I64_MAX),
            "partitionIndex": _int(-1, limits.partitions_count_max - 1),
            "batchIndex": _int(-1, limits.pulsar_batch_messages_count_max),
            "excluded": {"type": "boolean", "const": False},
            "properties": {"type": "object"},
        },
        "required": ["ledgerId", "entryId"],
        "additionalProperties": False,
    },
    "AcknowledgeRequest": {
        "type": "object",
        "properties": {
            "positions": {
                "type": "array",
                "minItems": 1,
                "maxItems": limits.acknowledge_positions_count_max,
                "items": {
                    "type": "object",
                    "properties": {
                        "ledgerId": _int(0, _I64_MAX),
                        "entryId": _int(0, _I64_MAX),
                    },
                    "required": ["ledgerId", "entryId"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["positions"],
        "additionalProperties": False,
    },
    "SubscriptionSyncRequest": {
        "type": "object",
        "description": (
            "Every field optional (null = absent). markDelete moves the mark-delete position"
            " forward only (its entryId may be -1); each range is closed and may span ledgers"
            " (last not before first); ackedIndexes must lie within the batch's size."
            " Positions past the last entry are ignored."
        ),
        "properties": {
            "markDelete": {
                "anyOf": [
                    {
                        **_SYNC_POSITION,
                        "properties": {
                            "ledgerId": _int(0, _I64_MAX),
                            "entryId": _int(-1, _I64_MAX),
                        },
                    },
                    {"type": "null"},
                ]
            },
            "ranges": {
                "anyOf": [
                    {
                        "type": "array",
                        "maxItems": limits.subscription_sync_ranges_count_max,
                        "items": {
                            "type": "object",
                            "properties": {"first": _SYNC_POSITION, "last": _SYNC_POSITION},
                            "required": ["first", "last"],
                            "additionalProperties": False,
                        },
                    },
                    {"type": "null"},
                ]
            },
            "batches": {
                "anyOf": [
                    {
                        "type": "array",
                        "maxItems": limits.subscription_sync_batches_count_max,
                        "items": {
                            "type": "object",
                            "properties": {
                                "ledgerId": _int(0, _I64_MAX),
                                "entryId": _int(0, _I64_MAX),
                                "ackedIndexes": {
                                    "type": "array",
                                    "maxItems": limits.pulsar_batch_messages_count_max,
                                    "items": _int(0, limits.pulsar_batch_messages_count_max - 1),
                                },
                            },
                            "required": ["ledgerId", "entryId", "ackedIndexes"],
                            "additionalProperties": False,
                        },
                    },
                    {"type": "null"},
                ]
            },
            "replicated": {"type": ["boolean", "null"]},
        },
        "additionalProperties": False,
    },
}

RESPONSE_SCHEMAS: dict[str, Schema] = {
    "Error": {
        "type": "object",
        "properties": {"reason": {"type": "string"}},
        "required": ["reason"],
    },
    "Names": {"type": "array", "items": {"type": "string"}},
    "NamespacePolicies": {
        "type": "object",
        "properties": {
            "retention_policies": {"anyOf": [ref("RetentionPolicies"), {"type": "null"}]},
            "message_ttl_in_seconds": {"type": ["integer", "null"]},
        },
        "required": ["retention_policies", "message_ttl_in_seconds"],
    },
    "RetentionPoliciesOrNull": {"anyOf": [ref("RetentionPolicies"), {"type": "null"}]},
    "MessageTTLOrNull": {"type": ["integer", "null"]},
    "PartitionedTopicMetadata": {
        "type": "object",
        "properties": {"partitions": {"type": "integer", "minimum": 0}},
        "required": ["partitions"],
    },
    "PrometheusText": {"type": "string"},
    "OpenAPIDocument": {"type": "object"},
    "Health": {
        "type": "object",
        "properties": {"status": {"type": "string"}, "cluster": {"type": "string"}},
        "required": ["status", "cluster"],
    },
}


def typeddict_schemas(*roots: Any) -> dict[str, Schema]:
    """Component schemas for ``roots`` and every TypedDict they refer to, by name."""
    found: dict[str, Schema] = {}
    for root in roots:
        _schema_of(root, found)
    return found


def _schema_of(shape: Any, found: dict[str, Schema]) -> Schema:
    if is_typeddict(shape):
        name = shape.__name__
        if name not in found:
            found[name] = {}  # placeholder against recursion
            hints = get_type_hints(shape, include_extras=True)
            found[name] = {
                "type": "object",
                "properties": {key: _schema_of(hint, found) for key, hint in hints.items()},
                "required": sorted(shapes.required_keys(shape)),
            }
        return ref(name)
    origin = get_origin(shape)
    if origin is typing.NotRequired:
        return _schema_of(get_args(shape)[0], found)
    if origin is list:
        return {"type": "array", "items": _schema_of(get_args(shape)[0], found)}
    if origin is dict:
        return {"type": "object", "additionalProperties": _schema_of(get_args(shape)[1], found)}
    if origin in (typing.Union, types.UnionType):
        return {"anyOf": [_schema_of(option, found) for option in get_args(shape)]}
    simple = {int: "integer", float: "number", str: "string", bool: "boolean"}
    if shape in simple:
        return {"type": simple[shape]}
    if shape is type(None):
        return {"type": "null"}
    if shape is object:
        return {}
    raise TypeError(f"no JSON schema for {shape!r}")  # a new shape needs a case here


def component_schemas() -> dict[str, Schema]:
    return {
        **REQUEST_SCHEMAS,
        **RESPONSE_SCHEMAS,
        **schema_admin.OPENAPI_SCHEMAS,
        **typeddict_schemas(
            cluster_admin.TopicStats,
            cluster_admin.PersistentTopicInternalStats,
            cluster_admin.MessageIdDocument,
            cluster_admin.SyncState,
            cluster_admin.SyncChanges,
            cluster_admin.SubscriptionSyncResult,
        ),
    }
