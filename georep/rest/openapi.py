"""The OpenAPI 3.1 document of a REST server, built by hand from its route table.

No library: the route table already holds everything a document needs (paths, methods,
roles, body and answer schemas), and building the dict here keeps one source of truth
with no decorators or docstring parsing to keep in step. ``openapi-spec-validator``
checks each server's document in the tests.

Statuses every route may answer follow from this toolkit: 403 (a foreign Host or
Origin, or a read-only token on a mutation), 401 on every non-public route, 415 on every
POST and wherever a body is read, 413 wherever a body is read. A server adds its own
(404, 409, 503) with ``more_statuses``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from georep import __version__ as georep_version
from georep.rest.auth import Role
from georep.rest.routes import Route

OPENAPI_VERSION = "3.1.0"
_PARAMETER = re.compile(r"\{(\w+)\}")

STATUS_TEXT = {
    400: "Bad input: a name, a body or a path number is invalid",
    401: "No valid bearer token",
    403: "Refused: a read-only token on a mutation, or a foreign Host or Origin",
    413: "The request body is too large",
    415: "The request is not application/json (every POST must say so)",
}


def path_parameters(path: str) -> list[str]:
    return _PARAMETER.findall(path)


def build(
    routes: Iterable[Route],
    *,
    title: str,
    description: str,
    schemas: Mapping[str, Any],
    parameters: Mapping[str, tuple[str, Mapping[str, Any]]],
    status_text: Mapping[int, str],
    more_statuses: Callable[[Route], Iterable[int]],
) -> dict[str, Any]:
    """The document of ``routes``: ``parameters`` describes each path parameter by
    name, ``status_text`` the statuses the server adds with ``more_statuses``."""
    routes = tuple(routes)
    texts = {**STATUS_TEXT, **status_text}
    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
        operation = _operation(route, parameters)
        statuses = sorted(set(_statuses(route)) | set(more_statuses(route)))
        for status in statuses:
            operation["responses"][str(status)] = {
                "description": texts[status],
                "content": {"application/json": {"schema": _ref("Error")}},
            }
        paths.setdefault(route.path, {})[route.method.lower()] = operation
    return {
        "openapi": OPENAPI_VERSION,
        "info": {"title": title, "version": georep_version, "description": description},
        "paths": paths,
        "components": {
            "schemas": dict(schemas),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
        "tags": [{"name": name} for name in dict.fromkeys(route.tag for route in routes)],
    }


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _operation(
    route: Route, parameters: Mapping[str, tuple[str, Mapping[str, Any]]]
) -> dict[str, Any]:
    operation: dict[str, Any] = {
        "operationId": route.operation_id,
        "summary": route.summary,
        "tags": [route.tag],
    }
    listed = [
        {
            "name": name,
            "in": "path",
            "required": True,
            "description": parameters[name][0],
            "schema": dict(parameters[name][1]),
        }
        for name in path_parameters(route.path)
    ]
    listed += [
        {
            "name": query.name,
            "in": "query",
            "required": False,
            "description": query.description,
            "schema": dict(query.schema),
        }
        for query in route.query
    ]
    if listed:
        operation["parameters"] = listed
    if route.request is not None:
        operation["requestBody"] = {
            "required": route.request_required,
            "content": {"application/json": {"schema": _ref(route.request)}},
        }
    responses: dict[str, Any] = {}
    if route.response is None:
        responses["204"] = {"description": "Done"}
    else:
        responses["200"] = {
            "description": "OK",
            "content": {route.response_media_type: {"schema": _ref(route.response)}},
        }
    operation["responses"] = responses
    if route.role is Role.PUBLIC:
        operation["security"] = []
    return operation


def _statuses(route: Route) -> set[int]:
    statuses = {403}
    if route.role is not Role.PUBLIC:
        statuses.add(401)
    if route.method == "POST":
        statuses.add(415)
    if route.request is not None:
        statuses |= {400, 413, 415}
    return statuses
