"""Typed keys of what the admin app holds: settings, the cluster, the metadata store and
the metrics. Handlers read them as ``request.app[CLUSTER]``; the store is set by the app's
cleanup context once it is open, and is absent before that."""

from __future__ import annotations

from aiohttp import web

from georep.broker.admin.cluster_admin import ClusterAdmin
from georep.broker.admin.metrics import AdminMetrics
from georep.broker.admin.settings import AdminSettings
from georep.storage.meta.store import MetadataStore

SETTINGS = web.AppKey("settings", AdminSettings)
CLUSTER = web.AppKey("cluster", ClusterAdmin)
STORE = web.AppKey("metadata_store", MetadataStore)
METRICS = web.AppKey("metrics", AdminMetrics)
#: The OpenAPI document, built once from the route table.
OPENAPI = web.AppKey("openapi", dict)
