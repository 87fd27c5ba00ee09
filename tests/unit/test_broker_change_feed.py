"""The broker's change feed (broker/change_feed.py) and the Prometheus scan beside real
Pulsar (subsync/pulsar_port.py): which topics' subscriptions moved, per namespace."""

from __future__ import annotations

import asyncio
from typing import cast

import pytest

from georep import limits
from georep.broker.change_feed import ChangeFeed
from georep.client.admin import ClusterAdminClient
from georep.client.errors import AdminRequestFailed, LinkError
from georep.runtime.awaiting import within
from georep.subsync.pulsar_port import MetricsScan, subscription_signals

A, B, C = (f"persistent://t/ns/{name}" for name in "abc")


async def test_topics_changed_after_a_sequence_oldest_first():
    feed = ChangeFeed(epoch="e")
    for topic in (A, B, A):
        feed.note(topic)
    first = await feed.changes("t/ns", "e", 0, 0)
    assert (first.sequence, first.topics, first.reset) == (3, (B, A), False)
    assert (await feed.changes("t/ns", "e", 2, 0)).topics == (A,)
    assert (await feed.changes("t/ns", "e", 3, 0)).topics == ()


async def test_a_long_poll_answers_the_first_change_with_what_followed_it():
    feed = ChangeFeed(epoch="e")
    waiting = asyncio.ensure_future(feed.changes("t/ns", "e", 0, 30))
    await asyncio.sleep(0)
    feed.note(A)
    feed.note(B)  # within the gathering time: the same answer
    answer = await within(waiting, 5)
    assert answer.topics == (A, B) and answer.sequence == 2


async def test_a_long_poll_with_nothing_changed_times_out_empty():
    feed = ChangeFeed(epoch="e")
    answer = await feed.changes("t/ns", "e", 0, 0.01)
    assert answer.topics == () and not answer.reset


async def test_other_namespaces_wake_no_one():
    feed = ChangeFeed(epoch="e")
    feed.note("persistent://t/other/x")
    answer = await feed.changes("t/ns", "e", 0, 0.01)
    assert answer.topics == () and answer.sequence == 0


@pytest.mark.parametrize(
    ("epoch", "after"),
    [(None, 0), ("a broker run before", 1), ("e", 99)],
    ids=["first request", "the broker restarted", "from the future"],
)
async def test_a_reader_that_may_have_missed_changes_is_told_to_read_everything(epoch, after):
    feed = ChangeFeed(epoch="e")
    feed.note(A)
    answer = await feed.changes("t/ns", epoch, after, 0)
    assert answer.reset and answer.epoch == "e" and answer.sequence == 1


async def test_past_its_bound_the_oldest_change_is_forgotten_and_readers_behind_it_reset(
    monkeypatch,
):
    monkeypatch.setattr(limits, "change_feed_topics_max", 2)
    feed = ChangeFeed(epoch="e")
    for topic in (A, B, C):
        feed.note(topic)
    assert (await feed.changes("t/ns", "e", 0, 0)).reset  # A's change is gone
    assert (await feed.changes("t/ns", "e", 1, 0)).topics == (B, C)


# --- beside real Pulsar ------------------------------------------------------------------
def page(backlog_x: int, consumers_y: int = 1) -> str:
    labels = 'cluster="P",namespace="t/ns",topic="persistent://t/ns/{}",subscription="{}"'
    return "\n".join(
        [
            "# TYPE pulsar_subscription_back_log gauge",
            f"pulsar_subscription_back_log{{{labels.format('x', 'app')}}} {backlog_x}",
            f"pulsar_subscription_consumers_count{{{labels.format('y', 'app')}}} {consumers_y}",
            f"pulsar_subscription_back_log{{{labels.format('x', 'georep.sync')}}} 7",
            f"pulsar_subscription_back_log{{{labels.format('georep-subscription-sync', 'a')}}} 1",
            'pulsar_topics_count{cluster="P"} 2',
        ]
    )


def test_only_applications_subscriptions_of_the_namespaces_asked_count():
    signals = subscription_signals(page(3), {"t/ns"})
    assert signals == {
        ("persistent://t/ns/x", "app"): (3.0, None, None, None),
        ("persistent://t/ns/y", "app"): (None, 1.0, None, None),
    }
    assert subscription_signals(page(3), {"t/other"}) == {}


class Pages:
    """A cluster admin whose Prometheus page is what the test hands it next: each scan
    waits for one (an exception is raised instead of answered)."""

    def __init__(self) -> None:
        self.next: asyncio.Queue[str | Exception] = asyncio.Queue()

    async def metrics_text(self) -> str:
        item = await self.next.get()
        if isinstance(item, Exception):
            raise item
        return item


async def test_a_scan_says_which_topics_moved_since_the_previous_one():
    pages = Pages()
    scan = MetricsScan(cast(ClusterAdminClient, pages), 0, hot_topics_max=0)  # pages alone
    try:
        first = await scan.changes("t/ns", None)
        assert first.topics is None  # the first answer: read everything once
        expected = [
            (page(3), {"x", "y"}),  # the first scan: every topic it sees
            (page(3), set()),
            (page(2), {"x"}),
            (page(2, consumers_y=0), {"y"}),
        ]
        mark = first.mark
        for text, moved in expected:
            pages.next.put_nowait(text)
            answer = await within(scan.changes("t/ns", mark), 5)
            assert answer.topics == frozenset(f"persistent://t/ns/{t}" for t in moved)
            mark = answer.mark
    finally:
        await scan.stop()


async def test_a_failed_scan_is_an_error_for_every_watch_not_a_silence():
    pages = Pages()
    scan = MetricsScan(cast(ClusterAdminClient, pages), 0, hot_topics_max=0)
    try:
        mark = (await scan.changes("t/ns", None)).mark
        pages.next.put_nowait(AdminRequestFailed("P: GET /metrics/: refused"))
        with pytest.raises(LinkError):
            await within(scan.changes("t/ns", mark), 5)
    finally:
        await scan.stop()


class PagesAndStats(Pages):
    """Pages as above, and each topic's ``stats`` as the test last set it (a topic not
    set is refused, as a deleted one is)."""

    def __init__(self) -> None:
        super().__init__()
        self.stats: dict[str, dict] = {}
        self.asked: list[str] = []

    async def topic_stats(self, topic) -> dict:
        self.asked.append(str(topic))
        if str(topic) not in self.stats:
            raise AdminRequestFailed(f"P: GET {topic}/stats answered 404", 404)
        return self.stats[str(topic)]


def topic_stats(backlog: int, acked_at: int, consumers: int = 0) -> dict:
    return {
        "subscriptions": {
            "app": {
                "msgBacklog": backlog,
                "consumers": [{}] * consumers,
                "lastAckedTimestamp": acked_at,
                "lastMarkDeleteAdvancedTimestamp": acked_at,
            }
        }
    }


def signal_page(backlogs: dict[str, int], acked_at: int = 0) -> str:
    """A page with every family the scan reads, for ``app`` on each topic named."""
    lines = []
    for family, value in (
        ("back_log", None),
        ("consumers_count", 0),
        ("last_acked_timestamp", acked_at),
        ("last_mark_delete_advanced_timestamp", acked_at),
    ):
        lines.append(f"# TYPE pulsar_subscription_{family} gauge")
        for name, backlog in backlogs.items():
            labels = f'namespace="t/ns",topic="persistent://t/ns/{name}",subscription="app"'
            figure = backlog if value is None else value
            lines.append(f"pulsar_subscription_{family}{{{labels}}} {figure}")
    return "\n".join(lines)


async def next_change(scan: MetricsScan, mark: int) -> tuple[int, frozenset[str] | None]:
    answer = await within(scan.changes("t/ns", mark), 5)
    return answer.mark, answer.topics


@pytest.fixture
def quick_hot_rounds(monkeypatch):
    monkeypatch.setattr(limits, "sync_pulsar_hot_interval_s", 0.01)


async def test_a_topic_that_moved_is_looked_at_alone_until_the_next_page(quick_hot_rounds):
    """An acknowledgement on a topic that moved lately is found by its own ``stats``,
    with no page in between; a namespace's first page heats nothing."""
    admin = PagesAndStats()
    x, y = "persistent://t/ns/x", "persistent://t/ns/y"
    scan = MetricsScan(cast(ClusterAdminClient, admin), 0)
    try:
        mark = (await scan.changes("t/ns", None)).mark
        admin.next.put_nowait(signal_page({"x": 0, "y": 0}))
        mark, topics = await next_change(scan, mark)
        assert topics == frozenset({x, y})  # the namespace's first page: its baseline
        assert scan.to_json()["hotTopics"] == 0
        admin.stats[x] = topic_stats(backlog=1, acked_at=0)
        admin.next.put_nowait(signal_page({"x": 1, "y": 0}))  # a message published on x
        mark, topics = await next_change(scan, mark)
        assert topics == frozenset({x}) and scan.to_json()["hotTopics"] == 1
        admin.stats[x] = topic_stats(backlog=0, acked_at=17)  # ... and acknowledged
        mark, topics = await next_change(scan, mark)
        assert topics == frozenset({x})  # no page was served in between
        assert admin.next.empty() and set(admin.asked) == {x}
        assert scan.stats["hotChanges"] == 1
    finally:
        await scan.stop()


async def test_only_topics_this_process_syncs_become_hot(quick_hot_rounds):
    """Several instances share a namespace's partitions: each reads only its own alone."""
    admin = PagesAndStats()
    x = "persistent://t/ns/x"
    scan = MetricsScan(cast(ClusterAdminClient, admin), 0, synced=lambda topic: topic == x)
    try:
        mark = (await scan.changes("t/ns", None)).mark
        admin.next.put_nowait(signal_page({"x": 0, "y": 0}))
        mark, _ = await next_change(scan, mark)
        admin.stats[x] = topic_stats(backlog=1, acked_at=0)
        admin.next.put_nowait(signal_page({"x": 1, "y": 1}))
        mark, topics = await next_change(scan, mark)
        assert topics == frozenset({x, "persistent://t/ns/y"})  # the page tells of both
        assert scan.hot_topics() == [x]
    finally:
        await scan.stop()


async def test_past_the_hot_limit_the_least_recently_moved_leave_loudly(quick_hot_rounds, caplog):
    admin = PagesAndStats()
    scan = MetricsScan(cast(ClusterAdminClient, admin), 0, hot_topics_max=2)
    try:
        mark = (await scan.changes("t/ns", None)).mark
        names = ["a", "b", "c"]
        admin.next.put_nowait(signal_page(dict.fromkeys(names, 0)))
        mark, _ = await next_change(scan, mark)
        for name in names:  # one at a time, so each later one moved more recently
            # what the page will show of it: its stats look unmoved at the first look
            admin.stats[f"persistent://t/ns/{name}"] = topic_stats(backlog=1, acked_at=0)
            admin.next.put_nowait(signal_page({n: int(n <= name) for n in names}))
            mark, _ = await next_change(scan, mark)
        assert scan.to_json()["hotTopics"] == 2 and scan.stats["hotDropped"] == 1
        assert any("pulsar_hot_topics_max" in r.getMessage() for r in caplog.records)
        admin.asked.clear()
        admin.stats["persistent://t/ns/a"] = topic_stats(backlog=9, acked_at=9)
        admin.stats["persistent://t/ns/c"] = topic_stats(backlog=1, acked_at=5)
        mark, topics = await next_change(scan, mark)
        assert topics == frozenset({"persistent://t/ns/c"})  # a left: only the page tells of it
        assert "persistent://t/ns/a" not in admin.asked
    finally:
        await scan.stop()


async def test_quiet_or_unreadable_topics_leave_the_hot_set(quick_hot_rounds, monkeypatch):
    admin = PagesAndStats()
    scan = MetricsScan(cast(ClusterAdminClient, admin), 0)
    try:
        mark = (await scan.changes("t/ns", None)).mark
        admin.next.put_nowait(signal_page({"x": 0, "y": 0}))
        mark, _ = await next_change(scan, mark)
        admin.stats["persistent://t/ns/x"] = topic_stats(backlog=1, acked_at=0)
        admin.next.put_nowait(signal_page({"x": 1, "y": 1}))  # y's stats: refused
        await next_change(scan, mark)
        for _ in range(500):
            if scan.to_json()["hotTopics"] == 1:
                break
            await asyncio.sleep(0.01)
        assert scan.to_json()["hotTopics"] == 1  # y left on its refusal
        monkeypatch.setattr(limits, "sync_pulsar_hot_window_s", 0.0)
        for _ in range(500):
            if scan.to_json()["hotTopics"] == 0:
                break
            await asyncio.sleep(0.01)
        assert scan.to_json()["hotTopics"] == 0  # x left once quiet for the window
    finally:
        await scan.stop()


def test_stats_and_page_read_a_subscription_alike():
    """A topic entering the hot set starts from what the page showed; its ``stats`` must
    read the same when nothing moved, or every hot topic would look moved once."""
    from georep.subsync.pulsar_port import stats_signals

    page = subscription_signals(signal_page({"x": 3}, acked_at=1_764_000_000_123), {"t/ns"})
    stats = stats_signals(topic_stats(backlog=3, acked_at=1_764_000_000_123))
    assert page == {("persistent://t/ns/x", "app"): stats["app"]}


def test_a_family_in_several_blocks_between_comments_is_read_whole():
    line = (
        'pulsar_subscription_back_log{{namespace="t/ns",'
        'topic="persistent://t/ns/{}",subscription="app"}} {}'
    )
    text = "\n".join(
        [
            "# TYPE pulsar_subscription_back_log gauge",
            line.format("x", 1),
            "# TYPE pulsar_topics_count gauge",
            'pulsar_topics_count{cluster="P"} 2',
            "# a family that comes back later (not what the format asks, still read)",
            line.format("y", 2),
            'pulsar_subscription_back_log_other{namespace="t/ns"} 9',
        ]
    )
    assert subscription_signals(text, {"t/ns"}) == {
        ("persistent://t/ns/x", "app"): (1.0, None, None, None),
        ("persistent://t/ns/y", "app"): (2.0, None, None, None),
    }


def test_admin_requests_are_counted_by_kind_without_their_names():
    from georep.client.admin import request_kind

    assert request_kind("GET", "/admin/v2/persistent/t/ns/x-partition-3/stats") == (
        "GET /admin/v2/persistent/{topic}/stats"
    )
    assert request_kind("GET", "/admin/v2/namespaces/t/ns/topics?mode=ALL") == (
        "GET /admin/v2/namespaces/{namespace}/topics"
    )
    assert (
        request_kind("GET", "/admin/v2/persistent/t/ns") == "GET /admin/v2/persistent/{namespace}"
    )
