"""The gateway's REST admin (aiohttp): replication policies, clusters, stats, metrics.

Every route is in :data:`ROUTES`; ``create_app`` registers exactly those and
``rest_openapi.py`` documents exactly those. Paths live under georep's own prefix,
``/admin/georep/v1``; each policy route names its Pulsar admin v2 equivalent (Pulsar sets
a namespace's clusters with ``POST /admin/v2/namespaces/{t}/{ns}/replication`` and a
topic's with ``POST /admin/v2/persistent/{t}/{ns}/{topic}/replication``). Here:

==========================================================  ====================================
``GET    /admin/georep/v1/namespaces/{t}/{ns}/replication``  the namespace's policy (404: none)
``PUT    /admin/georep/v1/namespaces/{t}/{ns}/replication``  set it: ``{"clusters": [...]}``
``DELETE /admin/georep/v1/namespaces/{t}/{ns}/replication``  remove it (``?version=N``: CAS)
``GET|PUT|DELETE /admin/georep/v1/persistent/{t}/{ns}/{topic}/replication``  per topic
``GET    /admin/georep/v1/policies``                         every policy
``GET    /admin/georep/v1/clusters``                         local and remote clusters
``GET    /admin/georep/v1/stats``                            replicators and discovery
``GET    /metrics``, ``GET /health``, ``GET /admin/georep/v1/openapi.json``  public
==========================================================  ====================================

A PUT body is ``{"clusters": ["B", "C"], "version": 3}``; ``version`` is optional: when
given the change applies only if the stored policy is at that version (0: only if there
is none), else 409. Clusters must be remotes this gateway knows (400 names the unknown
ones); the local cluster's own name is accepted and ignored, so Pulsar habits of listing
every cluster carry over. A topic's policy overrides its namespace's, even an empty one
(``[]``: this topic is not replicated). The answer is the stored policy, with its new
version. A change takes effect at once: the manager runs a discovery pass.

Auth (``broker/admin/auth.py``'s rules): mutations need an admin token; reads need a
read-only or admin token once read-only tokens are configured; /health, /metrics and the
OpenAPI document are public. Errors are JSON ``{"reason": "..."}`` (Pulsar's shape) with
400 for bad input, 401/403 for auth, 404, 409 for a version conflict, 413 for a body over
``limits.gateway_request_body_bytes_max``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from georep import limits
from georep.broker.admin.auth import Role, authorize
from georep.broker.admin.cluster_admin import AdminError
from georep.broker.errors import InvalidTopicName
from georep.broker.topic_name import TopicName, check_namespace
from georep.replicator.errors import PolicyConflict, PolicyError, PolicyNotFound, UnknownCluster
from georep.storage.errors import BadVersion, InvalidArgument

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

V1 = "/admin/georep/v1"
OPENAPI_PATH = f"{V1}/openapi.json"
_NAMESPACE_POLICY = f"{V1}/namespaces/{{tenant}}/{{namespace}}/replication"
_TOPIC_POLICY = f"{V1}/persistent/{{tenant}}/{{namespace}}/{{topic}}/replication"

GATEWAY = web.AppKey("gateway", object)
REGISTRY = web.AppKey("registry", object)


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    handler: Handler
    role: Role
    summary: str
    #: Component schema of the JSON body; None for none.
    request: str | None = None
    #: Component schema of the 200 answer; None: 204 No Content.
    response: str | None = None
    response_media_type: str = "application/json"

    @property
    def operation_id(self) -> str:
        return self.handler.__name__


# --- helpers ------------------------------------------------------------------------------
def _json(document: Any, status: int = 200) -> web.Response:
    return web.json_response(document, status=status, dumps=lambda d: json.dumps(d, sort_keys=True))


def _policy_json(record) -> dict:
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
    try:
        document = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise PolicyError('the body must be JSON: {"clusters": [...]}') from None
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
    version = document.get("version")
    if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
        raise PolicyError('"version" must be an integer')
    if version is not None and version < 0:
        raise PolicyError('"version" must be >= 0')
    gateway = request.app[GATEWAY]
    local = gateway.config.local.name
    unknown_clusters = sorted({c for c in clusters if c != local} - set(gateway.config.remotes))
    if unknown_clusters:
        raise UnknownCluster(
            f"unknown cluster(s) {unknown_clusters}; this gateway ({local}) replicates to"
            f" {sorted(gateway.config.remotes)}"
        )
    return sorted({c for c in clusters if c != local}), version


def _version_query(request: web.Request) -> int | None:
    text = request.query.get("version")
    if text is None:
        return None
    if not text.isdigit() or int(text) < 1:
        raise PolicyError("?version must be an integer >= 1")
    return int(text)


# --- handlers -----------------------------------------------------------------------------
async def health(request: web.Request) -> web.Response:
    gateway = request.app[GATEWAY]
    return _json({"status": "ok", "cluster": gateway.config.local.name})


async def metrics(request: web.Request) -> web.Response:
    body = generate_latest(request.app[REGISTRY])
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


async def openapi(request: web.Request) -> web.Response:
    from georep.replicator.rest_openapi import document

    return _json(document())


async def get_clusters(request: web.Request) -> web.Response:
    gateway = request.app[GATEWAY]
    local = gateway.config.local
    stored = {c.name: c for c in await gateway.store.list_remote_clusters()}
    remotes = [
        {
            "name": name,
            "serviceUrl": endpoint.service_url,
            "adminUrl": endpoint.admin_url,
            "version": stored[name].version if name in stored else None,
        }
        for name, endpoint in sorted(gateway.config.remotes.items())
    ]
    return _json(
        {
            "local": {"name": local.name, "serviceUrl": local.service_url,
                      "adminUrl": local.admin_url},
            "remotes": remotes,
        }
    )  # fmt: skip


async def list_policies(request: web.Request) -> web.Response:
    store = request.app[GATEWAY].store
    policies = await store.list_replication_policies()
    return _json(
        {
            "namespaces": {p.name: _policy_json(p) for p in policies if p.scope == "namespace"},
            "topics": {p.name: _policy_json(p) for p in policies if p.scope == "topic"},
        }
    )


async def _get(request: web.Request, scope: str, name: str) -> web.Response:
    record = await request.app[GATEWAY].store.get_replication_policy(scope, name)
    if record is None:
        raise PolicyNotFound(f"no replication policy for {scope} {name}")
    return _json(_policy_json(record))


async def _put(request: web.Request, scope: str, name: str) -> web.Response:
    clusters, version = await _body(request)
    gateway = request.app[GATEWAY]
    try:
        record = await gateway.store.put_replication_policy(
            scope, name, clusters, expected_version=version
        )
    except BadVersion as error:
        raise PolicyConflict(str(error)) from None
    log.info("policy of %s %s set to %s (version %d)", scope, name, clusters, record.version)
    gateway.manager.poke()
    return _json(_policy_json(record))


async def _delete(request: web.Request, scope: str, name: str) -> web.Response:
    gateway = request.app[GATEWAY]
    try:
        deleted = await gateway.store.delete_replication_policy(
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


async def get_stats(request: web.Request) -> web.Response:
    manager = request.app[GATEWAY].manager
    topic = request.query.get("topic")
    replicators = manager.replicator_stats()
    sync = manager.sync_stats()
    if topic:
        replicators = [r for r in replicators if r["topic"].startswith(topic)]
        sync["topics"] = [t for t in sync["topics"] if t["topic"].startswith(topic)]
    return _json(
        {
            "localCluster": manager.local.name,
            "replicators": replicators,
            "discovery": manager.stats.to_json(),
            "subscriptionSync": sync,
        }
    )


# --- the table ------------------------------------------------------------------------------
ROUTES: tuple[Route, ...] = (
    Route("GET", "/health", health, Role.PUBLIC, "Liveness", response="Health"),
    Route("GET", "/metrics", metrics, Role.PUBLIC, "Prometheus metrics",
          response="PrometheusText", response_media_type="text/plain"),
    Route("GET", OPENAPI_PATH, openapi, Role.PUBLIC, "This OpenAPI document",
          response="OpenAPIDocument"),
    Route("GET", f"{V1}/clusters", get_clusters, Role.READ,
          "The local cluster and the remotes this gateway replicates to", response="Clusters"),
    Route("GET", f"{V1}/policies", list_policies, Role.READ, "Every replication policy",
          response="Policies"),
    Route("GET", _NAMESPACE_POLICY, get_namespace_policy, Role.READ,
          "A namespace's replication clusters (Pulsar: GET namespaces/{t}/{ns}/replication)",
          response="Policy"),
    Route("PUT", _NAMESPACE_POLICY, put_namespace_policy, Role.ADMIN,
          "Set a namespace's replication clusters (Pulsar: POST .../replication)",
          request="PolicyChange", response="Policy"),
    Route("DELETE", _NAMESPACE_POLICY, delete_namespace_policy, Role.ADMIN,
          "Remove a namespace's policy: its topics stop replicating"),
    Route("GET", _TOPIC_POLICY, get_topic_policy, Role.READ,
          "A topic's replication clusters, overriding its namespace's", response="Policy"),
    Route("PUT", _TOPIC_POLICY, put_topic_policy, Role.ADMIN,
          "Set a topic's replication clusters (Pulsar: POST persistent/.../replication)",
          request="PolicyChange", response="Policy"),
    Route("DELETE", _TOPIC_POLICY, delete_topic_policy, Role.ADMIN,
          "Remove a topic's policy: its namespace's applies again"),
    Route("GET", f"{V1}/stats", get_stats, Role.READ,
          "Replicator stats (Pulsar's replication stats names), discovery, subscription sync",
          response="Stats"),
)  # fmt: skip


# --- the app ------------------------------------------------------------------------------
def _error(status: int, reason: str, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response({"reason": reason}, status=status, headers=headers)


def _guarded(route: Route) -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        gateway = request.app[GATEWAY]
        try:
            authorize(gateway.config, request.headers.get("Authorization"), route.role)
            return await route.handler(request)
        except AdminError as error:  # Unauthorized 401, Forbidden 403
            headers = {"WWW-Authenticate": "Bearer"} if error.status == 401 else None
            return _error(error.status, str(error), headers)
        except PolicyError as error:
            return _error(error.status, str(error))
        except InvalidArgument as error:
            return _error(400, str(error))
        except web.HTTPException:
            raise
        except Exception:
            log.exception("%s %s failed", route.method, route.path)
            return _error(500, "internal error; see the gateway's log")

    handle.__name__ = route.operation_id
    return handle


def create_app(gateway) -> web.Application:
    """The app for ``gateway`` (its ``config``, ``store`` and ``manager``); pure."""
    from georep.replicator.metrics import registry_for

    app = web.Application(client_max_size=limits.gateway_request_body_bytes_max)
    app[GATEWAY] = gateway
    app[REGISTRY] = registry_for(gateway.manager)
    for route in ROUTES:
        app.router.add_route(route.method, route.path, _guarded(route))
    return app
