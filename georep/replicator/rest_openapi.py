"""The OpenAPI 3.1 document of the gateway's REST admin, built from ``rest.ROUTES``.

Like the cluster admin's (``broker/admin/openapi.py``), by hand from the one route table:
each route's method, path, role and schemas are all a document needs. Statuses follow
from the route: 401 for non-public routes, 403 and 409 for mutations, 400 where a body or
a name is read, 404 where a policy is looked up, 413 for bodies.
"""

from __future__ import annotations

import re
from typing import Any

from georep import __version__ as georep_version
from georep import limits
from georep.broker.admin.auth import Role
from georep.replicator.rest import ROUTES, Route

OPENAPI_VERSION = "3.1.0"
_PARAMETER = re.compile(r"\{(\w+)\}")
_ENTITY = r"^[-=:.\w]+$"

_PATH_PARAMETERS: dict[str, tuple[str, dict[str, Any]]] = {
    "tenant": ("Tenant name", {"type": "string", "pattern": _ENTITY, "minLength": 1,
                               "maxLength": limits.tenant_name_chars_max}),
    "namespace": ("Namespace name (without the tenant)",
                  {"type": "string", "pattern": _ENTITY, "minLength": 1,
                   "maxLength": limits.namespace_name_chars_max}),
    "topic": ("Topic local name (a partitioned topic's base name, or one partition)",
              {"type": "string", "minLength": 1,
               "maxLength": limits.topic_local_name_chars_max}),
}  # fmt: skip

_CLUSTER_NAMES = {
    "type": "array",
    "items": {"type": "string", "pattern": _ENTITY, "maxLength": limits.cluster_name_chars_max},
    "maxItems": limits.remote_clusters_count_max,
}
_POLICY = {
    "type": "object",
    "required": ["clusters", "version"],
    "properties": {"clusters": _CLUSTER_NAMES, "version": {"type": "integer", "minimum": 1}},
}
_ENDPOINT = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "serviceUrl": {"type": "string"},
        "adminUrl": {"type": "string"},
        "version": {"type": ["integer", "null"]},
    },
}
_NUMBER_OR_NULL = {"type": ["number", "null"]}
_REPLICATOR = {
    "type": "object",
    "properties": {
        "topic": {"type": "string"},
        "localCluster": {"type": "string"},
        "remoteCluster": {"type": "string"},
        "state": {"enum": ["starting", "connecting", "replicating", "backoff", "stopped"]},
        "connected": {"type": "boolean"},
        "replicationBacklog": {"type": ["integer", "null"]},
        "replicationDelayInSeconds": _NUMBER_OR_NULL,
        "msgRateIn": {"type": "number"},
        "msgRateOut": {"type": "number"},
        "msgThroughputIn": {"type": "number"},
        "msgThroughputOut": {"type": "number"},
        "msgOutCounter": {"type": "integer"},
        "duplicatesCounter": {"type": "integer"},
        "lastError": {"type": ["string", "null"]},
    },
    "additionalProperties": True,
}

SCHEMAS: dict[str, dict[str, Any]] = {
    "Error": {"type": "object", "required": ["reason"],
              "properties": {"reason": {"type": "string"}}},
    "Health": {"type": "object", "properties": {"status": {"const": "ok"},
                                                "cluster": {"type": "string"}}},
    "PrometheusText": {"type": "string"},
    "OpenAPIDocument": {"type": "object"},
    "Clusters": {"type": "object",
                 "properties": {"local": _ENDPOINT,
                                "remotes": {"type": "array", "items": _ENDPOINT}}},
    "Policy": _POLICY,
    "PolicyChange": {
        "type": "object",
        "required": ["clusters"],
        "additionalProperties": False,
        "properties": {
            "clusters": _CLUSTER_NAMES,
            "version": {"type": "integer", "minimum": 0,
                        "description": "apply only at this version (0: only if none)"},
        },
    },
    "Policies": {
        "type": "object",
        "properties": {
            "namespaces": {"type": "object", "additionalProperties": _POLICY},
            "topics": {"type": "object", "additionalProperties": _POLICY},
        },
    },
    "Stats": {
        "type": "object",
        "properties": {
            "localCluster": {"type": "string"},
            "replicators": {"type": "array", "items": _REPLICATOR},
            "discovery": {"type": "object"},
            "subscriptionSync": {
                "type": "object",
                "description": "Snapshots, caches and synced subscription states per topic",
            },
        },
    },
}  # fmt: skip

_REASONS = {
    400: "Bad input: a name, the body, or an unknown cluster",
    401: "No valid bearer token",
    403: "A read-only token asked for a change",
    404: "No such policy",
    409: "The policy is not at the version given",
    413: f"Body larger than {limits.gateway_request_body_bytes_max} bytes",
}


def _error(status: int) -> dict[str, Any]:
    return {
        "description": _REASONS[status],
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    }


def _operation(route: Route) -> dict[str, Any]:
    operation: dict[str, Any] = {
        "operationId": route.operation_id,
        "summary": route.summary,
        "parameters": [
            {
                "name": name,
                "in": "path",
                "required": True,
                "description": _PATH_PARAMETERS[name][0],
                "schema": _PATH_PARAMETERS[name][1],
            }
            for name in _PARAMETER.findall(route.path)
        ],
    }
    if route.method == "DELETE":
        operation["parameters"].append(
            {"name": "version", "in": "query", "required": False,
             "description": "delete only at this version",
             "schema": {"type": "integer", "minimum": 1}}
        )  # fmt: skip
    if route.request is not None:
        operation["requestBody"] = {
            "required": True,
            "content": {
                "application/json": {"schema": {"$ref": f"#/components/schemas/{route.request}"}}
            },
        }
    responses: dict[str, Any] = {}
    if route.response is None:
        responses["204"] = {"description": "Done"}
    else:
        responses["200"] = {
            "description": "OK",
            "content": {
                route.response_media_type: {
                    "schema": {"$ref": f"#/components/schemas/{route.response}"}
                }
            },
        }
    statuses: set[int] = set()
    if route.role is not Role.PUBLIC:
        statuses.add(401)
    if "{" in route.path:
        statuses.add(400)
    if route.role is Role.ADMIN:
        statuses |= {403, 409}
    if route.request is not None:
        statuses |= {400, 413}
    if "replication" in route.path:
        statuses.add(404)
    for status in sorted(statuses):
        responses[str(status)] = _error(status)
    operation["responses"] = responses
    if route.role is not Role.PUBLIC:
        operation["security"] = [{"bearer": []}]
    return operation


def document() -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    for route in ROUTES:
        paths.setdefault(route.path, {})[route.method.lower()] = _operation(route)
    return {
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": "georep gateway admin",
            "version": georep_version,
            "description": "Replication policies, clusters and replicator stats of one gateway",
        },
        "paths": paths,
        "components": {
            "schemas": SCHEMAS,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }
