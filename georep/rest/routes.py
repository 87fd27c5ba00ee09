"""One row of a route table: what the app needs to serve a route, and what the OpenAPI
document says of it. A server lists its routes in one table; ``app.register`` serves
exactly those, ``openapi.build`` documents exactly those, and a test checks the two
agree."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from georep.rest.auth import Role

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class QueryParameter:
    name: str
    description: str
    schema: Mapping[str, Any]


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    handler: Handler
    role: Role
    summary: str
    tag: str = "default"
    #: Component schema name of the JSON body; None for no body.
    request: str | None = None
    request_required: bool = True
    #: Component schema name of the 200 answer; None means 204 No Content.
    response: str | None = None
    #: The answer's media type when it is not JSON.
    response_media_type: str = "application/json"
    query: tuple[QueryParameter, ...] = ()

    @property
    def operation_id(self) -> str:
        return self.handler.__name__

    @property
    def mutates(self) -> bool:
        return self.method not in ("GET", "HEAD", "OPTIONS")
