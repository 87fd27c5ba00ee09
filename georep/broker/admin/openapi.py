"""The OpenAPI 3.1 document of the admin REST, built by hand from the route table.

No library: the route table already holds everything a document needs (paths, methods,
roles, body and answer schemas), and building the dict here keeps one source of truth
with no decorators or docstring parsing to keep in step. ``openapi-spec-validator``
checks the result in the tests.

Statuses documented per operation follow from the route: 401 for every non-public route,
403 and 409 for mutations, 404 where the path names a tenant, namespace, topic or
subscription, 413/415 where a body is read, 503 where the store or the cluster is asked.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from georep import __version__ as georep_version
from georep import limits
from georep.broker.admin import schemas
from georep.broker.admin.auth import Role
from georep.broker.admin.routes import Route

OPENAPI_VERSION = "3.1.0"
_PARAMETER = re.compile(r"\{(\w+)\}")

PATH_PARAMETERS: dict[str, tuple[str, dict[str, Any]]] = {
    "tenant": (
        "Tenant name",
        {
            "type": "string",
            "pattern": schemas.ENTITY_PATTERN,
            "minLength": 1,
            "maxLength": limits.tenant_name_chars_max,
        },
    ),
    "namespace": (
        "Namespace name (without the tenant)",
        {
            "type": "string",
            "pattern": schemas.ENTITY_PATTERN,
            "minLength": 1,
            "maxLength": limits.namespace_name_chars_max,
        },
    ),
    "topic": (
        "Topic local name; a partition is '<topic>-partition-<N>'",
        {"type": "string", "minLength": 1, "maxLength": limits.topic_local_name_chars_max},
    ),
    "subscription": (
        "Subscription name",
        {"type": "string", "minLength": 1, "maxLength": limits.subscription_name_chars_max},
    ),
    "timestamp": (
        "Publish time, milliseconds since the epoch",
        {"type": "integer", "minimum": 0},
    ),
    "numMessages": ("Messages to skip", {"type": "integer", "minimum": 1}),
}

_STATUS_TEXT = {
    400: "Bad input: a name, a body or a path number is invalid",
    401: "No valid bearer token",
    403: "The token's role may not do this (a read-only token on a mutation)",
    404: "The tenant, namespace, topic or subscription does not exist",
    409: "Already exists, not empty, busy, or changed concurrently",
    413: "The request body is too large",
    415: "The request body is not application/json",
    503: "The metadata store or the cluster is unavailable; retry",
}
_NAMED_PARAMETERS = {"tenant", "namespace", "topic", "subscription"}


def path_parameters(path: str) -> list[str]:
    return _PARAMETER.findall(path)


def build(routes: Iterable[Route]) -> dict[str, Any]:
    routes = tuple(routes)
    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
        paths.setdefault(route.path, {})[route.method.lower()] = _operation(route)
    return {
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": "georep cluster admin",
            "version": georep_version,
            "description": (
                "Admin REST of georep's embedded cluster, following Pulsar's admin v2 paths"
                " and JSON names. When tokens are configured, GETs need a read-only or admin"
                ' bearer token and mutations an admin token; errors are {"reason": ...}.'
                " Paths under /admin/georep/v1 have no Pulsar equivalent."
            ),
        },
        "paths": paths,
        "components": {
            "schemas": schemas.component_schemas(),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
        "tags": [{"name": name} for name in dict.fromkeys(route.tag for route in routes)],
    }


def _operation(route: Route) -> dict[str, Any]:
    operation: dict[str, Any] = {
        "operationId": route.operation_id,
        "summary": route.summary,
        "tags": [route.tag],
    }
    names = path_parameters(route.path)
    if names:
        operation["parameters"] = [
            {
                "name": name,
                "in": "path",
                "required": True,
                "description": PATH_PARAMETERS[name][0],
                "schema": PATH_PARAMETERS[name][1],
            }
            for name in names
        ]
    if route.request is not None:
        operation["requestBody"] = {
            "required": route.request_required,
            "content": {"application/json": {"schema": schemas.ref(route.request)}},
        }
    responses: dict[str, Any] = {}
    if route.response is None:
        responses["204"] = {"description": "Done"}
    else:
        responses["200"] = {
            "description": "OK",
            "content": {route.response_media_type: {"schema": schemas.ref(route.response)}},
        }
    for status in _error_statuses(route, names):
        responses[str(status)] = {
            "description": _STATUS_TEXT[status],
            "content": {"application/json": {"schema": schemas.ref("Error")}},
        }
    operation["responses"] = responses
    if route.role is Role.PUBLIC:
        operation["security"] = []
    return operation


def _error_statuses(route: Route, names: list[str]) -> list[int]:
    statuses = set()
    if route.path.endswith("/health"):
        statuses.add(503)
    if route.role is Role.PUBLIC:
        return sorted(statuses)
    statuses |= {401, 503}
    if names:
        statuses.add(400)
    if _NAMED_PARAMETERS & set(names):
        statuses.add(404)
    if route.role is Role.ADMIN:
        statuses |= {403, 409}
    if route.request is not None:
        statuses |= {400, 413, 415}
    return sorted(statuses)
