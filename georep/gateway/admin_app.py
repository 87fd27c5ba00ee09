"""The gateway's REST admin (aiohttp): replication and subscription-sync policies,
clusters, stats, metrics.

Every route is in :data:`ROUTES`; ``create_app`` registers exactly those and
``openapi.py`` documents exactly those. Paths live under georep's own prefix,
``/admin/georep/v1``; each policy route names its Pulsar admin v2 equivalent (Pulsar sets
a namespace's clusters with ``POST /admin/v2/namespaces/{t}/{ns}/replication`` and a
topic's with ``POST /admin/v2/persistent/{t}/{ns}/{topic}/replication``). Here:

==========================================================  ====================================
``GET    /admin/georep/v1/namespaces/{t}/{ns}/replication``  the namespace's policy (404: none)
``PUT    /admin/georep/v1/namespaces/{t}/{ns}/replication``  set it: ``{"clusters": [...]}``
``DELETE /admin/georep/v1/namespaces/{t}/{ns}/replication``  remove it (``?version=N``: CAS)
``GET|PUT|DELETE /admin/georep/v1/persistent/{t}/{ns}/{topic}/replication``  per topic
``GET    /admin/georep/v1/policies``                         every policy
``GET|PUT|DELETE /admin/georep/v1/namespaces/{t}/{ns}/subscription-sync``  which subscriptions
``GET|PUT|DELETE /admin/georep/v1/persistent/{t}/{ns}/{topic}/subscription-sync``  sync, per topic
``GET    /admin/georep/v1/subscription-sync-policies``       every subscription-sync policy
``GET    /admin/georep/v1/clusters``                         local and remote clusters
``GET    /admin/georep/v1/stats``                            replicators and discovery
``GET    /admin/georep/v1/ownership``                        gateway instances, owned partitions
``GET    /metrics``, ``GET /health``, ``GET /admin/georep/v1/openapi.json``  public
``GET    /status``                                           the live page (status_page.py)
==========================================================  ====================================

A PUT body is ``{"clusters": ["B", "C"], "version": 3}``; ``version`` is optional: when
given the change applies only if the stored policy is at that version (0: only if there
is none), else 409. Clusters must be remotes this gateway knows (400 names the unknown
ones); the local cluster's own name is accepted and ignored, so Pulsar habits of listing
every cluster carry over. A topic's policy overrides its namespace's, even an empty one
(``[]``: this topic is not replicated). The answer is the stored policy, with its new
version. A change takes effect at once: the manager runs a discovery pass.

A subscription-sync policy (PIP-398's ask: sync chosen by the operator, not by the
consumer's flag) says which subscriptions of a namespace or topic are synced beside the
flagged ones: ``{"subscriptions": "all"}``, or ``{"subscriptions": "flagged", "pattern":
"orders-.*"}`` (the flagged ones, and those whose whole name matches the regular
expression; without a pattern, the flag alone, which on a topic undoes its namespace's
``all``). ``version`` works as above, and so do scopes: a topic's policy (its partition's,
else its partitioned topic's) overrides its namespace's, which overrides the
``[subscription_sync]`` table of the configuration. A bad pattern is 400 with the
reason. Answers are ``{"subscriptions", "pattern", "version"}``; each synced
subscription's ``/stats`` entry says ``syncedBy``: ``flag``, ``policy`` or
``flag+policy``.

Every request goes through the shared REST toolkit (``rest/``), as on the cluster's admin:
mutations need an admin token, reads a read-only or admin token once tokens are
configured; /health, /metrics and the OpenAPI document are public; a foreign ``Host`` or
``Origin`` is refused (403), a POST or a body that is not ``application/json`` too (415).
Errors are JSON ``{"reason": "..."}`` (Pulsar's shape) with 400 for bad input, 401/403
for auth, 404, 409 for a version conflict, 413 for a body over
``limits.gateway_request_body_bytes_max``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from georep import limits
from georep.domain.decimal_text import parse_decimal
from georep.domain.topic_name import InvalidTopicName, TopicName, check_namespace
from georep.gateway import status_page
from georep.gateway.config import GatewayConfig
from georep.gateway.errors import PolicyConflict, PolicyError, PolicyNotFound, UnknownCluster
from georep.gateway.manager import ReplicationManager
from georep.gateway.meta.replication_policies import (
    ReplicationPolicyRecord,
    ReplicationPolicyRepository,
)
from georep.gateway.meta.subscription_sync_policies import (
    SubscriptionSyncPolicyRecord,
    SubscriptionSyncPolicyRepository,
)
from georep.gateway.openapi import document as openapi_document
from georep.gateway.ownership import Ownership
from georep.rest.auth import Role
from georep.rest.errors import BadRequest
from georep.rest.json_io import json_response, read_json
from georep.rest.middleware import answering, application, register
from georep.rest.routes import QueryParameter, Route
from georep.runtime.loop_lag import LoopLag
from georep.storage.errors import BadVersion, InvalidArgument
from georep.subsync import TooManyTopics, caught_up

log = logging.getLogger(__name__)

V1 = "/admin/georep/v1"
OPENAPI_PATH = f"{V1}/openapi.json"
_NAMESPACE_POLICY = f"{V1}/namespaces/{{tenant}}/{{namespace}}/replication"
_TOPIC_POLICY = f"{V1}/persistent/{{tenant}}/{{namespace}}/{{topic}}/replication"
_NAMESPACE_SYNC_POLICY = f"{V1}/namespaces/{{tenant}}/{{namespace}}/subscription-sync"
_TOPIC_SYNC_POLICY = f"{V1}/persistent/{{tenant}}/{{namespace}}/{{topic}}/subscription-sync"


@dataclass(frozen=True)
class Served:
    """What the REST serves: the parts of a started gateway."""

    config: GatewayConfig
    policies: ReplicationPolicyRepository
    manager: ReplicationManager
    ownership: Ownership
    sync_policies: SubscriptionSyncPolicyRepository
    loop_lag: LoopLag


GATEWAY = web.AppKey("gateway", Served)
REGISTRY = web.AppKey("registry", CollectorRegistry)


# --- helpers ------------------------------------------------------------------------------
def _policy_json(record: ReplicationPolicyRecord) -> dict[str, Any]:
    return {"clusters": list(record.clusters), "version": record.version}


def _namespace_of(request: web.Request) -> str:
    info = request.match_info
    namespace = f"{info['tenant']}/{info['namespace']}"
    try:
        check_namespace(namespace)
    except InvalidTopicName as error:
        raise PolicyError(str(error)) from None
    return namespace


def _topic_of(request: web.Request) -> str:
    info = request.match_info
    try:
        return str(TopicName.parse(f"persistent://{_namespace_of(request)}/{info['topic']}"))
    except InvalidTopicName as error:
        raise PolicyError(str(error)) from None


async def _body(request: web.Request) -> tuple[list[str], int | None]:
    """The clusters and optional version of a PUT body, checked."""
    document = await read_json(request, required=True)
    if not isinstance(document, dict):
        raise PolicyError('the body must be an object: {"clusters": [...]}')
    unknown = sorted(set(document) - {"clusters", "version"})
    if unknown:
        raise PolicyError(f"unknown field(s) {unknown}; expected clusters and version")
    clusters = document.get("clusters")
    if not isinstance(clusters, list) or not all(isinstance(c, str) for c in clusters):
        raise PolicyError('"clusters" must be a list of cluster names')
    if len(clusters) > limits.remote_clusters_count_max:
        raise PolicyError(f'"clusters" names at most {limits.remote_clusters_count_max}')
    version = _body_version(document)
    gateway = request.app[GATEWAY]
    local = gateway.config.local.name
    unknown_clusters = sorted({c for c in clusters if c != local} - set(gateway.config.remotes))
    if unknown_clusters:
        raise UnknownCluster(
            f"unknown cluster(s) {unknown_clusters}; this gateway ({local}) replicates to"
            f" {sorted(gateway.config.remotes)}"
        )
    return sorted({c for c in clusters if c != local}), version


def _sync_policy_json(record: SubscriptionSyncPolicyRecord) -> dict[str, Any]:
    return {
        "subscriptions": record.subscriptions,
        "pattern": record.pattern,
        "version": record.version,
    }


async def _sync_body(request: web.Request) -> tuple[str, str | None, int | None]:
    """The choice, pattern and optional version of a subscription-sync PUT body, checked
    for shape here and for meaning by the repository (``check_choice``: a 400 too)."""
    document = await read_json(request, required=True)
    if not isinstance(document, dict):
        raise PolicyError('the body must be an object: {"subscriptions": "all" | "flagged"}')
    unknown = sorted(set(document) - {"subscriptions", "pattern", "version"})
    if unknown:
        raise PolicyError(f"unknown field(s) {unknown}; expected subscriptions, pattern, version")
    subscriptions = document.get("subscriptions")
    if subscriptions not in ("all", "flagged"):
        raise PolicyError('"subscriptions" must be "all" or "flagged"')
    pattern = document.get("pattern")
    if pattern is not None and not isinstance(pattern, str):
        raise PolicyError('"pattern" must be a string (a regular expression) or null')
    return subscriptions, pattern, _body_version(document)


def _body_version(document: dict[str, Any]) -> int | None:
    version = document.get("version")
    if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
        raise PolicyError('"version" must be an integer')
    if version is not None and version < 0:
        raise PolicyError('"version" must be >= 0')
    return version


def _version_query(request: web.Request) -> int | None:
    text = request.query.get("version")
    if text is None:
        return None
    version = parse_decimal(text)
    if version is None or version < 1:
        raise PolicyError("?version must be an integer >= 1")
    return version


# --- handlers -----------------------------------------------------------------------------
async def health(request: web.Request) -> web.Response:
    """Alive (200) always; ``degraded`` with the reasons while a limit is reached or a
    sync cannot attach (``ReplicationManager.problems``)."""
    gateway = request.app[GATEWAY]
    problems = gateway.manager.problems()
    return json_response(
        {
            "status": "degraded" if problems else "ok",
            "cluster": gateway.config.local.name,
            "problems": problems,
            "replication": gateway.manager.replication_summary(),
        }
    )


async def metrics(request: web.Request) -> web.Response:
    body = generate_latest(request.app[REGISTRY])
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


async def openapi(request: web.Request) -> web.Response:
    return json_response(openapi_document(ROUTES))


async def get_clusters(request: web.Request) -> web.Response:
    gateway = request.app[GATEWAY]
    local = gateway.config.local
    stored = {c.name: c for c in await gateway.policies.list_remote_clusters()}
    remotes = [
        {
            "name": name,
            "serviceUrl": endpoint.service_url,
            "adminUrl": endpoint.admin_url,
            "version": stored[name].version if name in stored else None,
        }
        for name, endpoint in sorted(gateway.config.remotes.items())
    ]
    return json_response(
        {
            "local": {"name": local.name, "serviceUrl": local.service_url,
                      "adminUrl": local.admin_url},
            "remotes": remotes,
        }
    )  # fmt: skip


async def list_policies(request: web.Request) -> web.Response:
    policies = await request.app[GATEWAY].policies.list_replication_policies()
    return json_response(
        {
            "namespaces": {p.name: _policy_json(p) for p in policies if p.scope == "namespace"},
            "topics": {p.name: _policy_json(p) for p in policies if p.scope == "topic"},
        }
    )


async def _get(request: web.Request, scope: str, name: str) -> web.Response:
    record = await request.app[GATEWAY].policies.get_replication_policy(scope, name)
    if record is None:
        raise PolicyNotFound(f"no replication policy for {scope} {name}")
    return json_response(_policy_json(record))


async def _put(request: web.Request, scope: str, name: str) -> web.Response:
    clusters, version = await _body(request)
    gateway = request.app[GATEWAY]
    try:
        record = await gateway.policies.put_replication_policy(
            scope, name, clusters, expected_version=version
        )
    except BadVersion as error:
        raise PolicyConflict(str(error)) from None
    log.info("policy of %s %s set to %s (version %d)", scope, name, clusters, record.version)
    gateway.manager.poke()
    return json_response(_policy_json(record))


async def _delete(request: web.Request, scope: str, name: str) -> web.Response:
    gateway = request.app[GATEWAY]
    try:
        deleted = await gateway.policies.delete_replication_policy(
            scope, name, expected_version=_version_query(request)
        )
    except BadVersion as error:
        raise PolicyConflict(str(error)) from None
    if not deleted:
        raise PolicyNotFound(f"no replication policy for {scope} {name}")
    log.info("policy of %s %s deleted", scope, name)
    gateway.manager.poke()
    return web.Response(status=204)


async def get_namespace_policy(request: web.Request) -> web.Response:
    return await _get(request, "namespace", _namespace_of(request))


async def put_namespace_policy(request: web.Request) -> web.Response:
    return await _put(request, "namespace", _namespace_of(request))


async def delete_namespace_policy(request: web.Request) -> web.Response:
    return await _delete(request, "namespace", _namespace_of(request))


async def get_topic_policy(request: web.Request) -> web.Response:
    return await _get(request, "topic", _topic_of(request))


async def put_topic_policy(request: web.Request) -> web.Response:
    return await _put(request, "topic", _topic_of(request))


async def delete_topic_policy(request: web.Request) -> web.Response:
    return await _delete(request, "topic", _topic_of(request))


async def list_sync_policies(request: web.Request) -> web.Response:
    policies = await request.app[GATEWAY].sync_policies.list_policies()
    return json_response(
        {
            "namespaces": {
                p.name: _sync_policy_json(p) for p in policies if p.scope == "namespace"
            },
            "topics": {p.name: _sync_policy_json(p) for p in policies if p.scope == "topic"},
        }
    )


async def _get_sync(request: web.Request, scope: str, name: str) -> web.Response:
    record = await request.app[GATEWAY].sync_policies.get_policy(scope, name)
    if record is None:
        raise PolicyNotFound(f"no subscription-sync policy for {scope} {name}")
    return json_response(_sync_policy_json(record))


async def _put_sync(request: web.Request, scope: str, name: str) -> web.Response:
    subscriptions, pattern, version = await _sync_body(request)
    gateway = request.app[GATEWAY]
    try:
        record = await gateway.sync_policies.put_policy(
            scope, name, subscriptions, pattern, expected_version=version
        )
    except BadVersion as error:
        raise PolicyConflict(str(error)) from None
    log.info(
        "subscription-sync policy of %s %s set to %s%s (version %d)",
        scope,
        name,
        subscriptions,
        "" if pattern is None else f" + pattern {pattern!r}",
        record.version,
    )
    gateway.manager.poke()
    return json_response(_sync_policy_json(record))


async def _delete_sync(request: web.Request, scope: str, name: str) -> web.Response:
    gateway = request.app[GATEWAY]
    try:
        deleted = await gateway.sync_policies.delete_policy(
            scope, name, expected_version=_version_query(request)
        )
    except BadVersion as error:
        raise PolicyConflict(str(error)) from None
    if not deleted:
        raise PolicyNotFound(f"no subscription-sync policy for {scope} {name}")
    log.info("subscription-sync policy of %s %s deleted", scope, name)
    gateway.manager.poke()
    return web.Response(status=204)


async def get_namespace_sync_policy(request: web.Request) -> web.Response:
    return await _get_sync(request, "namespace", _namespace_of(request))


async def put_namespace_sync_policy(request: web.Request) -> web.Response:
    return await _put_sync(request, "namespace", _namespace_of(request))


async def delete_namespace_sync_policy(request: web.Request) -> web.Response:
    return await _delete_sync(request, "namespace", _namespace_of(request))


async def get_topic_sync_policy(request: web.Request) -> web.Response:
    return await _get_sync(request, "topic", _topic_of(request))


async def put_topic_sync_policy(request: web.Request) -> web.Response:
    return await _put_sync(request, "topic", _topic_of(request))


async def delete_topic_sync_policy(request: web.Request) -> web.Response:
    return await _delete_sync(request, "topic", _topic_of(request))


async def get_stats(request: web.Request) -> web.Response:
    """One page of replicators and synced topic partitions, in topic order:
    ``?topic=`` (a prefix), ``?offset=`` and ``?limit=`` (at most
    ``limits.gateway_stats_page_max``) choose the topic partitions of the page; the
    summaries (discovery, sync totals, watches) always come whole."""
    manager = request.app[GATEWAY].manager
    prefix = request.query.get("topic", "")
    offset = _count_query(request, "offset", 0, limits.gateway_namespace_topics_max)
    limit = _count_query(
        request, "limit", limits.gateway_stats_page_default, limits.gateway_stats_page_max
    )
    topics = sorted(
        {key[0] for key in manager.replicators} | set(manager.syncs),
    )
    matching = [t for t in topics if t.startswith(prefix)]
    page = matching[offset : offset + limit]
    chosen = set(page)
    keys = sorted(key for key in manager.replicators if key[0] in chosen)
    return json_response(
        {
            "localCluster": manager.local.name,
            "page": {
                "offset": offset,
                "limit": limit,
                "topics": len(matching),
                "next": offset + limit if offset + limit < len(matching) else None,
            },
            "replicators": manager.replicator_stats(keys),
            "discovery": manager.stats.to_json(),
            "adminRequestsSent": manager.admin_requests(),
            "adminRequestsByKind": manager.admin_requests_by_kind(),
            "subscriptionSync": manager.sync_stats(page),
        }
    )


async def get_caught_up(request: web.Request) -> web.Response:
    """Whether this cluster's syncs have applied every state it stores (subsync/caught_up.py):
    what a failover waits for before the consumers move here. ``?topic=``: a prefix of
    the topic partitions asked about (default: every synced one)."""
    manager = request.app[GATEWAY].manager
    try:
        answer = await caught_up(manager.syncs, manager.local_admin, request.query.get("topic", ""))
    except TooManyTopics as error:
        raise BadRequest(str(error)) from None
    return json_response(answer)


async def status(request: web.Request) -> web.Response:
    """The live page (status_page.py): ``?page=N`` (from 1) of its rows, worst first."""
    gateway = request.app[GATEWAY]
    manager = gateway.manager
    page = _count_query(request, "page", 1, limits.gateway_namespace_topics_max)
    text = status_page.render(
        cluster=gateway.config.local.name,
        instance=manager.instance,
        partitions_owned=manager.partitions_owned,
        partitions_known=manager.stats.topics,
        problems=manager.problems(),
        all_rows=status_page.rows(manager),
        page=page,
    )
    return web.Response(text=text, content_type="text/html", charset="utf-8")


async def get_ownership(request: web.Request) -> web.Response:
    """The gateway instances of this cluster and the partitions this one runs;
    ``?topic=`` (a topic partition) adds the instance that owns it."""
    gateway = request.app[GATEWAY]
    ownership, manager = gateway.ownership, gateway.manager
    document: dict[str, Any] = {
        "cluster": gateway.config.local.name,
        "instance": ownership.instance,
        "leaseSeconds": ownership.lease_s,
        "heartbeatSeconds": ownership.heartbeat_s,
        "fenced": ownership.fenced,
        "lastError": ownership.last_error,
        "members": ownership.members_json(),
        "partitions": {
            "known": manager.stats.topics,
            "owned": manager.partitions_owned,
            "running": len({key[0] for key in manager.replicators} | set(manager.syncs)),
            "pending": manager.partitions_pending,
        },
    }
    topic = request.query.get("topic")
    if topic is not None:
        try:
            TopicName.parse(topic)
        except InvalidTopicName as error:
            raise PolicyError(f"?topic: {error}") from None
        document["owner"] = ownership.owner(topic)
    return json_response(document)


def _count_query(request: web.Request, name: str, default: int, count_max: int) -> int:
    text = request.query.get(name)
    if text is None:
        return default
    value = parse_decimal(text)
    if value is None or value > count_max:
        raise PolicyError(f"?{name} must be a whole number from 0 to {count_max}")
    return value


# --- the table ------------------------------------------------------------------------------
_VERSION = QueryParameter(
    "version", "delete only at this version", {"type": "integer", "minimum": 1}
)
_TOPIC_PREFIX = QueryParameter("topic", "only topic partitions starting so", {"type": "string"})
_OWNED_TOPIC = QueryParameter(
    "topic", "a topic partition: the answer names its owner", {"type": "string"}
)
_OFFSET = QueryParameter("offset", "topic partitions skipped", {"type": "integer", "minimum": 0})
_LIMIT = QueryParameter(
    "limit",
    f"topic partitions in the page (default {limits.gateway_stats_page_default})",
    {"type": "integer", "minimum": 0, "maximum": limits.gateway_stats_page_max},
)
ROUTES: tuple[Route, ...] = (
    Route("GET", "/health", health, Role.PUBLIC, "Liveness", "service", response="Health"),
    Route("GET", "/metrics", metrics, Role.PUBLIC, "Prometheus metrics", "service",
          response="PrometheusText", response_media_type="text/plain"),
    Route("GET", OPENAPI_PATH, openapi, Role.PUBLIC, "This OpenAPI document", "service",
          response="OpenAPIDocument"),
    Route("GET", "/status", status, Role.PUBLIC,
          "The live page: per namespace and remote, stuck and lagging first", "service",
          response="StatusPage", response_media_type="text/html",
          query=(QueryParameter("page", "which page of rows, from 1",
                                {"type": "integer", "minimum": 0}),)),
    Route("GET", f"{V1}/clusters", get_clusters, Role.READ,
          "The local cluster and the remotes this gateway replicates to", "clusters",
          response="Clusters"),
    Route("GET", f"{V1}/policies", list_policies, Role.READ, "Every replication policy", "policies",
          response="Policies"),
    Route("GET", _NAMESPACE_POLICY, get_namespace_policy, Role.READ,
          "A namespace's replication clusters (Pulsar: GET namespaces/{t}/{ns}/replication)",
          "policies", response="Policy"),
    Route("PUT", _NAMESPACE_POLICY, put_namespace_policy, Role.ADMIN,
          "Set a namespace's replication clusters (Pulsar: POST .../replication)",
          "policies", request="PolicyChange", response="Policy"),
    Route("DELETE", _NAMESPACE_POLICY, delete_namespace_policy, Role.ADMIN,
          "Remove a namespace's policy: its topics stop replicating", "policies",
          query=(_VERSION,)),
    Route("GET", _TOPIC_POLICY, get_topic_policy, Role.READ,
          "A topic's replication clusters, overriding its namespace's", "policies",
          response="Policy"),
    Route("PUT", _TOPIC_POLICY, put_topic_policy, Role.ADMIN,
          "Set a topic's replication clusters (Pulsar: POST persistent/.../replication)",
          "policies", request="PolicyChange", response="Policy"),
    Route("DELETE", _TOPIC_POLICY, delete_topic_policy, Role.ADMIN,
          "Remove a topic's policy: its namespace's applies again", "policies",
          query=(_VERSION,)),
    Route("GET", f"{V1}/subscription-sync-policies", list_sync_policies, Role.READ,
          "Every subscription-sync policy", "subscription sync", response="SyncPolicies"),
    Route("GET", _NAMESPACE_SYNC_POLICY, get_namespace_sync_policy, Role.READ,
          "Which subscriptions a namespace syncs beside the flagged (PIP-398)",
          "subscription sync", response="SyncPolicy"),
    Route("PUT", _NAMESPACE_SYNC_POLICY, put_namespace_sync_policy, Role.ADMIN,
          "Set which subscriptions a namespace syncs: all, or the flagged and a pattern",
          "subscription sync", request="SyncPolicyChange", response="SyncPolicy"),
    Route("DELETE", _NAMESPACE_SYNC_POLICY, delete_namespace_sync_policy, Role.ADMIN,
          "Remove a namespace's sync policy: the configuration's choice applies again",
          "subscription sync", query=(_VERSION,)),
    Route("GET", _TOPIC_SYNC_POLICY, get_topic_sync_policy, Role.READ,
          "Which subscriptions a topic syncs, overriding its namespace's",
          "subscription sync", response="SyncPolicy"),
    Route("PUT", _TOPIC_SYNC_POLICY, put_topic_sync_policy, Role.ADMIN,
          "Set which subscriptions a topic syncs", "subscription sync",
          request="SyncPolicyChange", response="SyncPolicy"),
    Route("DELETE", _TOPIC_SYNC_POLICY, delete_topic_sync_policy, Role.ADMIN,
          "Remove a topic's sync policy: its namespace's applies again", "subscription sync",
          query=(_VERSION,)),
    Route("GET", f"{V1}/stats", get_stats, Role.READ,
          "Replicator stats (Pulsar's replication stats names), discovery, subscription sync;"
          " one page of topic partitions", "stats", response="Stats",
          query=(_TOPIC_PREFIX, _OFFSET, _LIMIT)),
    Route("GET", f"{V1}/sync/caught-up", get_caught_up, Role.READ,
          "Whether every state this cluster stores is applied: wait for it before consumers"
          " move here in a failover", "subscription sync", response="CaughtUp",
          query=(_TOPIC_PREFIX,)),
    Route("GET", f"{V1}/ownership", get_ownership, Role.READ,
          "The gateway instances of this cluster and the topic partitions this one runs",
          "stats", response="Ownership", query=(_OWNED_TOPIC,)),
)  # fmt: skip


# --- the app ------------------------------------------------------------------------------
_STATUSES: tuple[tuple[type[Exception], int], ...] = ((InvalidArgument, 400),)

_answer = answering(log, _STATUSES, server_error="internal error; see the gateway's log")


def create_app(gateway: Served) -> web.Application:
    """The app serving a started gateway's parts; pure."""
    from georep.gateway.metrics import registry_for

    app = application(_answer, limits.gateway_request_body_bytes_max)
    app[GATEWAY] = gateway
    app[REGISTRY] = registry_for(
        gateway.manager, topic_level=gateway.config.metrics_topic_level, loop_lag=gateway.loop_lag
    )
    register(app, ROUTES, gateway.config.access)
    return app
