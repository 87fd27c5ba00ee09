"""Every answer the admin REST gives goes through here: errors become JSON, counted.

``answer`` is the app's one middleware. It runs the handler and turns what it raises
into ``{"reason": "..."}`` with the right status:

=========================================  ======  =========================================
raised                                     status  note
=========================================  ======  =========================================
``AdminError`` subclasses                  its own 400/401/403/404/409/413/415/503
aiohttp ``HTTPException`` (no route, 405)  its own headers kept (``Allow``)
broker ``InvalidTopicName``                400
broker ``TopicNotFound``,                  404
``SubscriptionNotFound``
broker ``TopicExists``, ``ConsumerBusy``,  409
``ProducerBusy``, ``NotAllowed``
broker ``ServiceNotReady``,                503     retry
``PersistenceError``, ``TooManyRequests``
storage ``MetadataUnavailable``            503     retry
storage ``BadVersion``                     409     a CAS lost past its retries
storage ``InvalidArgument``                400     the store refused a value
``ShapeError``                             500     the cluster broke its contract: a bug
anything else                              500     logged with its traceback
=========================================  ======  =========================================

User errors are logged at INFO without the body (it may hold anything); tokens are never
logged. :func:`guarded` wraps each handler with the role check of its route.
"""

from __future__ import annotations

import logging
import time

from aiohttp import web

from georep.broker import errors as broker_errors
from georep.broker.admin.auth import Role, Unauthorized, authorize
from georep.broker.admin.cluster_admin import AdminError
from georep.broker.admin.metrics import UNMATCHED_ROUTE
from georep.broker.admin.routes import Handler
from georep.broker.admin.shapes import ShapeError
from georep.broker.admin.state import METRICS, SETTINGS
from georep.broker.admin.web_io import error_response
from georep.storage.errors import BadVersion, MetadataUnavailable
from georep.storage.errors import InvalidArgument as StorageInvalidArgument

log = logging.getLogger("georep.broker.admin")

_BROKER_STATUS: tuple[tuple[type[Exception], int], ...] = (
    (broker_errors.InvalidTopicName, 400),
    (broker_errors.TopicNotFound, 404),
    (broker_errors.SubscriptionNotFound, 404),
    (broker_errors.TopicExists, 409),
    (broker_errors.ConsumerBusy, 409),
    (broker_errors.ProducerBusy, 409),
    (broker_errors.NotAllowed, 409),
    (broker_errors.ServiceNotReady, 503),
    (broker_errors.PersistenceError, 503),
    (broker_errors.TooManyRequests, 503),
    (MetadataUnavailable, 503),
    (BadVersion, 409),
    (StorageInvalidArgument, 400),
)

_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="georep-admin"'}


@web.middleware
async def answer(request: web.Request, handler: Handler) -> web.StreamResponse:
    started = time.perf_counter()
    try:
        response = await handler(request)
    except web.HTTPException as error:
        if error.status < 400:
            raise
        headers = {
            key: value
            for key, value in error.headers.items()
            if key.lower() not in ("content-type", "content-length")
        }
        response = error_response(error.status, error.reason or "error", headers)
    except Exception as error:  # every error becomes an answer; see the table above
        response = _error_answer(request, error)
    route = request.match_info.route.resource
    template = route.canonical if route is not None else UNMATCHED_ROUTE
    request.app[METRICS].observe(
        request.method, template, response.status, time.perf_counter() - started
    )
    return response


def _error_answer(request: web.Request, error: Exception) -> web.Response:
    status = _status_of(error)
    where = f"{request.method} {request.path}"
    if status == 500:
        if isinstance(error, ShapeError):
            log.error("admin %s: the cluster returned a malformed document: %s", where, error)
            return error_response(500, f"the cluster returned a malformed document: {error}")
        log.exception("admin %s failed", where)
        return error_response(500, "internal error; the admin log has the details")
    if status == 503:
        log.warning("admin %s: unavailable: %s", where, error)
    else:
        log.info("admin %s: %d %s", where, status, error)
    headers = _CHALLENGE if isinstance(error, Unauthorized) else None
    return error_response(status, str(error) or type(error).__name__, headers)


def _status_of(error: Exception) -> int:
    if isinstance(error, AdminError):
        return error.status
    for kind, status in _BROKER_STATUS:
        if isinstance(error, kind):
            return status
    return 500


def guarded(handler: Handler, role: Role) -> Handler:
    """``handler`` behind the check that the request's token has ``role``."""

    async def check_then_handle(request: web.Request) -> web.StreamResponse:
        authorize(request.app[SETTINGS], request.headers.get("Authorization"), role)
        return await handler(request)

    check_then_handle.__name__ = handler.__name__
    check_then_handle.__doc__ = handler.__doc__
    return check_then_handle
