"""The errors a REST request is refused with. ``status`` is the HTTP status answered;
``headers`` go with the answer. Each server's own errors (the cluster admin's
``AdminError``, the gateway's ``PolicyError``) derive from :class:`RestError`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar


class RestError(Exception):
    status: ClassVar[int] = 500
    headers: ClassVar[Mapping[str, str]] = {}


class BadRequest(RestError):
    status = 400


class Unauthorized(RestError):
    """No valid token: "who are you?"."""

    status = 401
    headers = {"WWW-Authenticate": 'Bearer realm="georep"'}


class Forbidden(RestError):
    """A known caller that may not do this (a read-only token on a mutation), or a
    request the server refuses to take from where it came (a foreign Host or Origin)."""

    status = 403


class PayloadTooLarge(RestError):
    status = 413


class UnsupportedMediaType(RestError):
    status = 415
