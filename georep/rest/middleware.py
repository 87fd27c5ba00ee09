"""Every request either server answers goes through here.

:func:`register` serves a route table: each handler behind the check that the request
may have its route (``auth.authorize``, and ``access.check_mutation`` for mutations).
:func:`answering` is the app's one middleware. It checks where the request comes from
(``access.check_request``), runs the handler, and turns what it raises into JSON
``{"reason": "..."}`` with the right status:

=========================================  ======  =========================================
raised                                     status  note
=========================================  ======  =========================================
``RestError`` subclasses                   its own with its headers (``WWW-Authenticate``)
                                                   and message, even a 500
a server's own error types                 its     the table the server passes in
aiohttp ``HTTPException`` (no route, 405,  its own headers kept (``Allow``), body as JSON
a body over ``client_max_size``)
anything else                              500     logged with its traceback, answered
                                                   without details
=========================================  ======  =========================================

Each answer is logged once on the server's logger: DEBUG for successes, INFO for
refusals (4xx), WARNING for 503, ERROR for 500. What a request carries is logged through
``access.printable``, so a ``%0A`` or a NUL in a path cannot forge a line or make the
log binary; bodies and tokens are never logged.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Sequence

from aiohttp import web
from aiohttp.typedefs import Middleware

from georep.rest.access import Access, check_mutation, check_request, printable
from georep.rest.auth import authorize
from georep.rest.errors import RestError
from georep.rest.json_io import BODY_BYTES_MAX, error_response
from georep.rest.routes import Handler, Route

ACCESS = web.AppKey("rest_access", Access)

#: (request, route template or "unmatched", status, seconds) after each answer.
Observer = Callable[[web.Request, str, int, float], None]
UNMATCHED_ROUTE = "unmatched"


def application(middleware: Middleware, body_bytes_max: int) -> web.Application:
    """An app with ``middleware`` (from :func:`answering`) taking bodies of at most
    ``body_bytes_max`` bytes."""
    app = web.Application(client_max_size=body_bytes_max, middlewares=[middleware])
    app[BODY_BYTES_MAX] = body_bytes_max
    return app


def register(app: web.Application, routes: Iterable[Route], access: Access) -> None:
    """Serve ``routes`` on ``app``, each behind its role, under ``access``."""
    app[ACCESS] = access
    for route in routes:
        app.router.add_route(route.method, route.path, _guarded(route))


def _guarded(route: Route) -> Handler:
    handler = route.handler

    async def check_then_handle(request: web.Request) -> web.StreamResponse:
        authorize(request.app[ACCESS], request.headers.get("Authorization"), route.role)
        if route.mutates:
            check_mutation(request)
        return await handler(request)

    check_then_handle.__name__ = handler.__name__
    check_then_handle.__doc__ = handler.__doc__
    return check_then_handle


def answering(
    log: logging.Logger,
    statuses: Sequence[tuple[type[Exception], int]] = (),
    observe: Observer | None = None,
    server_error: str = "internal error; the server's log has the details",
) -> Middleware:
    """The middleware of one server: ``statuses`` maps its own error types to statuses
    (the first match wins), ``observe`` counts each answer."""

    def status_of(error: Exception) -> int:
        if isinstance(error, RestError):
            return error.status
        for kind, status in statuses:
            if isinstance(error, kind):
                return status
        return 500

    @web.middleware
    async def answer(request: web.Request, handler: Handler) -> web.StreamResponse:
        started = time.perf_counter()
        try:
            check_request(request, request.app[ACCESS])
            response = await handler(request)
        except web.HTTPException as error:
            if error.status < 400:
                raise
            headers: dict[str, str] | None = {
                key: value
                for key, value in error.headers.items()
                if key.lower() not in ("content-type", "content-length")
            }
            response = error_response(error.status, error.reason or "error", headers)
        except Exception as error:  # every error becomes an answer; see the table above
            status = status_of(error)
            if status == 500 and not isinstance(error, RestError):
                log.exception("%s %s failed", request.method, printable(request.raw_path))
                response = error_response(500, server_error)
            else:
                headers = dict(error.headers) if isinstance(error, RestError) else None
                response = error_response(status, str(error) or type(error).__name__, headers)
        seconds = time.perf_counter() - started
        _log_answer(log, request, response, seconds)
        if observe is not None:
            resource = request.match_info.route.resource
            template = resource.canonical if resource is not None else UNMATCHED_ROUTE
            observe(request, template, response.status, seconds)
        return response

    return answer


def _log_answer(
    log: logging.Logger, request: web.Request, response: web.StreamResponse, seconds: float
) -> None:
    status = response.status
    level = (
        logging.DEBUG
        if status < 400
        else logging.INFO
        if status < 500
        else logging.WARNING
        if status == 503
        else logging.ERROR
    )
    if not log.isEnabledFor(level):
        return
    reason = ""
    if status >= 400 and isinstance(response, web.Response) and response.body:
        try:
            body = response.body
            text = body if isinstance(body, bytes | bytearray) else b""  # ours are bytes
            reason = printable(str(json.loads(bytes(text))["reason"]))
        except (ValueError, KeyError, TypeError):
            reason = ""
    log.log(
        level,
        "%s %s %d %.1f ms %s",
        request.method,
        printable(request.raw_path),
        status,
        seconds * 1000,
        reason,
    )
