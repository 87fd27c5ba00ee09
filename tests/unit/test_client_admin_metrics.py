"""The gateway's admin client reads the Prometheus page of every broker of a cluster: a
broker's page shows only the topics it owns. Fake brokers served by aiohttp; the one the
client is given lists them as Pulsar does (``GET /admin/v2/brokers/A``: host:port)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from georep.client.admin import ClusterAdminClient

Listing = Callable[[], web.Response]


class Brokers:
    """Fake brokers, each with its page and its answer to the broker list."""

    def __init__(self) -> None:
        self.servers: list[TestServer] = []

    async def start(self, page: str, listing: Listing) -> TestServer:
        async def metrics(_request: web.Request) -> web.Response:
            return web.Response(text=page)

        async def brokers(_request: web.Request) -> web.Response:
            return listing()

        app = web.Application()
        app.router.add_get("/metrics/", metrics)
        app.router.add_get("/admin/v2/brokers/A", brokers)
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        self.servers.append(server)
        return server

    def addresses(self) -> list[str]:
        return [f"127.0.0.1:{server.port}" for server in self.servers]


@pytest.fixture
async def brokers() -> AsyncIterator[Brokers]:
    fakes = Brokers()
    yield fakes
    for server in fakes.servers:
        await server.close()


async def metrics_text(server: TestServer) -> str:
    client = ClusterAdminClient(str(server.make_url("")), cluster_name="A")
    try:
        return await client.metrics_text()
    finally:
        await client.close()


async def test_every_listed_broker_page_is_read(brokers: Brokers) -> None:
    def listing() -> web.Response:
        return web.json_response(brokers.addresses())

    first = await brokers.start("owned_by_first 1\n", listing)
    await brokers.start("owned_by_second 1\n", listing)
    text = await metrics_text(first)
    assert "owned_by_first 1" in text and "owned_by_second 1" in text


async def test_a_refused_broker_list_reads_the_given_page_alone(brokers: Brokers) -> None:
    def refused() -> web.Response:
        return web.json_response({"reason": "superuser only"}, status=403)

    first = await brokers.start("owned_by_first 1\n", refused)
    await brokers.start("owned_by_second 1\n", refused)
    assert await metrics_text(first) == "owned_by_first 1\n"


async def test_the_broker_list_is_not_asked_at_every_read(brokers: Brokers) -> None:
    """Pulsar logs every refusal with a stack trace: a scan a second must not ask the
    listing a second, refused or not."""
    asked = {"refused": 0, "listing": 0}

    def refused() -> web.Response:
        asked["refused"] += 1
        return web.json_response({"reason": "superuser only"}, status=403)

    def listing() -> web.Response:
        asked["listing"] += 1
        return web.json_response(brokers.addresses()[1:])

    for answer in (refused, listing):
        server = await brokers.start(f"{answer.__name__} 1\n", answer)
        client = ClusterAdminClient(str(server.make_url("")), cluster_name="A")
        try:
            for _ in range(5):
                await client.metrics_text()
        finally:
            await client.close()
        assert asked[answer.__name__] == 1
