"""The gateway's admin client for subscription sync: how ``sync_subscription`` splits a
state over requests (counts and body bytes), how ``sync_state`` turns the answer into
tuples and ``SubscriptionState``, and what a refusal or a malformed answer raises; against
a fake admin served by aiohttp."""

from __future__ import annotations

import json

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from georep import limits
from georep.broker.admin import bodies
from georep.client import admin as admin_client
from georep.client.admin import ClusterAdminClient, SubscriptionState
from georep.client.errors import AdminRequestFailed
from georep.domain.position import Position
from georep.domain.topic_name import TopicName

TOPIC = TopicName.parse("persistent://t/ns/x")
SYNC_PATH = "/admin/georep/v1/persistent/t/ns/x/subscription/{subscription}/sync"
STATE_PATH = "/admin/georep/v1/persistent/t/ns/x/sync-state"


def pos(ledger_id: int, entry_id: int) -> dict[str, int]:
    return {"ledgerId": ledger_id, "entryId": entry_id}


def test_a_small_sync_is_one_body_with_everything() -> None:
    (body,) = admin_client._sync_bodies(
        Position(3, 4),
        [(Position(3, 6), Position(3, 7))],
        {Position(3, 9): [2, 0, 2]},
        replicated=True,
    )
    assert body == {
        "markDelete": pos(3, 4),
        "replicated": True,
        "ranges": [{"first": pos(3, 6), "last": pos(3, 7)}],
        "batches": [{**pos(3, 9), "ackedIndexes": [0, 2]}],
    }
    assert admin_client._sync_bodies(None, [], {}, replicated=False) == [{}]


def check_split(bodies_sent: list[dict], ranges, batches) -> None:
    """Every body is one the cluster takes, only the first carries the head, and
    together they carry everything."""
    for index, body in enumerate(bodies_sent):
        assert len(json.dumps(body)) <= limits.admin_request_body_bytes_max
        parsed = bodies.subscription_sync(body)
        assert len(body.get("ranges", ())) <= limits.subscription_sync_ranges_count_max
        if index:
            assert parsed.mark_delete is None and not parsed.replicated
    carried_ranges = [
        (
            (r["first"]["ledgerId"], r["first"]["entryId"]),
            (r["last"]["ledgerId"], r["last"]["entryId"]),
        )
        for body in bodies_sent
        for r in body.get("ranges", ())
    ]
    assert carried_ranges == list(ranges)
    carried: dict[tuple[int, int], set[int]] = {}
    for body in bodies_sent:
        for batch in body.get("batches", ()):
            carried.setdefault((batch["ledgerId"], batch["entryId"]), set()).update(
                batch["ackedIndexes"]
            )
    assert carried == {p: set(i) for p, i in batches.items()}


def test_many_ranges_and_batches_are_split_by_count() -> None:
    ranges = [(Position(5, 2 * n), Position(5, 2 * n)) for n in range(25_000)]
    batches = {Position(6, n): [0, 1] for n in range(2_500)}
    sent = admin_client._sync_bodies(Position(5, 0), ranges, batches, replicated=True)
    assert len(sent) >= 3 + 2
    assert sent[0]["markDelete"] == pos(5, 0) and sent[0]["replicated"] is True
    check_split(sent, ranges, batches)


def test_large_ids_and_a_huge_batch_are_split_by_bytes() -> None:
    big = 2**63 - 1
    ranges = [
        (Position(big - n, big), Position(big - n, big))
        for n in range(limits.subscription_sync_ranges_count_max)
    ]
    everything = list(range(limits.pulsar_batch_messages_count_max))
    batches = {Position(big, big): everything, Position(big, big - 1): everything}
    sent = admin_client._sync_bodies(None, ranges, batches, replicated=False)
    assert len(sent) > 2  # neither fits one body by count alone
    check_split(sent, ranges, batches)


STATE = {
    "lastPosition": pos(3, 9),
    "subscriptions": {
        "s": {
            "markDelete": pos(3, 1),
            "ranges": [{"first": pos(3, 3), "last": pos(4, 0)}],
            "batches": [{**pos(3, 2), "batchSize": 4, "ackedIndexes": [0, 3]}],
            "consumers": 2,
            "replicated": True,
            "type": "Key_Shared",
            "rangesTruncated": False,
            "batchesTruncated": True,
        },
        "idle": {
            "markDelete": pos(3, -1),
            "ranges": [],
            "batches": [],
            "consumers": 0,
            "replicated": False,
            "type": None,
        },
    },
}


@pytest.fixture
async def fake_admin():
    """A fake admin REST: answers from ``answers`` (path -> (status, document)) and
    records the bodies POSTed."""
    received: list[tuple[str, dict]] = []
    answers: dict[str, tuple[int, object]] = {}

    async def handle(request: web.Request) -> web.Response:
        if request.method == "POST":
            received.append((request.path, await request.json()))
        status, document = answers.get(request.path, (404, {"reason": "no such thing"}))
        if request.method == "POST" and status == 200:
            created = len(received) == 1
            document = {"markDelete": pos(3, len(received)), "rangesCount": 0, "created": created}
        return web.json_response(document, status=status)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    server = TestServer(app)
    await server.start_server()
    client = ClusterAdminClient(str(server.make_url("")), cluster_name="A")
    yield client, answers, received
    await client.close()
    await server.close()


async def test_sync_state_answers_tuples_and_subscription_states(fake_admin) -> None:
    client, answers, _ = fake_admin
    answers[STATE_PATH] = (200, STATE)
    state = await client.sync_state(TOPIC)
    assert state["last"] == (3, 9)
    assert state["subscriptions"]["s"] == SubscriptionState(
        mark_delete=Position(3, 1),
        ranges=((Position(3, 3), Position(4, 0)),),
        batches={Position(3, 2): (4, frozenset({0, 3}))},
        consumers=2,
        replicated=True,
        sub_type="Key_Shared",
        ranges_truncated=False,
        batches_truncated=True,
    )
    idle = state["subscriptions"]["idle"]
    assert (idle.mark_delete, idle.sub_type, idle.ranges, idle.batches) == ((3, -1), None, (), {})


@pytest.mark.parametrize(
    "document",
    [
        {"subscriptions": {}},
        {"lastPosition": "3:9", "subscriptions": {}},
        {"lastPosition": None, "subscriptions": {"s": {"markDelete": pos(1, 1)}}},
        [],
    ],
)
async def test_a_malformed_sync_state_is_a_link_error(fake_admin, document) -> None:
    client, answers, _ = fake_admin
    answers[STATE_PATH] = (200, document)
    with pytest.raises(AdminRequestFailed) as failed:
        await client.sync_state(TOPIC)
    assert failed.value.status == 200 and not failed.value.retriable


async def test_refusals_raise_with_their_status(fake_admin) -> None:
    client, answers, _ = fake_admin
    with pytest.raises(AdminRequestFailed) as missing:
        await client.sync_state(TOPIC)
    assert missing.value.status == 404 and not missing.value.retriable
    answers[SYNC_PATH.format(subscription="s")] = (400, {"reason": "batch 3:2 holds 4 messages"})
    with pytest.raises(AdminRequestFailed) as refused:
        await client.sync_subscription(TOPIC, "s", batches={(3, 2): [7]})
    assert refused.value.status == 400 and "holds 4 messages" in str(refused.value)
    answers[STATE_PATH] = (503, {"reason": "fenced"})
    with pytest.raises(AdminRequestFailed) as unavailable:
        await client.sync_state(TOPIC)
    assert unavailable.value.retriable


async def test_sync_subscription_sends_every_part_and_merges_the_answers(fake_admin) -> None:
    client, answers, received = fake_admin
    path = SYNC_PATH.format(subscription="a b")  # quoted on the way, as the server sees it
    answers[path] = (200, None)
    ranges = [((5, 2 * n), (5, 2 * n)) for n in range(12_000)]
    answer = await client.sync_subscription(TOPIC, "a b", mark_delete=(5, 0), ranges=ranges)
    assert answer == {"markDelete": pos(3, 2), "rangesCount": 0, "created": True}
    assert [p for p, _ in received] == [path] * 2
    assert received[0][1]["markDelete"] == pos(5, 0) and "markDelete" not in received[1][1]
    assert sum(len(body["ranges"]) for _, body in received) == 12_000
