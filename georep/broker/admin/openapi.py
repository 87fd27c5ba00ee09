"""The OpenAPI 3.1 document of the cluster admin, built by ``rest/openapi.py`` from the
route table, with the cluster's schemas and path parameters.

Statuses this server adds to the toolkit's: 404 where the path names a tenant,
namespace, topic or subscription, 409 for mutations, 400 where the path holds a name or
a number, 503 wherever the store or the cluster is asked (every route but /metrics and
the document itself).
"""

from __future__ import annotations

from typing import Any

from georep import limits
from georep.broker.admin import schemas
from georep.rest import openapi
from georep.rest.auth import Role
from georep.rest.openapi import path_parameters
from georep.rest.routes import Route

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
    "version": (
        "A schema version",
        {"type": "integer", "minimum": 0, "maximum": limits.schema_versions_per_topic_max},
    ),
}

_STATUS_TEXT = {
    404: "The tenant, namespace, topic or subscription does not exist",
    409: "Already exists, not empty, busy, or changed concurrently",
    412: "allowedClusters names a cluster this one does not know",
    503: "The metadata store or the cluster is unavailable; retry",
}
_NAMED_PARAMETERS = {"tenant", "namespace", "topic", "subscription"}


def build(routes: tuple[Route, ...]) -> dict[str, Any]:
    return openapi.build(
        routes,
        title="georep cluster admin",
        description=(
            "Admin REST of georep's embedded cluster, following Pulsar's admin v2 paths"
            " and JSON names. When tokens are configured, GETs need a read-only or admin"
            ' bearer token and mutations an admin token; errors are {"reason": ...}.'
            " Every POST must say Content-Type: application/json. Paths under"
            " /admin/georep/v1 have no Pulsar equivalent."
        ),
        schemas=schemas.component_schemas(),
        parameters=PATH_PARAMETERS,
        status_text=_STATUS_TEXT,
        more_statuses=_statuses,
    )


def _statuses(route: Route) -> set[int]:
    names = path_parameters(route.path)
    statuses = set()
    if route.path.endswith("/health"):
        statuses.add(503)
    if route.role is Role.PUBLIC:
        return statuses
    statuses.add(503)
    if names:
        statuses.add(400)
    if _NAMED_PARAMETERS & set(names):
        statuses.add(404)
    if route.role is Role.ADMIN:
        statuses |= {403, 409}
    if route.request == "TenantInfo":
        statuses.add(412)
    return statuses
