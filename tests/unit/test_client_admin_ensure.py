"""``ClusterAdminClient.ensure_topic``: a replicator of every partition of a topic asks
for it when a gateway starts, all at once; they share one round of requests, and a
round that failed is asked again by the next caller. Against a fake admin served by
aiohttp."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from georep.client.admin import ClusterAdminClient
from georep.client.errors import AdminRequestFailed
from georep.domain.topic_name import TopicName

TOPIC = TopicName.parse("persistent://t/ns/orders")


@pytest.fixture
async def cluster():
    """A cluster holding the namespace, where ``orders`` is made partitioned by a PUT;
    every request is counted, and each is answered a little late so callers overlap."""
    seen: list[str] = []
    state = {"partitions": 0, "fail_put": False}

    async def handle(request: web.Request) -> web.Response:
        seen.append(f"{request.method} {request.path}")
        await asyncio.sleep(0.02)
        if request.path.endswith("/partitions"):
            if request.method == "PUT":
                if state["fail_put"]:
                    return web.Response(status=500, text="broker busy")
                state["partitions"] = await request.json()
                return web.Response(status=204)
            if not state["partitions"]:
                return web.json_response({"reason": "not found"}, status=404)
            return web.json_response({"partitions": state["partitions"]})
        return web.json_response({})  # the namespace's policies: it exists

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    server = TestServer(app)
    await server.start_server()
    client = ClusterAdminClient(str(server.make_url("")), cluster_name="B")
    yield client, seen, state
    await client.close()
    await server.close()


async def test_partitions_asking_together_share_one_round(cluster):
    client, seen, state = cluster
    await asyncio.gather(*(client.ensure_topic(TOPIC, 4) for _ in range(4)))
    assert state["partitions"] == 4
    assert sorted(seen) == [
        "GET /admin/v2/namespaces/t/ns",
        "GET /admin/v2/persistent/t/ns/orders/partitions",
        "PUT /admin/v2/persistent/t/ns/orders/partitions",
    ]
    await client.ensure_topic(TOPIC, 4)  # known now: no request
    assert len(seen) == 3


async def test_a_failed_round_fails_every_caller_and_the_next_asks_again(cluster):
    client, seen, state = cluster
    state["fail_put"] = True
    results = await asyncio.gather(
        *(client.ensure_topic(TOPIC, 4) for _ in range(3)), return_exceptions=True
    )
    assert all(isinstance(r, AdminRequestFailed) for r in results), results
    assert [s for s in seen if s.startswith("PUT")] == [
        "PUT /admin/v2/persistent/t/ns/orders/partitions"
    ]
    state["fail_put"] = False
    await client.ensure_topic(TOPIC, 4)
    assert (
        state["partitions"] == 4
        and seen.count("PUT /admin/v2/persistent/t/ns/orders/partitions") == 2
    )
