"""The OpenAPI 3.1 document of the gateway's REST admin, built by ``rest/openapi.py`` from
the route table it is given (``gateway/admin_app.py`` gives its ``ROUTES``) with the gateway's
schemas. Statuses it adds to the toolkit's: 409 for
mutations, 400 where the path holds a name, 404 where a policy is looked up.
"""

from __future__ import annotations

from typing import Any

from georep import limits
from georep.rest import openapi
from georep.rest.auth import Role
from georep.rest.routes import Route

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
_SUBSCRIPTION_CHOICE = {
    "enum": ["all", "flagged"],
    "description": "all: every subscription; flagged: those a consumer"
    " flagged, and those the pattern matches",
}
_SUBSCRIPTION_PATTERN = {
    "type": ["string", "null"],
    "minLength": 1,
    "maxLength": limits.sync_subscription_pattern_chars_max,
    "description": "a regular expression (Python re) a subscription's whole name must"
    " match; only with flagged",
}
_SYNC_POLICY = {
    "type": "object",
    "required": ["subscriptions", "pattern", "version"],
    "properties": {
        "subscriptions": _SUBSCRIPTION_CHOICE,
        "pattern": _SUBSCRIPTION_PATTERN,
        "version": {"type": "integer", "minimum": 1},
    },
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
        "schemaRefused": {"type": ["string", "null"]},
    },
    "additionalProperties": True,
}

SCHEMAS: dict[str, dict[str, Any]] = {
    "Error": {"type": "object", "required": ["reason"],
              "properties": {"reason": {"type": "string"}}},
    "Health": {"type": "object", "properties": {
        "status": {"enum": ["ok", "degraded"]},
        "cluster": {"type": "string"},
        "problems": {"type": "array", "items": {"type": "string"},
                     "description": "Why degraded: limits reached, syncs that cannot attach"},
        "replication": {
            "type": "object",
            "description": "Per remote: how far behind its replicators are",
            "additionalProperties": {"type": "object", "properties": {
                "replicators": {"type": "integer"},
                "notConnected": {"type": "integer"},
                "stalled": {"type": "integer",
                            "description": "moved nothing on for stuck_after_s while"
                                           " entries wait"},
                "restarts": {"type": "integer",
                             "description": "restarts of stuck replicators since the start"},
                "backlogEntries": {"type": "integer"},
                "delayS": {"type": "number"},
                "msgRateOut": {"type": "number"},
                "catchingUp": {"type": "boolean"},
            }},
        },
    }},
    "PrometheusText": {"type": "string"},
    "StatusPage": {"type": "string", "description": "an HTML page"},
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
    "SyncPolicy": _SYNC_POLICY,
    "SyncPolicyChange": {
        "type": "object",
        "required": ["subscriptions"],
        "additionalProperties": False,
        "properties": {
            "subscriptions": _SUBSCRIPTION_CHOICE,
            "pattern": _SUBSCRIPTION_PATTERN,
            "version": {"type": "integer", "minimum": 0,
                        "description": "apply only at this version (0: only if none)"},
        },
    },
    "SyncPolicies": {
        "type": "object",
        "properties": {
            "namespaces": {"type": "object", "additionalProperties": _SYNC_POLICY},
            "topics": {"type": "object", "additionalProperties": _SYNC_POLICY},
        },
    },
    "Stats": {
        "type": "object",
        "properties": {
            "localCluster": {"type": "string"},
            "page": {"type": "object", "description": "offset, limit and totals of this page"},
            "replicators": {"type": "array", "items": _REPLICATOR},
            "discovery": {"type": "object"},
            "subscriptionSync": {
                "type": "object",
                "description": "Snapshots, caches and synced subscription states per topic",
            },
        },
    },
    "CaughtUp": {
        "type": "object",
        "description": "Whether the synced topic partitions asked about have applied every"
                       " state this cluster stores (docs/SUBSYNC.md, failover)",
        "properties": {
            "caughtUp": {"type": "boolean",
                         "description": "at least one matched, and none is behind"},
            "topics": {"type": "integer", "description": "synced topic partitions asked about"},
            "behind": {"type": "object",
                       "description": "per partition behind, what it waits for",
                       "additionalProperties": {"type": "array", "items": {"type": "string"}}},
        },
    },
    "Ownership": {
        "type": "object",
        "description": "The gateway instances of this cluster and the topic partitions"
                       " this one runs (docs/ARCHITECTURE.md, several gateways)",
        "properties": {
            "cluster": {"type": "string"},
            "instance": {"type": "string", "description": "this instance"},
            "leaseSeconds": {"type": "number"},
            "heartbeatSeconds": {"type": "number"},
            "fenced": {"type": "boolean",
                       "description": "no lease: this instance runs nothing until it renews"},
            "members": {"type": "array", "items": {"type": "object"}},
            "partitions": {"type": "object",
                           "description": "known, owned, running and pending (waiting for"
                                          " the instance that ran them to let go)"},
            "owner": {"type": ["string", "null"],
                      "description": "with ?topic=: the instance that owns it"},
        },
    },
}  # fmt: skip

_STATUS_TEXT = {
    400: "Bad input: a name, the body, or an unknown cluster",
    404: "No such policy",
    409: "The policy is not at the version given",
    413: f"Body larger than {limits.gateway_request_body_bytes_max} bytes",
}


def _statuses(route: Route) -> set[int]:
    statuses = set()
    if "{" in route.path:
        statuses.add(400)
    if route.role is Role.ADMIN:
        statuses.add(409)
    if "replication" in route.path or route.path.endswith("/subscription-sync"):
        statuses.add(404)
    return statuses


def document(routes: tuple[Route, ...]) -> dict[str, Any]:
    """The document of ``routes``, the gateway REST's route table."""
    return openapi.build(
        routes,
        title="georep gateway admin",
        description=(
            "Replication and subscription-sync policies, clusters and replicator stats of"
            " one gateway. Every"
            " POST must say Content-Type: application/json."
        ),
        schemas=SCHEMAS,
        parameters=_PATH_PARAMETERS,
        status_text=_STATUS_TEXT,
        more_statuses=_statuses,
    )
