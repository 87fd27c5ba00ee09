"""Handlers for clusters, tenants and namespaces (with their retention and TTL policies).

Tenants and namespaces live in the metadata store. A change to an existing row is a
read-modify-CAS, retried while another writer wins (at most
``limits.metadata_cas_retries_max`` times, then 409). Example, two operators setting the
TTL of ``public/default`` at once: both read it at version 3; the first CAS stores version
4; the second gets BadVersion, re-reads version 4, applies its TTL, stores version 5. Both
answer 204 and the last one's TTL stands, as if they had run one after the other.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from aiohttp import web

from georep import limits
from georep.broker.admin import bodies, names
from georep.broker.admin.cluster_admin import AdminError, Conflict, NotFound
from georep.broker.admin.state import CATALOG, CLUSTER, SETTINGS
from georep.broker.meta.catalog import CatalogOutcome, CatalogRepository, NamespaceRecord
from georep.rest.json_io import NO_BODY, json_response, no_content, read_json
from georep.storage.errors import BadVersion

DEFAULT_TENANT = "public"
DEFAULT_NAMESPACE = "default"


async def ensure_defaults(catalog: CatalogRepository, cluster_name: str) -> None:
    """Create tenant ``public`` and namespace ``public/default`` unless they exist."""
    await catalog.create_tenant(DEFAULT_TENANT, allowed_clusters=[cluster_name])
    await catalog.create_namespace(DEFAULT_TENANT, DEFAULT_NAMESPACE)


# --- clusters ---------------------------------------------------------------------------
async def list_clusters(request: web.Request) -> web.Response:
    return json_response([request.app[SETTINGS].cluster_name])


# --- tenants ----------------------------------------------------------------------------
async def list_tenants(request: web.Request) -> web.Response:
    return json_response(await request.app[CATALOG].list_tenants())


async def get_tenant(request: web.Request) -> web.Response:
    tenant = names.tenant(request.match_info["tenant"])
    record = await request.app[CATALOG].get_tenant(tenant)
    if record is None:
        raise NotFound(f"tenant {tenant} does not exist")
    return json_response(bodies.TenantInfo(record.admin_roles, record.allowed_clusters).to_json())


class UnknownClusters(AdminError):
    """A tenant's allowedClusters names a cluster this one does not know (Pulsar: 412)."""

    status = 412


def _known_clusters(request: web.Request, info: bodies.TenantInfo) -> bodies.TenantInfo:
    """``info`` if every cluster it allows is known here: this cluster itself (georep's
    replication is the gateways', so a cluster knows no other)."""
    local = request.app[SETTINGS].cluster_name
    unknown = sorted(set(info.allowed_clusters) - {local})
    if unknown:
        raise UnknownClusters(f"clusters {unknown} do not exist; this cluster knows [{local!r}]")
    return info


async def create_tenant(request: web.Request) -> web.Response:
    tenant = names.tenant(request.match_info["tenant"])
    info = _known_clusters(request, bodies.tenant_info(await read_json(request, required=True)))
    outcome = await request.app[CATALOG].create_tenant(
        tenant, admin_roles=info.admin_roles, allowed_clusters=info.allowed_clusters
    )
    if outcome is CatalogOutcome.EXISTS:
        raise Conflict(f"tenant {tenant} already exists")
    _refuse_full(outcome, "tenants", limits.tenants_count_max)
    return no_content()


async def update_tenant(request: web.Request) -> web.Response:
    tenant = names.tenant(request.match_info["tenant"])
    info = _known_clusters(request, bodies.tenant_info(await read_json(request, required=True)))
    catalog = request.app[CATALOG]
    for _ in range(limits.metadata_cas_retries_max):
        record = await catalog.get_tenant(tenant)
        if record is None:
            raise NotFound(f"tenant {tenant} does not exist")
        changed = dataclasses.replace(
            record, admin_roles=info.admin_roles, allowed_clusters=info.allowed_clusters
        )
        try:
            await catalog.update_tenant(changed)
            return no_content()
        except BadVersion:
            continue
    raise Conflict(f"tenant {tenant} kept changing concurrently; try again")


async def delete_tenant(request: web.Request) -> web.Response:
    tenant = names.tenant(request.match_info["tenant"])
    outcome = await request.app[CATALOG].delete_tenant(tenant)
    if outcome is CatalogOutcome.MISSING:
        raise NotFound(f"tenant {tenant} does not exist")
    if outcome is CatalogOutcome.NOT_EMPTY:
        raise Conflict(f"tenant {tenant} still has namespaces; delete them first")
    return no_content()


# --- namespaces -------------------------------------------------------------------------
async def list_namespaces(request: web.Request) -> web.Response:
    tenant = names.tenant(request.match_info["tenant"])
    catalog = request.app[CATALOG]
    if await catalog.get_tenant(tenant) is None:
        raise NotFound(f"tenant {tenant} does not exist")
    namespaces = await catalog.list_namespaces(tenant)
    return json_response([f"{tenant}/{namespace}" for namespace in namespaces])


async def get_policies(request: web.Request) -> web.Response:
    record = await _namespace(request)
    return json_response(
        {
            "retention_policies": _retention_json(record),
            "message_ttl_in_seconds": record.message_ttl_s,
        }
    )


async def create_namespace(request: web.Request) -> web.Response:
    tenant, namespace = _namespace_name(request)
    document = await read_json(request, required=False)
    policies = bodies.namespace_policies(None if document is NO_BODY else document)
    retention = policies.retention
    outcome = await request.app[CATALOG].create_namespace(
        tenant,
        namespace,
        retention=None if retention is None else (retention.time_minutes, retention.size_mb),
        message_ttl_s=policies.message_ttl_s,
    )
    if outcome is CatalogOutcome.MISSING:
        raise NotFound(f"tenant {tenant} does not exist")
    if outcome is CatalogOutcome.EXISTS:
        raise Conflict(f"namespace {tenant}/{namespace} already exists")
    _refuse_full(outcome, "namespaces", limits.namespaces_count_max)
    return no_content()


async def delete_namespace(request: web.Request) -> web.Response:
    """Refused while the namespace has topics. The check and the delete are two steps: a
    topic created between them is left in a namespace that no longer exists, and the
    broker refuses to serve it until the namespace is created again. After the delete
    the cluster is told, so that it stops trusting a cached "exists"."""
    tenant, namespace = _namespace_name(request)
    catalog = request.app[CATALOG]
    if await catalog.get_namespace(tenant, namespace) is None:
        raise NotFound(f"namespace {tenant}/{namespace} does not exist")
    topics = await request.app[CLUSTER].list_topics(f"{tenant}/{namespace}")
    if topics:
        raise Conflict(
            f"namespace {tenant}/{namespace} still has {len(topics)} topics; delete them first"
        )
    if await catalog.delete_namespace(tenant, namespace) is CatalogOutcome.MISSING:
        raise NotFound(f"namespace {tenant}/{namespace} does not exist")
    await request.app[CLUSTER].namespace_deleted(f"{tenant}/{namespace}")
    return no_content()


async def get_retention(request: web.Request) -> web.Response:
    """The namespace's RetentionPolicies, or ``null`` when unset (the broker's default)."""
    return json_response(_retention_json(await _namespace(request)))


async def set_retention(request: web.Request) -> web.Response:
    retention = bodies.retention(await read_json(request, required=True))
    pair = (retention.time_minutes, retention.size_mb)
    await _change_namespace(request, lambda record: dataclasses.replace(record, retention=pair))
    return no_content()


async def remove_retention(request: web.Request) -> web.Response:
    await _change_namespace(request, lambda record: dataclasses.replace(record, retention=None))
    return no_content()


async def get_message_ttl(request: web.Request) -> web.Response:
    """Seconds, or ``null`` when unset (as Pulsar's ``getNamespaceMessageTTL``)."""
    return json_response((await _namespace(request)).message_ttl_s)


async def set_message_ttl(request: web.Request) -> web.Response:
    ttl = bodies.message_ttl(await read_json(request, required=True))
    await _change_namespace(request, lambda record: dataclasses.replace(record, message_ttl_s=ttl))
    return no_content()


async def remove_message_ttl(request: web.Request) -> web.Response:
    await _change_namespace(request, lambda record: dataclasses.replace(record, message_ttl_s=None))
    return no_content()


# --- plumbing ---------------------------------------------------------------------------
def _namespace_name(request: web.Request) -> tuple[str, str]:
    tenant = request.match_info["tenant"]
    namespace = request.match_info["namespace"]
    names.namespace(tenant, namespace)
    return tenant, namespace


async def _namespace(request: web.Request) -> NamespaceRecord:
    tenant, namespace = _namespace_name(request)
    record = await request.app[CATALOG].get_namespace(tenant, namespace)
    if record is None:
        raise NotFound(f"namespace {tenant}/{namespace} does not exist")
    return record


async def _change_namespace(
    request: web.Request, change: Callable[[NamespaceRecord], NamespaceRecord]
) -> None:
    catalog = request.app[CATALOG]
    for _ in range(limits.metadata_cas_retries_max):
        record = await _namespace(request)
        try:
            await catalog.update_namespace(change(record))
        except BadVersion:
            continue
        await request.app[CLUSTER].namespace_changed(f"{record.tenant}/{record.name}")
        return
    raise Conflict("the namespace kept changing concurrently; try again")


def _retention_json(record: NamespaceRecord) -> dict[str, int] | None:
    return None if record.retention is None else bodies.Retention(*record.retention).to_json()


def _refuse_full(outcome: CatalogOutcome, what: str, count_max: int) -> None:
    if outcome is CatalogOutcome.FULL:
        raise Conflict(f"the cluster holds {count_max} {what}, the maximum")
