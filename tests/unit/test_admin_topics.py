"""Admin REST topics and subscriptions over an in-memory ClusterAdmin: routing, names,
bodies, error mapping and the JSON shapes of stats."""

from __future__ import annotations

import pytest

from georep.broker import errors as broker_errors
from georep.broker.admin.cluster_admin import Unavailable
from georep.domain.position import Position
from georep.domain.topic_name import InvalidTopicName, TopicName
from tests.unit.test_admin_support import LEDGER_ID, MemoryCluster, running_admin

P = "/admin/v2/persistent/public/default"
ACK = "/admin/georep/v1/persistent/public/default"


@pytest.fixture
def sqlite_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path}/meta.db"


async def test_partitioned_topic_lifecycle(sqlite_url: str) -> None:
    async with running_admin(sqlite_url) as admin:
        assert (await admin.put(f"{P}/orders/partitions", 3)).status == 204
        assert (await admin.put(f"{P}/orders/partitions", 3)).status == 409
        assert (await admin.get(f"{P}/orders/partitions")).body == {"partitions": 3}
        assert (await admin.get(P)).body == [
            f"persistent://public/default/orders-partition-{index}" for index in range(3)
        ]
        admin.cluster.add_topic("persistent://public/default/plain")
        assert (await admin.get(f"{P}/plain/partitions")).body == {"partitions": 0}
        assert (await admin.get(f"{P}/nothing/partitions")).status == 404
        assert (await admin.delete(f"{P}/orders/partitions")).status == 204
        assert (await admin.delete(f"{P}/plain")).status == 204
        assert (await admin.get(P)).body == []
        assert (await admin.delete(f"{P}/plain")).status == 404


@pytest.mark.parametrize(
    ("path", "body", "status", "words"),
    [
        (f"{P}/orders-partition-1/partitions", 2, 400, "reserved"),
        (f"{P}/a-partition-x/partitions", 2, 400, "reserved"),
        (f"{P}/orders/partitions", 0, 400, "1..1024"),
        (f"{P}/orders/partitions", 1025, 400, "1..1024"),
        (f"{P}/orders/partitions", "3", 400, "integer"),
        (f"{P}/orders/partitions", None, 400, "needs a JSON body"),
        (f"{P}/{'t' * 97}/partitions", 2, 400, "at most 96"),
        ("/admin/v2/persistent/public/nope/orders/partitions", 2, 404, "does not exist"),
        ("/admin/v2/persistent/pub lic/default/orders/partitions", 2, 400, "may use only"),
    ],
)
async def test_create_partitioned_topic_refusals(
    sqlite_url: str, path: str, body: object, status: int, words: str
) -> None:
    async with running_admin(sqlite_url) as admin:
        answer = await (admin.put(path) if body is None else admin.put(path, body))
        assert answer.status == status
        assert words in answer.body["reason"]
        assert admin.cluster.calls == []


async def test_unknown_namespace_is_404_before_the_cluster_is_asked(sqlite_url: str) -> None:
    async with running_admin(sqlite_url) as admin:
        for method, path in [
            ("GET", "/admin/v2/persistent/public/nope"),
            ("GET", "/admin/v2/persistent/public/nope/t/stats"),
            ("DELETE", "/admin/v2/persistent/public/nope/t"),
            ("PUT", "/admin/v2/persistent/public/nope/t/subscription/s"),
            ("POST", "/admin/v2/persistent/nobody/default/t/subscription/s/skip/1"),
        ]:
            answer = await admin.request(method, path)
            assert answer.status == 404, (method, path)
            assert "does not exist" in answer.body["reason"]
        assert admin.cluster.calls == []


async def test_stats_shapes(sqlite_url: str) -> None:
    async with running_admin(sqlite_url) as admin:
        admin.cluster.add_topic("orders", entries=10)
        assert (
            await admin.put(f"{P}/orders/subscription/s", {"ledgerId": LEDGER_ID, "entryId": 2})
        ).status == 204
        ack = {"positions": [{"ledgerId": LEDGER_ID, "entryId": e} for e in (5, 6, 2, 9, 5)]}
        assert (await admin.post(f"{ACK}/orders/subscription/s/acknowledge", ack)).status == 204

        stats = (await admin.get(f"{P}/orders/stats")).body
        assert stats["storageSize"] == 100
        assert stats["subscriptions"]["s"]["msgBacklog"] == 10 - 3 - 3
        assert stats["subscriptions"]["s"]["type"] == "Exclusive"
        assert stats["subscriptions"]["s"]["consumers"] == []

        internal = (await admin.get(f"{P}/orders/internalStats")).body
        assert internal["numberOfEntries"] == 10
        assert internal["ledgers"] == [{"ledgerId": LEDGER_ID, "entries": 10, "size": 100}]
        cursor = internal["cursors"]["s"]
        assert cursor["markDeletePosition"] == f"{LEDGER_ID}:2"
        assert cursor["readPosition"] == f"{LEDGER_ID}:3"
        assert cursor["individuallyDeletedMessages"] == "[(7:4..7:5], (7:5..7:6], (7:8..7:9]]"

        last = (await admin.get(f"{P}/orders/lastMessageId")).body
        assert last == {"ledgerId": LEDGER_ID, "entryId": 9, "partitionIndex": -1}
        # the cluster got the positions sorted and without duplicates
        assert (
            "acknowledge",
            (TopicName.parse("orders"), "s", ((7, 2), (7, 5), (7, 6), (7, 9))),
        ) in admin.cluster.calls


async def test_subscription_operations(sqlite_url: str) -> None:
    async with running_admin(sqlite_url) as admin:
        admin.cluster.add_topic("orders", entries=10)
        sub = f"{P}/orders/subscription/s"
        assert (await admin.put(sub)).status == 204  # latest
        assert (await admin.put(sub)).status == 409
        assert (
            await admin.put(f"{P}/orders/subscription/e", {"ledgerId": -1, "entryId": -1})
        ).status == 204
        reset = {"ledgerId": LEDGER_ID, "entryId": 4, "partitionIndex": -1, "batchIndex": -1,
                 "excluded": False, "properties": {}}  # fmt: skip
        assert (await admin.post(f"{sub}/resetcursor", reset)).status == 204
        assert (await admin.post(f"{sub}/skip/2")).status == 204
        assert (await admin.post(f"{sub}/resetcursor/1700000000000")).status == 204
        assert (await admin.delete(sub)).status == 204
        assert (await admin.delete(sub)).status == 404
        assert (await admin.post(f"{sub}/skip/1")).status == 404
        topic = TopicName.parse("orders")
        assert [call for call in admin.cluster.calls if call[0] != "list_topics"] == [
            ("create_subscription", (topic, "s", None)),
            ("create_subscription", (topic, "s", None)),
            ("create_subscription", (topic, "e", Position.EARLIEST)),
            ("reset_cursor", (topic, "s", (LEDGER_ID, 4))),
            ("skip", (topic, "s", 2)),
            ("reset_cursor_by_time", (topic, "s", 1_700_000_000_000)),
            ("delete_subscription", (topic, "s")),
            ("delete_subscription", (topic, "s")),
            ("skip", (topic, "s", 1)),
        ]
        latest = {"ledgerId": Position.LATEST[0], "entryId": Position.LATEST[1]}
        assert (await admin.put(f"{P}/orders/subscription/l", latest)).status == 204


@pytest.mark.parametrize(
    ("method", "suffix", "body", "words"),
    [
        ("POST", "/resetcursor", None, "needs a JSON body"),
        ("POST", "/resetcursor", {"ledgerId": 1}, "missing entryId"),
        ("POST", "/resetcursor", {"ledgerId": 1, "entryId": -1}, "only the earliest"),
        ("POST", "/resetcursor", {"ledgerId": 1, "entryId": 2**63}, "must be -1.."),
        ("POST", "/resetcursor", {"ledgerId": 1, "entryId": 1, "excluded": True}, "excluded"),
        ("POST", "/resetcursor", {"ledgerId": 1, "entryId": 1, "batch": 1}, "unknown fields"),
        ("PUT", "", {"ledgerId": "1", "entryId": 1}, "integer"),
        ("POST", "/resetcursor/-5", ..., "decimal integer"),
        ("POST", "/resetcursor/99999999999999999999", ..., "decimal integer"),
        ("POST", "/skip/0", ..., "1.."),
        ("POST", "/skip/x", ..., "decimal integer"),
        ("POST", "/skip/\uff11", ..., "decimal integer"),  # a fullwidth digit one
    ],
)
async def test_subscription_refusals(
    sqlite_url: str, method: str, suffix: str, body: object, words: str
) -> None:
    async with running_admin(sqlite_url) as admin:
        admin.cluster.add_topic("orders", entries=3)
        path = f"{P}/orders/subscription/s{suffix}"
        answer = await (
            admin.request(method, path)
            if body in (None, ...)
            else admin.request(method, path, body)
        )
        assert answer.status == 400
        assert words in answer.body["reason"]
        assert admin.cluster.calls == []


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"positions": []}, "non-empty"),
        ({"positions": [{"ledgerId": 1}]}, "missing entryId"),
        ({"positions": [{"ledgerId": -1, "entryId": 0}]}, "0.."),
        ({"positions": [{"ledgerId": 1, "entryId": 0}] * 10_001}, "at most 10000"),
        ({"position": []}, "missing positions"),
    ],
)
async def test_acknowledge_refusals(sqlite_url: str, body: object, words: str) -> None:
    async with running_admin(sqlite_url) as admin:
        admin.cluster.add_topic("orders", entries=3)
        answer = await admin.post(f"{ACK}/orders/subscription/s/acknowledge", body)
        assert answer.status == 400
        assert words in answer.body["reason"]
        assert admin.cluster.calls == []


async def test_bad_subscription_name_is_400(sqlite_url: str) -> None:
    async with running_admin(sqlite_url) as admin:
        admin.cluster.add_topic("orders")
        long_name = "s" * 256
        answer = await admin.put(f"{P}/orders/subscription/{long_name}")
        assert answer.status == 400
        assert "at most 255" in answer.body["reason"]
        answer = await admin.put(f"{P}/orders/subscription/%07bell")
        assert answer.status == 400
        assert "unprintable" in answer.body["reason"]


class FailingCluster(MemoryCluster):
    def __init__(self, error: Exception | None = None, stats: object = None) -> None:
        super().__init__()
        self.error = error
        self.stats = stats

    async def topic_stats(self, topic: TopicName):
        if self.error is not None:
            raise self.error
        return self.stats


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (Unavailable("loading"), 503),
        (broker_errors.TopicNotFound("no topic"), 404),
        (broker_errors.SubscriptionNotFound("no sub"), 404),
        (broker_errors.ConsumerBusy("busy"), 409),
        (broker_errors.NotAllowed("no"), 409),
        (InvalidTopicName("bad"), 400),
        (broker_errors.ServiceNotReady("later"), 503),
        (RuntimeError("boom"), 500),
    ],
)
async def test_cluster_errors_map_to_statuses(
    sqlite_url: str, error: Exception, status: int
) -> None:
    async with running_admin(sqlite_url, cluster=FailingCluster(error)) as admin:
        answer = await admin.get(f"{P}/orders/stats")
        assert answer.status == status
        if status == 500:
            assert "boom" not in answer.body["reason"]  # internals stay in the log
        else:
            assert answer.body["reason"] == str(error)


async def test_malformed_cluster_document_is_500_naming_the_field(sqlite_url: str) -> None:
    stats = {"msgRateIn": 1.0, "msgThroughputIn": "fast"}
    async with running_admin(sqlite_url, cluster=FailingCluster(stats=stats)) as admin:
        answer = await admin.get(f"{P}/orders/stats")
        assert answer.status == 500
        assert "TopicStats: missing" in answer.body["reason"]
