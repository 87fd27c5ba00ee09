"""Request bodies in, JSON answers out, the same way on every route of every server.

A body is read only when its declared length is within the server's limit (413
otherwise, before a byte is read; a body that grows past the limit while being read is
refused the same way). It must be ``application/json`` (415: a browser cannot send that
cross-site without asking first), UTF-8, and JSON without ``NaN``/``Infinity`` and
without an object naming the same key twice (which JSON parsers resolve differently: the
last wins in one, the first in another). Every refusal is a ``RestError`` whose message
says what was wrong; nothing is stored before the body is whole and checked.
"""

from __future__ import annotations

import collections
import json
from typing import Any, Final

from aiohttp import web

from georep import limits
from georep.rest.errors import BadRequest, PayloadTooLarge, UnsupportedMediaType

JSON = "application/json"


class _NoBody:
    def __repr__(self) -> str:
        return "NO_BODY"


#: What :func:`read_json` returns for a request without a body (or with JSON ``null``).
NO_BODY: Final = _NoBody()

#: The app's body limit in bytes (also its ``client_max_size``), set by ``register``.
BODY_BYTES_MAX = web.AppKey("rest_body_bytes_max", int)


def media_type(request: web.BaseRequest) -> str | None:
    """The request's media type as sent (lower case, no parameters); None when absent."""
    header = request.headers.get("Content-Type")
    if header is None:
        return None
    return header.split(";", 1)[0].strip().lower()


async def read_json(request: web.Request, *, required: bool) -> Any:
    """The request's JSON body; :data:`NO_BODY` when there is none and ``required`` is
    False."""
    limit = request.app[BODY_BYTES_MAX]
    if request.content_length is not None and request.content_length > limit:
        raise PayloadTooLarge(
            f"the request body has {request.content_length} bytes; at most {limit}"
        )
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise PayloadTooLarge(f"the request body is larger than {limit} bytes") from None
    if not raw.strip():
        if required:
            raise BadRequest("this request needs a JSON body")
        return NO_BODY
    document = decode_json(raw, media_type(request))
    if document is None and not required:
        return NO_BODY
    return document


def decode_json(raw: bytes, content_type: str | None) -> Any:
    """The JSON document in ``raw``, sent as ``content_type``."""
    if content_type != JSON:
        raise UnsupportedMediaType(
            f"a request body must be {JSON}, got {content_type or 'no Content-Type'}"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BadRequest("the request body is not UTF-8") from None
    try:
        return json.loads(
            text,
            parse_constant=_refuse_constant,
            parse_int=_bounded_int,
            object_pairs_hook=_refuse_duplicate_keys,
        )
    except json.JSONDecodeError as error:
        raise BadRequest(f"the request body is not valid JSON: {error}") from None
    except RecursionError:  # the parser's own bound on nesting
        raise BadRequest("the request body nests too deeply") from None


def _bounded_int(text: str) -> int:
    """An integer of the body; one too long for any field georep takes is refused before
    ``int()`` (which gives up past 4,300 digits with a ValueError, a 500 otherwise)."""
    if len(text) > limits.json_integer_chars_max:
        raise BadRequest(
            f"the request body holds an integer of {len(text)} characters"
            f" (at most {limits.json_integer_chars_max})"
        )
    return int(text)


def _refuse_constant(name: str) -> Any:
    raise BadRequest(f"{name} is not a valid JSON number here")


def _refuse_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    document = dict(pairs)
    if len(document) != len(pairs):
        named = collections.Counter(key for key, _ in pairs)
        twice = sorted(key for key, count in named.items() if count > 1)
        raise BadRequest(f"the request body names {twice} more than once in one object")
    return document


def json_response(document: Any, status: int = 200) -> web.Response:
    return web.Response(
        status=status,
        body=json.dumps(document, separators=(",", ":"), allow_nan=False).encode(),
        content_type=JSON,
    )


def no_content() -> web.Response:
    return web.Response(status=204)


def error_response(status: int, reason: str, headers: dict[str, str] | None = None) -> web.Response:
    response = json_response({"reason": reason}, status)
    if headers:
        response.headers.update(headers)
    return response
