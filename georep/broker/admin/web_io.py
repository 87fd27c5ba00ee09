"""Reading request bodies and writing JSON answers, the same way in every handler."""

from __future__ import annotations

import json
from typing import Any, Final

from aiohttp import web

from georep.broker.admin import bodies
from georep.broker.admin.cluster_admin import InvalidArgument
from georep.broker.admin.state import SETTINGS


class _NoBody:
    def __repr__(self) -> str:
        return "NO_BODY"


#: What :func:`read_json` returns for a request without a body (or with JSON ``null``).
NO_BODY: Final = _NoBody()


class BodyTooLarge(InvalidArgument):
    status = 413


async def read_json(request: web.Request, *, required: bool) -> Any:
    """The request's JSON body; :data:`NO_BODY` when there is none and ``required`` is
    False. The size limit is the app's ``client_max_size``: a larger declared length is
    refused before a byte is read, a larger actual body while reading."""
    limit = request.app[SETTINGS].request_body_bytes_max  # also the app's client_max_size
    if request.content_length is not None and request.content_length > limit:
        raise BodyTooLarge(f"the request body has {request.content_length} bytes; at most {limit}")
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise BodyTooLarge(f"the request body is larger than {limit} bytes") from None
    if not raw.strip():
        if required:
            raise InvalidArgument("this request needs a JSON body")
        return NO_BODY
    document = bodies.decode_json(raw, request.content_type)
    if document is None and not required:
        return NO_BODY
    return document


def json_response(document: Any, status: int = 200) -> web.Response:
    return web.Response(
        status=status,
        body=json.dumps(document, separators=(",", ":"), allow_nan=False).encode(),
        content_type="application/json",
    )


def no_content() -> web.Response:
    return web.Response(status=204)


def error_response(status: int, reason: str, headers: dict[str, str] | None = None) -> web.Response:
    response = json_response({"reason": reason}, status)
    if headers:
        response.headers.update(headers)
    return response
