"""Namespace policies set over the admin REST drive the broker's topics, with pulsar-client.

- message TTL: messages older than the TTL are expired for every subscription (with or
  without a consumer, loaded or only a cursor): backlog 0, nothing delivered;
- retention: with no subscription, acknowledged data is kept while within the policy and
  trimmed (whole ledgers) once past it; a change reaches a loaded topic at a later pass.

The cluster runs its trim and expiry passes every fraction of a second; the tests poll
stats and pass counters and never assert how long anything took.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator

import pulsar
import pytest

from tests.harness.broker_cluster import (
    InProcessCluster,
    admin_call,
    open_client,
    receive_none,
    service_of,
)
from tests.harness.waiting import wait_for

pytestmark = pytest.mark.timeout(180)

EARLIEST = pulsar.InitialPosition.Earliest
MIB = 1024 * 1024
#: Entries per ledger of this cluster's topics, so that a test fills many ledgers.
ROLLOVER_ENTRIES = 100


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[InProcessCluster]:
    running = InProcessCluster(
        tmp_path_factory.mktemp("policies") / "cluster",
        admin_port=0,
        trim_interval_s=0.2,
        message_expiry_interval_s=0.2,
    )
    running.start()

    def small_ledgers(cluster) -> None:
        config = cluster.service.config
        config.managed_ledger_config = dataclasses.replace(
            config.managed_ledger_config, rollover_entries_max=ROLLOVER_ENTRIES
        )

    running.call(small_ledgers)
    yield running
    running.stop()
    assert running.errors == []


def call(cluster: InProcessCluster, method: str, path: str, body=None):
    return admin_call(cluster.admin_url, method, path, body)


def new_namespace(cluster: InProcessCluster, prefix: str) -> str:
    namespace = f"public/{prefix}-{uuid.uuid4().hex[:8]}"
    status, body = call(cluster, "PUT", f"/admin/v2/namespaces/{namespace}")
    assert status in (200, 204), body
    return namespace


def topic_stats(cluster: InProcessCluster, topic: str, kind: str = "stats") -> dict:
    status, body = call(
        cluster, "GET", "/admin/v2/persistent/" + topic.removeprefix("persistent://") + "/" + kind
    )
    assert status == 200, body
    return body


def passes_after(cluster: InProcessCluster, kind: str, count: int = 2) -> None:
    """Wait until ``count`` more passes of ``kind`` ("trim" or "expiry") have run: the
    last of them started after this call, so it read the policies as they are now."""
    start = cluster.call(lambda c: service_of(c).stats[f"{kind}_passes"])
    wait_for(lambda: cluster.call(lambda c: service_of(c).stats[f"{kind}_passes"]) >= start + count)


def test_message_ttl_expires_messages_for_every_subscription(cluster: InProcessCluster) -> None:
    namespace = new_namespace(cluster, "ttl")
    topic = f"persistent://{namespace}/orders"
    path = "/admin/v2/persistent/" + topic.removeprefix("persistent://")
    with open_client(cluster.url) as client:
        producer = client.create_producer(
            topic, batching_enabled=True, batching_max_messages=5, batching_max_publish_delay_ms=10
        )
        # "idle": a subscription whose consumer left; "cursor": created over REST, never
        # subscribed (only a cursor); "busy": a consumer is connected and does not receive
        client.subscribe(topic, "idle", initial_position=EARLIEST).close()
        assert call(cluster, "PUT", f"{path}/subscription/cursor")[0] in (200, 204)
        busy = client.subscribe(topic, "busy", initial_position=EARLIEST, receiver_queue_size=1)
        assert call(cluster, "POST", f"/admin/v2/namespaces/{namespace}/messageTTL", 1)[0] == 204
        assert call(cluster, "GET", f"/admin/v2/namespaces/{namespace}/messageTTL")[1] == 1

        for n in range(40):
            producer.send_async(f"m{n}".encode(), lambda *_: None)
        producer.flush()
        last = topic_stats(cluster, topic, "internalStats")["lastConfirmedEntry"]

        def all_expired() -> bool:
            subscriptions = topic_stats(cluster, topic)["subscriptions"]
            return all(
                subscriptions[name]["msgBacklog"] == 0
                and subscriptions[name]["markDeletePosition"] == last
                for name in ("idle", "cursor", "busy")
            )

        wait_for(all_expired, timeout_s=60)
        consumer = client.subscribe(topic, "idle")
        assert receive_none(consumer) == []  # nothing expired is delivered
        busy.close()

        # without a TTL nothing expires any more
        assert call(cluster, "DELETE", f"/admin/v2/namespaces/{namespace}/messageTTL")[0] == 204
        passes_after(cluster, "expiry")
        producer.send(b"kept")
        passes_after(cluster, "expiry")
        assert topic_stats(cluster, topic)["subscriptions"]["cursor"]["msgBacklog"] == 1
        assert consumer.receive(timeout_millis=10_000).data() == b"kept"
        consumer.close()
        producer.close()


def test_retention_without_subscriptions_keeps_data_within_the_limit(
    cluster: InProcessCluster,
) -> None:
    namespace = new_namespace(cluster, "retention")
    topic = f"persistent://{namespace}/log"
    retention = f"/admin/v2/namespaces/{namespace}/retention"
    keep_all = {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1}
    assert call(cluster, "POST", retention, keep_all)[0] == 204
    assert call(cluster, "GET", retention)[1] == keep_all
    sent = [f"m{n:04d}-".encode() + b"x" * 1000 for n in range(1_500)]
    with open_client(cluster.url) as client:
        producer = client.create_producer(
            topic, batching_enabled=False, block_if_queue_full=True, max_pending_messages=500
        )
        for payload in sent:
            producer.send_async(payload, lambda *_: None)
        producer.flush()
        producer.close()

    # unlimited retention: every ledger stays, though no subscription needs any
    passes_after(cluster, "trim")
    internal = topic_stats(cluster, topic, "internalStats")
    assert internal["numberOfEntries"] == len(sent)
    assert len(internal["ledgers"]) >= len(sent) // ROLLOVER_ENTRIES
    total_bytes = topic_stats(cluster, topic)["storageSize"]
    assert total_bytes > 1.4 * MIB

    # 1 MB: the oldest whole ledgers go at a later pass, the newest 1 MB stays
    limit = {"retentionTimeInMinutes": -1, "retentionSizeInMB": 1}
    assert call(cluster, "POST", retention, limit)[0] == 204
    wait_for(lambda: topic_stats(cluster, topic)["storageSize"] <= MIB, timeout_s=60)
    internal = topic_stats(cluster, topic, "internalStats")
    kept_bytes = topic_stats(cluster, topic)["storageSize"]
    largest_ledger = max(ledger["size"] for ledger in internal["ledgers"])
    assert kept_bytes > MIB - largest_ledger  # trimmed by whole ledgers, no more
    assert internal["numberOfEntries"] < len(sent)
    with open_client(cluster.url) as client:
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        kept = []
        while reader.has_message_available():
            kept.append(reader.read_next(timeout_millis=10_000).data())
        reader.close()
    assert kept == sent[len(sent) - len(kept) :]  # the newest, in order, none missing
    assert len(kept) == internal["numberOfEntries"]


def test_an_expiry_pass_does_bounded_work(cluster: InProcessCluster) -> None:
    """Driven by hand on a namespace without TTL: each pass reads at most its bound and
    moves the MDP that far; a clock before every publish time expires nothing."""
    namespace = new_namespace(cluster, "bounded")
    topic = f"persistent://{namespace}/t"
    with open_client(cluster.url) as client:
        client.subscribe(topic, "s", initial_position=EARLIEST).close()
        producer = client.create_producer(topic, batching_enabled=False)
        for n in range(25):
            producer.send_async(f"m{n}".encode(), lambda *_: None)
        producer.flush()
        producer.close()

    async def expire(cluster, now_ms: int):
        loaded = next(t for name, t in cluster.service.topics.items() if name == topic)
        loaded.expiry.entries_per_pass_max = 10
        horizon = await loaded.expiry.expire(1, now_ms)
        await loaded.subscriptions["s"].flush()
        return horizon, loaded.ledger.cursors["s"].backlog

    assert cluster.call(lambda c: expire(c, 0)) == (None, 25)  # all published after 0 + 1 s
    far_future_ms = 2**62
    backlogs = [cluster.call(lambda c: expire(c, far_future_ms))[1] for _ in range(4)]
    assert backlogs == [15, 5, 0, 0]
