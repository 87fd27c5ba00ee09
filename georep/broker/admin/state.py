"""Typed keys of what the admin app holds: settings, the cluster, the metadata store's
catalog and the metrics. Handlers read them as ``request.app[CLUSTER]``; the catalog is
set by the app's cleanup context once the store is open, and is absent before that."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web

from georep.broker.admin.cluster_admin import ClusterAdmin
from georep.broker.admin.metrics import AdminMetrics
from georep.broker.admin.settings import AdminSettings
from georep.broker.meta.catalog import CatalogRepository
from georep.broker.schema_registry import SchemaRegistry
from georep.storage.bookie.ledger_dirs_monitor import BookieAvailability


@dataclass(frozen=True, slots=True)
class StorageHealth:
    """The cluster's bookies as ``/health`` reports them: a new ledger needs
    ``ensemble_size`` bookies that take writes, so fewer means the cluster takes none."""

    bookies: list[BookieAvailability]
    ensemble_size: int

    @property
    def writable_count(self) -> int:
        return sum(1 for bookie in self.bookies if not bookie.read_only)


SETTINGS = web.AppKey("settings", AdminSettings)
CLUSTER = web.AppKey("cluster", ClusterAdmin)
#: Tenants and namespaces (``broker/meta/catalog.py``).
CATALOG = web.AppKey("catalog", CatalogRepository)
#: Topics' schemas and namespaces' strategies (``broker/schema_registry.py``), set with
#: the catalog.
SCHEMAS = web.AppKey("schemas", SchemaRegistry)
METRICS = web.AppKey("metrics", AdminMetrics)
#: The OpenAPI document, built once from the route table.
OPENAPI = web.AppKey("openapi", dict)
#: The cluster's in-process bookies' availability (absent with external bookies).
STORAGE_HEALTH: web.AppKey[Callable[[], StorageHealth]] = web.AppKey("storage_health")
