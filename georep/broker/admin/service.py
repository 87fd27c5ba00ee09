"""Handlers that serve the service itself: health, metrics and the OpenAPI document."""

from __future__ import annotations

from aiohttp import web

from georep.broker.admin import metrics as admin_metrics
from georep.broker.admin.state import CATALOG, METRICS, OPENAPI, SETTINGS, STORAGE_HEALTH
from georep.rest.json_io import json_response

_HEALTH_TENANT = "public"


async def health(request: web.Request) -> web.Response:
    """200 while the metadata store answers (a MetadataUnavailable answers 503) and enough
    bookies take writes for a new ledger; every bookie is listed with why it is read-only.

    ``status``: ``ok``; ``degraded`` (some bookie read-only, an ensemble still writable);
    ``read-only`` with 503 (fewer writable bookies than an ensemble needs: the cluster
    stores no message until a disk has room again).
    """
    await request.app[CATALOG].get_tenant(_HEALTH_TENANT)
    body: dict[str, object] = {"status": "ok", "cluster": request.app[SETTINGS].cluster_name}
    report = request.app.get(STORAGE_HEALTH)
    if report is None:
        return json_response(body)
    storage = report()
    body["bookies"] = [bookie.to_json() for bookie in storage.bookies]
    if storage.writable_count < storage.ensemble_size:
        body["status"] = "read-only"
        return json_response(body, status=503)
    if storage.writable_count < len(storage.bookies):
        body["status"] = "degraded"
    return json_response(body)


async def metrics(request: web.Request) -> web.Response:
    response = web.Response(body=request.app[METRICS].render())
    response.headers["Content-Type"] = admin_metrics.CONTENT_TYPE
    return response


async def openapi(request: web.Request) -> web.Response:
    return json_response(request.app[OPENAPI])
