"""The admin REST over the real broker (``topic_admin.BrokerAdmin``), with pulsar-client.

The admin app's own tests use a stand-in cluster; these check that the broker keeps the
``ClusterAdmin`` contract: partitioned topics created over REST are served to the client,
stats and internal stats have their promised shapes, cursor operations move a live
subscription, and deletes refuse while clients are connected.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pulsar
import pytest

from tests.harness.broker_cluster import (
    InProcessCluster,
    open_client,
    receive_all,
    receive_none,
    unique_topic,
)

pytestmark = pytest.mark.timeout(120)

EARLIEST = pulsar.InitialPosition.Earliest
#: The cluster's stats rate window: short, so rates fall back to 0 soon after traffic.
RATE_WINDOW_S = 2


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[InProcessCluster]:
    running = InProcessCluster(
        tmp_path_factory.mktemp("admin") / "cluster",
        admin_port=0,
        stats_rate_window_s=RATE_WINDOW_S,
    )
    running.start()
    yield running
    running.stop()
    assert running.errors == []


def call(cluster: InProcessCluster, method: str, path: str, body=None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        cluster.admin_url + path,
        data=data,
        method=method,
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            raw = response.read()
            return response.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as error:
        raw = error.read()
        return error.code, json.loads(raw) if raw else None


def rest_path(topic: str) -> str:
    return "/admin/v2/persistent/" + topic.removeprefix("persistent://")


def test_health(cluster: InProcessCluster) -> None:
    status, body = call(cluster, "GET", "/health")
    assert status == 200 and body["status"] == "ok"
    assert len(body["bookies"]) == 3
    assert all(not bookie["read_only"] for bookie in body["bookies"])


def test_partitioned_topic_created_over_rest_is_served(cluster: InProcessCluster) -> None:
    topic = unique_topic("rest")
    assert call(cluster, "PUT", rest_path(topic) + "/partitions", 2)[0] in (200, 204)
    assert call(cluster, "PUT", rest_path(topic) + "/partitions", 2)[0] == 409
    assert call(cluster, "GET", rest_path(topic) + "/partitions")[1]["partitions"] == 2
    with open_client(cluster.url) as client:
        assert len(client.get_topic_partitions(topic)) == 2
        consumer = client.subscribe(topic, "s", initial_position=EARLIEST)
        producer = client.create_producer(topic)
        for n in range(6):
            producer.send(f"m{n}".encode(), partition_key=f"k{n}")
        receive_all(consumer, 6)
        assert call(cluster, "DELETE", rest_path(topic) + "/partitions")[0] == 409  # in use
        consumer.close()
        producer.close()
    status, listed = call(cluster, "GET", "/admin/v2/persistent/public/default")
    assert status == 200 and f"{topic}-partition-0" in listed
    assert call(cluster, "DELETE", rest_path(topic) + "/partitions")[0] == 204
    assert call(cluster, "GET", rest_path(topic) + "/partitions")[0] == 404


def test_stats_and_cursor_operations_move_a_live_subscription(cluster: InProcessCluster) -> None:
    topic = unique_topic("ops")
    with open_client(cluster.url) as client:
        producer = client.create_producer(topic)
        ids = [producer.send(f"m{n}".encode()) for n in range(10)]
        consumer = client.subscribe(topic, "s", initial_position=EARLIEST)
        receive_all(consumer, 10, ack=False)

        status, stats = call(cluster, "GET", rest_path(topic) + "/stats")
        assert status == 200, stats
        assert stats["subscriptions"]["s"]["msgBacklog"] == 10
        assert stats["subscriptions"]["s"]["consumers"][0]["unackedMessages"] == 10
        status, internal = call(cluster, "GET", rest_path(topic) + "/internalStats")
        assert status == 200, internal
        assert internal["numberOfEntries"] == 10
        assert set(internal["cursors"]) >= {"s", "pulsar.dedup"}
        status, last = call(cluster, "GET", rest_path(topic) + "/lastMessageId")
        assert (last["ledgerId"], last["entryId"]) == (ids[-1].ledger_id(), ids[-1].entry_id())

        acked = [{"ledgerId": i.ledger_id(), "entryId": i.entry_id()} for i in ids[:3]]
        status, _ = call(
            cluster,
            "POST",
            "/admin/georep/v1/persistent/"
            + topic.removeprefix("persistent://")
            + "/subscription/s/acknowledge",
            {"positions": acked},
        )
        assert status == 204
        assert call(cluster, "POST", rest_path(topic) + "/subscription/s/skip/2")[0] == 204
        consumer.close()
        consumer = client.subscribe(topic, "s")
        again = [m.data() for m in receive_all(consumer, 5, ack=False)]
        assert again == [f"m{n}".encode() for n in range(5, 10)]

        target = {"ledgerId": ids[1].ledger_id(), "entryId": ids[1].entry_id()}
        status, _ = call(cluster, "POST", rest_path(topic) + "/subscription/s/resetcursor", target)
        assert status == 204
        # the consumer was disconnected and reads again from m1
        deadline = time.monotonic() + 10
        first = consumer.receive(timeout_millis=10_000)
        while first.data() != b"m1" and time.monotonic() < deadline:
            first = consumer.receive(timeout_millis=10_000)
        assert first.data() == b"m1"
        assert call(cluster, "DELETE", rest_path(topic) + "/subscription/s")[0] == 409
        consumer.close()
        assert call(cluster, "DELETE", rest_path(topic) + "/subscription/s")[0] == 204
        assert call(cluster, "DELETE", rest_path(topic) + "/subscription/s")[0] == 404

        status, _ = call(
            cluster,
            "PUT",
            rest_path(topic) + "/subscription/fresh",
            {"ledgerId": ids[8].ledger_id(), "entryId": ids[8].entry_id()},
        )
        assert status in (200, 204)
        fresh = client.subscribe(topic, "fresh")
        assert [m.data() for m in receive_all(fresh, 2)] == [b"m8", b"m9"]
        assert receive_none(fresh) == []
        fresh.close()
        producer.close()
    assert call(cluster, "DELETE", rest_path(topic))[0] == 204
    assert call(cluster, "GET", rest_path(topic) + "/stats")[0] == 404


def rates_of(stats: dict) -> dict[str, float]:
    """Every rate of a topic's stats: topic, publishers, subscriptions, consumers."""
    found = {f"topic.{k}": stats[k] for k in ("msgRateIn", "msgThroughputIn")}
    found |= {f"topic.{k}": stats[k] for k in ("msgRateOut", "msgThroughputOut")}
    for publisher in stats["publishers"]:
        found |= {f"publisher.{k}": publisher[k] for k in ("msgRateIn", "msgThroughputIn")}
    for name, subscription in stats["subscriptions"].items():
        for key in ("msgRateOut", "msgThroughputOut"):
            found[f"{name}.{key}"] = subscription[key]
            for consumer in subscription["consumers"]:
                found[f"{name}.{consumer['consumerName']}.{key}"] = consumer[key]
    return found


def test_rates_follow_traffic_and_fall_to_zero_after(cluster: InProcessCluster) -> None:
    topic = unique_topic("rates")
    with open_client(cluster.url) as client:
        consumer = client.subscribe(topic, "s", consumer_name="c", initial_position=EARLIEST)
        producer = client.create_producer(topic, batching_enabled=False)

        def stats() -> dict:
            status, body = call(cluster, "GET", rest_path(topic) + "/stats")
            assert status == 200, body
            return body

        assert all(rate == 0.0 for rate in rates_of(stats()).values())
        deadline = time.monotonic() + 30
        while True:  # traffic flows until every rate reads > 0 (no timing asserted)
            producer.send(b"x" * 100)
            receive_all(consumer, 1)
            rates = rates_of(stats())
            assert len(rates) == 10
            if all(rate > 0 for rate in rates.values()):
                break
            assert time.monotonic() < deadline, f"rates still 0 under traffic: {rates}"
        # throughput counts the stored bytes (metadata included), so at least the payload
        assert rates["topic.msgThroughputIn"] >= 100 * rates["topic.msgRateIn"]

        deadline = time.monotonic() + 30
        while True:
            rates = rates_of(stats())
            if all(rate == 0.0 for rate in rates.values()):
                break
            assert time.monotonic() < deadline, f"rates did not fall back to 0: {rates}"
            time.sleep(0.2)
        assert len(rates) == 10  # the producer and consumer are still there, idle
        consumer.close()
        producer.close()
        # the counters stay, as Pulsar's, after the rates and the producer are gone
        counted = stats()
        sent = counted["msgInCounter"]
        assert sent > 0 and counted["msgOutCounter"] == sent
        assert counted["bytesInCounter"] >= 100 * sent and not counted["publishers"]
