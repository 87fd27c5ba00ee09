"""The georep subscription-sync body (``bodies.subscription_sync``), table-driven, and the
two sync routes over the admin app with the in-memory stand-in cluster: names checked,
bodies refused before the cluster is asked, answers checked against their shapes."""

from __future__ import annotations

from typing import Any

import pytest

from georep import limits
from georep.broker.admin import bodies, shapes
from georep.broker.admin.cluster_admin import (
    InvalidArgument,
    SubscriptionSyncResult,
    SyncState,
)
from georep.domain.position import Position
from georep.domain.topic_name import TopicName
from tests.unit.test_admin_support import LEDGER_ID, READ_TOKEN, running_admin

_I64_MAX = 2**63 - 1
SYNC = "/admin/georep/v1/persistent/public/default"


def pos(ledger_id: int, entry_id: int) -> dict[str, int]:
    return {"ledgerId": ledger_id, "entryId": entry_id}


def span(first: tuple[int, int], last: tuple[int, int]) -> dict:
    return {"first": pos(*first), "last": pos(*last)}


@pytest.mark.parametrize(
    ("document", "mark_delete", "ranges", "batches", "replicated"),
    [
        ({}, None, (), {}, False),
        ({"markDelete": None, "ranges": None, "batches": None, "replicated": None},
         None, (), {}, False),
        ({"markDelete": pos(3, -1)}, (3, -1), (), {}, False),
        ({"markDelete": pos(_I64_MAX, _I64_MAX)}, (_I64_MAX, _I64_MAX), (), {}, False),
        ({"replicated": True}, None, (), {}, True),
        # sorted; overlapping and touching-in-a-ledger ranges joined, others kept apart
        ({"ranges": [span((5, 0), (5, 3)), span((3, 1), (3, 1)), span((5, 4), (5, 6))]},
         None, (((3, 1), (3, 1)), ((5, 0), (5, 6))), {}, False),
        ({"ranges": [span((3, 0), (6, 2)), span((4, 9), (5, 0))]},
         None, (((3, 0), (6, 2)),), {}, False),
        ({"ranges": [span((3, 0), (3, 9)), span((4, 0), (4, 1))]},
         None, (((3, 0), (3, 9)), ((4, 0), (4, 1))), {}, False),
        # a batch named twice: the union of its indexes
        ({"batches": [{**pos(3, 4), "ackedIndexes": [0, 2]},
                      {**pos(3, 4), "ackedIndexes": [2, 5]},
                      {**pos(3, 7), "ackedIndexes": []}]},
         None, (), {(3, 4): frozenset({0, 2, 5}), (3, 7): frozenset()}, False),
    ],
)  # fmt: skip
def test_sync_body_accepts(document, mark_delete, ranges, batches, replicated) -> None:
    sync = bodies.subscription_sync(document)
    assert (sync.mark_delete, sync.ranges, dict(sync.batches), sync.replicated) == (
        mark_delete,
        ranges,
        batches,
        replicated,
    )


_BATCH_INDEX_MAX = limits.pulsar_batch_messages_count_max - 1


@pytest.mark.parametrize(
    ("document", "reason"),
    [
        (None, "must be a JSON object"),
        ([], "must be a JSON object"),
        ({"markdelete": pos(1, 1)}, "unknown fields markdelete"),
        ({"markDelete": pos(-1, -1)}, "markDelete.ledgerId must be 0.."),
        ({"markDelete": pos(3, -2)}, "markDelete.entryId must be -1.."),
        ({"markDelete": {"ledgerId": 3}}, "missing entryId"),
        ({"markDelete": {**pos(3, 1), "batchIndex": 0}}, "unknown fields batchIndex"),
        ({"markDelete": pos(3, True)}, "must be an integer"),
        ({"markDelete": pos(2**63, 0)}, "must be 0.."),
        ({"markDelete": "3:4"}, "must be a JSON object"),
        ({"ranges": span((3, 1), (3, 1))}, "ranges must be a list"),
        ({"ranges": [span((3, 5), (3, 4))]}, "ranges[0]: last 3:4 is before first 3:5"),
        ({"ranges": [span((3, 1), (3, 1)), span((4, 0), (3, 9))]}, "ranges[1]: last 3:9"),
        ({"ranges": [span((3, -1), (3, 4))]}, "ranges[0].first.entryId must be 0.."),
        ({"ranges": [{"first": pos(3, 1)}]}, "ranges[0] is missing last"),
        ({"ranges": [span((3, 1), (3, 2))] * (limits.subscription_sync_ranges_count_max + 1)},
         f"at most {limits.subscription_sync_ranges_count_max}"),
        ({"batches": [{**pos(3, 1)}]}, "batches[0] is missing ackedIndexes"),
        ({"batches": [{**pos(3, 1), "ackedIndexes": "0,1"}]}, "ackedIndexes must be a list"),
        ({"batches": [{**pos(3, 1), "ackedIndexes": [-1]}]}, "ackedIndexes[0] must be 0.."),
        ({"batches": [{**pos(3, 1), "ackedIndexes": [_BATCH_INDEX_MAX + 1]}]},
         f"must be 0..{_BATCH_INDEX_MAX}"),
        ({"batches": [{**pos(3, 1), "ackedIndexes": [1.0]}]}, "must be an integer"),
        ({"batches": [{**pos(3, -1), "ackedIndexes": [0]}]}, "batches[0].entryId must be 0.."),
        ({"batches": [{**pos(3, 1), "ackedIndexes": [0]}]
          * (limits.subscription_sync_batches_count_max + 1)},
         f"at most {limits.subscription_sync_batches_count_max}"),
        ({"replicated": "true"}, "replicated must be true or false"),
        ({"replicated": 1}, "replicated must be true or false"),
    ],
)  # fmt: skip
def test_sync_body_refuses(document, reason: str) -> None:
    with pytest.raises(InvalidArgument) as refused:
        bodies.subscription_sync(document)
    assert reason in str(refused.value)


def test_every_index_of_the_largest_batch_is_accepted() -> None:
    indexes = list(range(limits.pulsar_batch_messages_count_max))
    sync = bodies.subscription_sync({"batches": [{**pos(3, 1), "ackedIndexes": indexes}]})
    assert sync.batches[Position(3, 1)] == frozenset(indexes)


def test_shapes_of_the_sync_documents() -> None:
    state: dict[str, Any] = {
        "lastPosition": None,
        "subscriptions": {
            "s": {
                "markDelete": pos(3, -1),
                "ranges": [span((3, 1), (3, 2))],
                "batches": [{**pos(3, 4), "batchSize": 3, "ackedIndexes": [1]}],
                "consumers": 0,
                "replicated": False,
                "type": None,
            }
        },
    }
    shapes.check(SyncState, state)
    state["subscriptions"]["s"]["type"] = 3
    with pytest.raises(shapes.ShapeError):
        shapes.check(SyncState, state)
    shapes.check(
        SubscriptionSyncResult, {"markDelete": pos(3, 1), "rangesCount": 0, "created": True}
    )
    with pytest.raises(shapes.ShapeError):
        shapes.check(SubscriptionSyncResult, {"markDelete": pos(3, 1), "created": True})


async def test_sync_routes_over_the_admin_app(tmp_path) -> None:
    async with running_admin(f"sqlite:///{tmp_path}/meta.db", tokens=True) as admin:
        await admin.put("/admin/v2/tenants/public", {"allowedClusters": ["A"]})
        await admin.put("/admin/v2/namespaces/public/default")
        admin.cluster.add_topic("persistent://public/default/t", entries=6)

        answer = await admin.post(
            f"{SYNC}/t/subscription/s/sync",
            {"markDelete": pos(LEDGER_ID, 1), "ranges": [span((LEDGER_ID, 3), (LEDGER_ID, 4))],
             "replicated": True},
        )  # fmt: skip
        assert answer.status == 200, answer.body
        assert answer.body == {"markDelete": pos(LEDGER_ID, 1), "rangesCount": 2, "created": True}
        call = admin.cluster.calls[-1]
        assert call == (
            "sync_subscription",
            (TopicName.parse("persistent://public/default/t"), "s", (LEDGER_ID, 1),
             (((LEDGER_ID, 3), (LEDGER_ID, 4)),), True),
        )  # fmt: skip

        answer = await admin.get(f"{SYNC}/t/sync-state")
        assert answer.status == 200, answer.body
        assert answer.body["lastPosition"] == pos(LEDGER_ID, 5)
        assert answer.body["subscriptions"]["s"]["replicated"] is True
        read_only = await admin.get(f"{SYNC}/t/sync-state", token=READ_TOKEN)
        assert read_only.status == 200

        calls = len(admin.cluster.calls)
        refused = [
            (f"{SYNC}/t/subscription/georep.sync/sync", {}, 400, "gateway's own"),
            (f"{SYNC}/t/subscription/s/sync", {"ranges": [span((7, 2), (7, 1))]}, 400, "before"),
            (f"{SYNC}/t/subscription/s/sync", {"nope": 1}, 400, "unknown fields"),
            (f"{SYNC}/missing/subscription/s/sync", {}, 404, "does not exist"),
            ("/admin/georep/v1/persistent/public/nowhere/t/subscription/s/sync", {}, 404,
             "namespace"),
        ]  # fmt: skip
        for path, body, status, reason in refused:
            answer = await admin.post(path, body)
            assert answer.status == status and reason in answer.body["reason"], (path, answer)
        assert len(admin.cluster.calls) == calls + 1  # only the missing topic reached it
        answer = await admin.post(f"{SYNC}/t/subscription/s/sync", {}, token=READ_TOKEN)
        assert answer.status == 403
        assert (await admin.get(f"{SYNC}/missing/sync-state")).status == 404
