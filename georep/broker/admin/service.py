"""Handlers that serve the service itself: health, metrics and the OpenAPI document."""

from __future__ import annotations

from aiohttp import web

from georep.broker.admin import metrics as admin_metrics
from georep.broker.admin.state import METRICS, OPENAPI, SETTINGS, STORE
from georep.rest.json_io import json_response

_HEALTH_TENANT = "public"


async def health(request: web.Request) -> web.Response:
    """200 while the metadata store answers (a MetadataUnavailable answers 503)."""
    await request.app[STORE].get_tenant(_HEALTH_TENANT)
    return json_response({"status": "ok", "cluster": request.app[SETTINGS].cluster_name})


async def metrics(request: web.Request) -> web.Response:
    response = web.Response(body=request.app[METRICS].render())
    response.headers["Content-Type"] = admin_metrics.CONTENT_TYPE
    return response


async def openapi(request: web.Request) -> web.Response:
    return json_response(request.app[OPENAPI])
