"""The broker's change feed (broker/change_feed.py) and the Prometheus scan beside real
Pulsar (subsync/pulsar_port.py): which topics' subscriptions moved, per namespace."""

from __future__ import annotations

import asyncio

import pytest

from georep import limits
from georep.broker.change_feed import ChangeFeed
from georep.client.errors import AdminRequestFailed, LinkError
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
    answer = await asyncio.wait_for(waiting, 5)
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
        ("persistent://t/ns/x", "app"): ("3",),
        ("persistent://t/ns/y", "app"): ("1",),
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
    scan = MetricsScan(pages, 0)
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
            answer = await asyncio.wait_for(scan.changes("t/ns", mark), 5)
            assert answer.topics == frozenset(f"persistent://t/ns/{t}" for t in moved)
            mark = answer.mark
    finally:
        await scan.stop()


async def test_a_failed_scan_is_an_error_for_every_watch_not_a_silence():
    pages = Pages()
    scan = MetricsScan(pages, 0)
    try:
        mark = (await scan.changes("t/ns", None)).mark
        pages.next.put_nowait(AdminRequestFailed("P: GET /metrics/: refused"))
        with pytest.raises(LinkError):
            await asyncio.wait_for(scan.changes("t/ns", mark), 5)
    finally:
        await scan.stop()


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
        ("persistent://t/ns/x", "app"): ("1",),
        ("persistent://t/ns/y", "app"): ("2",),
    }


def test_admin_requests_are_counted_by_kind_without_their_names():
    from georep.client.admin import request_kind

    assert request_kind("GET", "/admin/v2/persistent/t/ns/x-partition-3/stats") == (
        "GET /admin/v2/persistent/{topic}/stats"
    )
    assert request_kind("GET", "/admin/v2/namespaces/t/ns/topics?mode=ALL") == (
        "GET /admin/v2/namespaces/{namespace}/topics"
    )
    assert request_kind("GET", "/admin/v2/persistent/t/ns") == "GET /admin/v2/persistent/t/ns"
