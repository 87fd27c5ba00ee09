"""The HTTP server both RESTs run on: aiohttp's, with two of its defaults changed.

- **Nothing a client sent is echoed or logged.** When aiohttp cannot parse a request
  (a header with a control character, ``Authorization : Bearer ...``), its own error
  path answers 400 with the parser's message and logs it with a traceback; that message
  quotes the offending line, so ``Authorization: Bearer <token>\\x01`` put a valid token
  into the log and into the answer. :class:`RestRunner` makes every connection use
  :class:`_RedactingRequestHandler`, which answers such a request with the status and its
  phrase only and logs one line naming the peer and the error's type, never its text.
- **Connections that send nothing are closed**: one without a whole request for
  ``limits.rest_connection_idle_s_max`` (idle, or a request head trickled in byte by byte)
  is closed, so a slow client holds a socket for seconds, not minutes.

Example: ``GET / HTTP/1.1\\r\\nAuthorization: Bearer s3cret\\x01\\r\\n\\r\\n`` is answered
``400 Bad Request`` with the body ``400 Bad Request``, and the log says
``refused an unparsable request from 127.0.0.1: HTTP 400 (BadHttpMessage)``.
"""

from __future__ import annotations

import logging
from http import HTTPStatus

from aiohttp import web
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest
from aiohttp.web_response import StreamResponse

from georep import limits

log = logging.getLogger("georep.rest")


class _RedactingRequestHandler(RequestHandler):
    """aiohttp's per-connection handler, whose error answers and logs say no more than
    the status: the request's own bytes stay out of both."""

    __slots__ = ()

    def handle_error(
        self,
        request: BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> StreamResponse:
        if status == HTTPStatus.INTERNAL_SERVER_ERROR:
            # A bug in a handler (our middleware answers every known error itself).
            log.error("request from %s failed", request.remote, exc_info=exc)
        else:
            log.warning(
                "refused an unparsable request from %s: HTTP %d (%s)",
                request.remote,
                status,
                type(exc).__name__ if exc is not None else "no detail",
            )
        phrase = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else ""
        response = web.Response(status=status, text=f"{status} {phrase}".strip())
        response.force_close()
        return response


class _RedactingServer(web.Server):
    __slots__ = ()

    def __call__(self) -> RequestHandler:
        return _RedactingRequestHandler(self, loop=self._loop, **self._kwargs)


class RestRunner(web.AppRunner):
    """``web.AppRunner`` for a REST app: redacted parse errors, bounded idle connections,
    no access log (the middleware logs one escaped line per answer)."""

    def __init__(
        self, app: web.Application, *, idle_s: float = limits.rest_connection_idle_s_max
    ) -> None:
        super().__init__(app, access_log=None, keepalive_timeout=idle_s)

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        # The same server, making redacting handlers: aiohttp offers no public hook for
        # its parse-error answer, and a subclass with no state of its own is safe to swap.
        server.__class__ = _RedactingServer
        return server
