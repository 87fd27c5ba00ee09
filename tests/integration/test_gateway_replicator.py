"""One replicator A→B, run in the test's event loop against two ``georep cluster``
processes: every message of A exactly once on B (batches kept whole, metadata kept,
origin attached), a re-read after a cursor reset stored nothing twice, and a remote
that dies mid-stream builds backlog that is caught up, without loss or duplicate, when
it returns."""

from __future__ import annotations

import asyncio
import contextlib
import threading

import pytest

from georep.client.admin import ClusterAdminClient
from georep.client.consumer import ReceivedEntry
from georep.client.link import PulsarLink
from georep.domain.topic_name import TopicName
from georep.replicator.origin import Origin, origin_of
from georep.replicator.replicator import Replicator
from georep.replicator.settings import ReplicatorSettings
from tests.harness.broker_cluster import ClusterProcess
from tests.harness.gateway import (
    admin_url,
    create_namespace,
    http,
    local_positions,
    origin_counts,
    payloads_on,
    produce,
    read_entries,
)

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]

NAMESPACE = "geo/replicator"
_counter = iter(range(1_000_000))


def topic_name(prefix: str) -> str:
    return f"persistent://{NAMESPACE}/{prefix}-{next(_counter)}"


@pytest.fixture(scope="module")
def clusters(tmp_path_factory):
    root = tmp_path_factory.mktemp("replicator")
    a = ClusterProcess(root / "a", name="A")
    b = ClusterProcess(root / "b", name="B")
    a.start()
    b.start()
    create_namespace(a, NAMESPACE)
    yield a, b
    a.kill()
    b.kill()


@contextlib.asynccontextmanager
async def replicator(a: ClusterProcess, b: ClusterProcess, topic: str, **settings):
    local, remote = PulsarLink(a.url), PulsarLink(b.url)
    local_admin = ClusterAdminClient(admin_url(a), cluster_name="A")
    remote_admin = ClusterAdminClient(admin_url(b), cluster_name="B")
    settings.setdefault("backoff_s_max", 1.0)
    settings.setdefault("stats_interval_s", 0.2)
    r = Replicator(
        topic=topic,
        local_cluster="A",
        remote_cluster="B",
        local_link=local,
        remote_link=remote,
        remote_admin=remote_admin,
        local_admin=local_admin,
        settings=ReplicatorSettings(**settings),
    )
    r.start()
    try:
        yield r
    finally:
        await r.stop()
        for closing in (local.close(), remote.close(), local_admin.close(), remote_admin.close()):
            await closing


async def until(condition, timeout_s: float = 60) -> None:
    """Poll ``condition`` (a replicator stat) until true, at most ``timeout_s``."""
    async with asyncio.timeout(timeout_s):
        while not condition():  # noqa: ASYNC110 - stats change without an event to wait on
            await asyncio.sleep(0.1)


def origin(copy: ReceivedEntry) -> Origin:
    """Where a copy on B came from (every copy names its origin)."""
    found = origin_of(copy.metadata)
    assert found is not None, f"{copy.position} on B names no origin"
    return found


def check_exactly_once(
    a: ClusterProcess, b: ClusterProcess, topic: str, count: int
) -> list[ReceivedEntry]:
    on_a = read_entries(a, topic)
    on_b = read_entries(b, topic)
    copies = origin_counts(on_b)
    assert set(copies) == local_positions(on_a, "A")
    assert set(copies.values()) == {1}
    assert sum(e.messages for e in on_b) == count
    return on_b


async def test_every_message_once_with_its_metadata(clusters) -> None:
    a, b = clusters
    topic = topic_name("once")
    sent = await asyncio.to_thread(produce, a.url, topic, 3000, "a", properties={"app": "1"})
    async with replicator(a, b, topic) as r:
        await until(lambda: r.stats()["msgOutCounter"] == 3000)
        await until(lambda: r.stats()["replicationBacklog"] == 0)
        stats = r.stats()
        assert stats["connected"] and stats["lastError"] is None
        assert stats["replicationDelayInSeconds"] == 0.0

    on_b = await asyncio.to_thread(check_exactly_once, a, b, topic, 3000)
    on_a = {e.position: e for e in await asyncio.to_thread(read_entries, a, topic)}
    assert any(e.messages > 1 for e in on_b), "batches were produced and kept whole"
    for copy in on_b:
        original = on_a[origin(copy).position]
        assert copy.payload == original.payload
        assert copy.metadata.replicated_from == "A"
        for field in ("publish_time", "event_time", "partition_key", "num_messages_in_batch"):
            assert getattr(copy.metadata, field) == getattr(original.metadata, field), field
    seen = await asyncio.to_thread(payloads_on, b.url, topic)
    assert seen == {payload: 1 for payload in sent}


async def test_a_reread_is_not_stored_twice(clusters) -> None:
    a, b = clusters
    topic = topic_name("reread")
    await asyncio.to_thread(produce, a.url, topic, 500, "a", batching=False)
    async with replicator(a, b, topic) as r:
        await until(lambda: r.stats()["msgOutCounter"] == 500)
    path = topic.removeprefix("persistent://")
    status, text = http(
        "POST",
        f"{admin_url(a)}/admin/v2/persistent/{path}/subscription/georep.repl.B/resetcursor",
        {"ledgerId": -1, "entryId": -1},
    )
    assert status == 204, text
    async with replicator(a, b, topic) as r:
        await until(lambda: r.stats()["alreadyReplicatedCounter"] == 500)
        assert r.stats()["msgOutCounter"] == 0
    await asyncio.to_thread(check_exactly_once, a, b, topic, 500)


async def test_remote_down_then_back(tmp_path, clusters) -> None:
    a, _ = clusters
    b = ClusterProcess(tmp_path / "b-dies", name="B")
    b.start()
    topic = topic_name("remote-down")
    stop = threading.Event()
    try:
        async with replicator(a, b, topic, receiver_queue_messages=200) as r:
            first = await asyncio.to_thread(produce, a.url, topic, 1000, "a", batching=False)
            await until(lambda: r.stats()["msgOutCounter"] >= 200)
            b.kill()
            await until(lambda: not r.stats()["remoteConnected"])
            more = await asyncio.to_thread(
                produce, a.url, topic, 2000, "a", batching=False, start=1000
            )
            await until(lambda: (r.stats()["replicationBacklog"] or 0) >= 1000)
            assert r.stats()["lastError"] is not None
            b.start()
            await until(lambda: r.stats()["replicationBacklog"] == 0, timeout_s=90)
            assert r.stats()["connected"]
        await asyncio.to_thread(check_exactly_once, a, b, topic, len(first) + len(more))
    finally:
        stop.set()
        b.kill()


async def test_stop_with_delete_removes_the_cursor(clusters) -> None:
    a, b = clusters
    topic = topic_name("delete")
    await asyncio.to_thread(produce, a.url, topic, 10, "a")
    admin = ClusterAdminClient(admin_url(a), cluster_name="A")
    try:
        async with replicator(a, b, topic) as r:
            await until(lambda: r.stats()["msgOutCounter"] == 10)
            assert "georep.repl.B" in await admin.subscriptions(TopicName.parse(topic))
            await r.stop(delete_subscription=True)
            assert r.stats()["state"] == "stopped"
        assert await admin.subscriptions(TopicName.parse(topic)) == []
    finally:
        await admin.close()


async def test_forged_and_malformed_origins_replicate_as_local_messages(clusters) -> None:
    """An application's georep.origin.* properties are no origin: ``²:1`` (isdigit() but
    not int()) and a claim of another cluster are replicated like any local message, and
    nothing after them waits."""
    a, b = clusters
    topic = topic_name("forged")
    forged = [
        {"georep.origin.cluster": "B", "georep.origin.position": "\u00b2:1"},
        {"georep.origin.cluster": "C", "georep.origin.position": "4:2"},
        {"georep.origin.cluster": "B", "georep.origin.position": "1" * 5000 + ":1"},
    ]
    sent = []
    for index, properties in enumerate(forged):
        sent += await asyncio.to_thread(
            produce, a.url, topic, 1, f"forged{index}", batching=False, properties=properties
        )
    sent += await asyncio.to_thread(produce, a.url, topic, 20, "after", batching=False)
    async with replicator(a, b, topic) as r:
        await until(lambda: r.stats()["msgOutCounter"] == len(sent))
        assert r.stats()["lastError"] is None
    on_b = await asyncio.to_thread(check_exactly_once, a, b, topic, len(sent))
    assert all(origin(copy).cluster == "A" for copy in on_b)
    seen = await asyncio.to_thread(payloads_on, b.url, topic)
    assert seen == {payload: 1 for payload in sent}
