"""The gateway's watchdog (``ReplicationManager.heal_stalled``): a replicator that moves
nothing on while entries wait is said once per remote with a count, restarted at most
``limits.replicator_restarts_max`` times, and reported on ``/health`` until it moves
again; and the replicator's own part: what counts as a stall, and a restart that opens
everything again."""

from __future__ import annotations

import asyncio
import functools
import logging
from types import SimpleNamespace
from typing import Any, cast

import pytest

from georep import limits
from georep.client.producer import SendReceipt
from georep.domain.position import Position
from georep.gateway.manager import ReplicationManager
from georep.replicator.replicator import Replicator, State
from georep.replicator.settings import ReplicatorSettings
from georep.subsync.core import Apply
from georep.subsync.topic_sync import TopicSync
from tests.unit.test_gateway_manager import FakeStore, endpoint
from tests.unit.test_replicator_replicator import (
    TOPIC,
    FakeConsumer,
    FakeLink,
    FakeProducer,
    entry,
)
from tests.unit.test_subsync_marker_routes import TOPIC as ROUTE_TOPIC
from tests.unit.test_subsync_marker_routes import FakeLink as AttachingLink
from tests.unit.test_subsync_marker_routes import FakePort, FakeRoute, request_marker, sync_core

STUCK_S = 60.0


class Stalling:
    """A replicator as the watchdog sees it: stalled for as long as the test says."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.schema_refused: str | None = None
        self.state = State.BACKOFF
        self.last_error: str | None = "remote: RequestTimeout: no answer"
        self.stalled_for = 0.0
        self.restarts = 0

    def stalled_s(self, now: float) -> float:
        return self.stalled_for

    async def restart(self) -> bool:
        self.restarts += 1
        return True

    async def stop(self, *, delete_subscription: bool = False) -> None:
        pass

    # what replication_summary and problems read
    failing = False
    core = SimpleNamespace(copies_without_origin={})
    connected = False
    backlog_entries = 7
    delay_s = 100.0
    rates = {"msgRateOut": 0.0}

    def moves(self) -> None:
        self.stalled_for = 0.0
        self.restarts = 0


@pytest.fixture
async def manager():
    manager = ReplicationManager(
        local=endpoint("A"),
        remotes={"B": endpoint("B"), "C": endpoint("C")},
        store=cast(Any, FakeStore()),
        stuck_after_s=STUCK_S,
    )
    yield manager
    await manager.stop()


def put(manager: ReplicationManager, count: int, remote: str) -> list[Stalling]:
    replicators = [Stalling(f"persistent://t/ns/x-partition-{i}") for i in range(count)]
    for replicator in replicators:
        manager.replicators[replicator.topic, remote] = cast(Replicator, replicator)
    return replicators


def said(caplog: pytest.LogCaptureFixture) -> list[str]:
    lines = [r.getMessage() for r in caplog.records if r.name == "georep.gateway.watchdog"]
    caplog.clear()
    return lines


async def test_stuck_replicators_are_said_once_per_remote_restarted_then_given_up(
    manager: ReplicationManager, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="georep.gateway.watchdog")
    to_b, to_c = put(manager, 500, "B"), put(manager, 3, "C")
    for replicator in to_b[:400]:
        replicator.stalled_for = STUCK_S + 1
    to_b[400].stalled_for = STUCK_S - 1  # not yet
    await manager.heal_stalled()
    (line,) = said(caplog)
    assert "replication to B: 400 topic partitions moved nothing on" in line, line
    assert "restarting 400, 0 past 3 restarts" in line and "RequestTimeout" in line, line
    assert [r.restarts for r in to_b[:400]] == [1] * 400 and to_b[400].restarts == 0
    assert (manager.restarts_to("B"), manager.restarts_to("C")) == (400, 0)
    assert manager.replication_summary()["B"]["stalled"] == 400
    (problem,) = manager.problems()
    assert problem.startswith("replication to B: 400 topic partitions moved nothing on")
    assert problem.endswith("; restarted"), problem

    for _ in range(limits.replicator_restarts_max - 1):
        await manager.heal_stalled()
        assert len(said(caplog)) == 1
    assert manager.restarts_to("B") == 400 * limits.replicator_restarts_max
    await manager.heal_stalled()  # past its restarts: said once, not restarted
    (line,) = said(caplog)
    assert "restarting 0, 400 past 3 restarts" in line, line
    await manager.heal_stalled()
    assert said(caplog) == []
    assert manager.restarts_to("B") == 400 * limits.replicator_restarts_max
    (problem,) = manager.problems()
    assert "400 could not be healed by 3 restarts" in problem, problem

    for replicator in to_b[:399]:
        replicator.moves()
    await manager.heal_stalled()
    (line,) = said(caplog)
    assert line == "replication to B: 399 topic partitions move again", line
    assert manager.replication_summary()["B"]["stalled"] == 1
    assert to_c[0].restarts == 0


async def test_a_remote_that_refused_a_schema_is_not_stuck_but_said_on_its_own(
    manager: ReplicationManager,
) -> None:
    (replicator,) = put(manager, 1, "B")
    replicator.stalled_for = STUCK_S * 10
    replicator.schema_refused = "IncompatibleSchema"
    await manager.heal_stalled()
    assert replicator.restarts == 0
    assert not any("moved nothing on" in p for p in manager.problems())


async def test_a_sync_whose_applies_wait_is_restarted_and_said_apart(
    manager: ReplicationManager, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="georep.gateway.watchdog")
    syncs = [Stalling(f"persistent://t/ns/y-partition-{i}") for i in range(3)]
    for sync in syncs:
        manager.subsync.syncs[sync.topic] = cast(Any, sync)
    syncs[0].stalled_for = STUCK_S
    await manager.heal_stalled()
    (line,) = said(caplog)
    assert line.startswith("subscription sync: 1 topic partitions moved nothing on for 60 s")
    assert syncs[0].restarts == 1 and syncs[1].restarts == 0
    assert manager.problems() == [
        "subscription sync: 1 topic partitions moved nothing on for 60 s or more while"
        " states or entries wait; restarted"
    ]
    syncs[0].moves()
    await manager.heal_stalled()
    assert said(caplog) == ["subscription sync: 1 topic partitions move again"]
    assert manager.problems() == []


async def _until(condition, what: str) -> None:
    for _ in range(2000):
        if condition():
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"never: {what}")


async def test_a_stall_is_entries_waiting_without_progress_and_a_restart_opens_everything_again(
    monkeypatch,
):
    now = [1000.0]
    consumer = FakeConsumer()
    subscribed: list[FakeConsumer] = []
    local = FakeLink(consumers=[consumer])

    async def subscribe(*args, **kwargs):
        subscribed.append(consumer)
        return consumer

    monkeypatch.setattr(local, "subscribe", subscribe)
    producers = [FakeProducer(), FakeProducer()]
    replicator = Replicator(
        topic=TOPIC,
        local_cluster="A",
        remote_cluster="B",
        local_link=cast(Any, local),
        remote_link=cast(Any, FakeLink(producers=list(producers))),
        settings=ReplicatorSettings(backoff_s_initial=0.001, backoff_s_max=0.01),
        clock=lambda: now[0],
    )
    replicator.start()
    try:
        await _until(lambda: replicator.state is State.REPLICATING, "replicating")
        now[0] += 500
        assert replicator.stalled_s(now[0]) == 0.0  # nothing to do is no stall
        consumer.queue.put_nowait(entry(1))
        await _until(lambda: producers[0].sent, "sent")
        now[0] += 90
        assert replicator.stalled_s(now[0]) == 90.0  # sent, no receipt
        assert replicator.stats()["stalledSeconds"] == 90.0

        assert await replicator.restart()
        assert replicator.restarts == 1 and replicator.stalled_s(now[0]) == 0.0
        await _until(lambda: len(subscribed) == 2, "subscribed again")
        consumer.queue.put_nowait(entry(1))  # unacknowledged: the broker delivers it again
        await _until(lambda: producers[1].sent, "sent again")
        assert producers[1].sent == producers[0].sent  # the entry without receipt, again
        now[0] += 10
        producers[1].receipt(0)
        await _until(lambda: consumer.acks, "acknowledged")
        assert replicator.restarts == 0 and replicator.stalled_s(now[0]) == 0.0
    finally:
        await replicator.stop()


async def test_waiting_behind_other_partitions_for_a_turn_to_open_is_no_stall():
    """Thousands of partitions starting together queue for the places to open producers
    on the remote; the watchdog restarting one in the queue would only send it back."""
    now = [1000.0]
    consumer = FakeConsumer()
    producer = FakeProducer()
    remote_opening = asyncio.Semaphore(1)
    await remote_opening.acquire()  # every place taken by other partitions
    replicator = Replicator(
        topic=TOPIC,
        local_cluster="A",
        remote_cluster="B",
        local_link=cast(Any, FakeLink(consumers=[consumer])),
        remote_link=cast(Any, FakeLink(producers=[producer])),
        settings=ReplicatorSettings(backoff_s_initial=0.001, backoff_s_max=0.01),
        remote_opening=remote_opening,
        clock=lambda: now[0],
    )
    consumer.queue.put_nowait(entry(1))
    replicator.start()
    try:
        await _until(lambda: replicator.read_to is not None, "read")
        now[0] += 500
        assert replicator.stalled_s(now[0]) == 0.0  # an entry waits, but for its turn
        remote_opening.release()
        await _until(lambda: producer.sent, "sent once its turn came")
        now[0] += 90
        assert replicator.stalled_s(now[0]) == 90.0  # its turn came: the clock runs again
    finally:
        await replicator.stop()


class QuietRoute(FakeRoute):
    """A route for in-band markers: nothing to start, stop or listen to."""

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    async def close_writer(self) -> None:
        pass

    def listeners(self, hear):
        return []


async def test_a_sync_is_stalled_while_applies_wait_and_a_restart_attaches_again():
    now = [1000.0]
    port = FakePort()
    port.route = QuietRoute()
    link = AttachingLink()  # attaching never ends: the applies wait
    an_apply = cast(Apply, "an apply")
    sync = TopicSync(
        topic=str(ROUTE_TOPIC),
        core=sync_core(in_band=True),
        local_link=cast(Any, link),
        port=cast(Any, port),
        connected=lambda remote: False,
        clock=lambda: now[0],
    )
    sync.start()
    try:
        await _until(lambda: link.subscribed == [str(ROUTE_TOPIC)], "attaching")
        now[0] += 100
        assert sync.stalled_s(now[0]) == 0.0  # nothing to apply is no stall
        sync._applies.append(an_apply)
        now[0] += 100
        assert sync.stalled_s(now[0]) == 100.0 and sync.stats()["stalledSeconds"] == 100.0
        assert await sync.restart()
        await _until(lambda: len(link.subscribed) == 2, "attaching again")
        assert sync.restarts == 1 and list(sync._applies) == [an_apply]
        assert sync.stalled_s(now[0]) == 0.0
    finally:
        await sync.stop()


async def test_a_reader_short_of_what_t_holds_is_a_stall_with_no_apply_waiting():
    """The source moves and nothing arrives: T holds entries the sync's reader has not
    reached (an own marker it wrote, or what this gateway's replicator of T read) and it
    reads nothing for as long: stalled, though no apply waits. Reading again ends it."""
    now = [1000.0]
    read_elsewhere: list[Position | None] = [None]
    sync = TopicSync(
        topic=str(ROUTE_TOPIC),
        core=sync_core(in_band=True),
        local_link=cast(Any, AttachingLink()),
        port=cast(Any, FakePort()),
        connected=lambda remote: False,
        read_elsewhere=lambda: read_elsewhere[0],
        clock=lambda: now[0],
    )
    sync.connected = True  # attached, its reader silent
    sync.core.last_read = Position(5, 10)
    now[0] += 100
    assert sync.stalled_s(now[0]) == 0.0  # an idle topic: nothing beyond the reader
    read_elsewhere[0] = Position.LATEST  # not a position: nothing to reach
    assert sync.stalled_s(now[0]) == 0.0
    read_elsewhere[0] = Position(5, 10)  # the replicator read what the reader did
    assert sync.stalled_s(now[0]) == 0.0

    read_elsewhere[0] = Position(5, 12)  # the replicator read on; the reader does not
    assert sync.stalled_s(now[0]) == 0.0  # from now
    now[0] += 30
    assert sync.stalled_s(now[0]) == 30.0
    sync.connected = False  # detached: the attach failures say it, not the stall
    assert sync.stalled_s(now[0]) == 0.0
    sync.connected = True
    sync.core.last_read = Position(5, 12)  # read up to it
    assert sync.stalled_s(now[0] + 100) == 0.0

    read_elsewhere[0] = None  # no replicator of T here: an own marker stored past it
    receipt: asyncio.Future[SendReceipt] = asyncio.get_running_loop().create_future()
    receipt.set_result(SendReceipt(sequence_id=1, position=Position(5, 20)))
    sync._written(request_marker(), receipt)
    assert sync.stalled_s(now[0]) == 0.0
    now[0] += 60
    assert sync.stalled_s(now[0]) == 60.0 and sync.stats()["stalledSeconds"] == 60.0
    sync.core.last_read = Position(5, 20)  # read back
    assert sync.stalled_s(now[0]) == 0.0 and sync._own_unread is None


def test_a_replicator_remembers_how_far_it_read_the_local_topic_for_the_sync(
    manager: ReplicationManager,
) -> None:
    topic = "persistent://t/ns/x-partition-0"
    read_to = functools.partial(manager.read_to, topic)
    assert read_to() is None
    to_b, to_c = Stalling(topic), Stalling(topic)
    manager.replicators[topic, "B"] = cast(Replicator, to_b)
    manager.replicators[topic, "C"] = cast(Replicator, to_c)
    to_b.read_to, to_c.read_to = Position(3, 4), None  # type: ignore[attr-defined]
    assert read_to() == Position(3, 4)
    to_c.read_to = Position(3, 9)  # type: ignore[attr-defined]
    assert read_to() == Position(3, 9)


def test_snapshots_timing_out_on_many_topics_are_said_in_one_line(
    manager: ReplicationManager, caplog: pytest.LogCaptureFixture
) -> None:
    """2,000 topic partitions whose snapshots time out: one INFO line a pass, counted,
    with the remotes that did not answer; nothing when none timed out since."""
    caplog.set_level(logging.INFO, logger="georep.subsync.supervisor")
    syncs = {}
    for i in range(2000):
        controller = SimpleNamespace(stats=SimpleNamespace(timed_out=1), unanswered={"B"})
        syncs[f"persistent://t/ns/x-partition-{i}"] = SimpleNamespace(
            core=SimpleNamespace(controller=controller)
        )
    manager.subsync.syncs = cast(Any, syncs)
    try:
        said_snapshot_timeouts(manager, caplog, syncs)
    finally:
        manager.subsync.syncs = {}  # nothing of these to stop


def said_snapshot_timeouts(
    manager: ReplicationManager, caplog: pytest.LogCaptureFixture, syncs: dict[str, Any]
) -> None:
    def lines() -> list[str]:
        out = [r.getMessage() for r in caplog.records if r.name == "georep.subsync.supervisor"]
        caplog.clear()
        return out

    manager.subsync.say_snapshot_timeouts(30.0)
    assert lines() == [
        "2000 snapshots timed out on 2000 topic partitions in the last 30 s; not answered"
        " by B (2000)"
    ]
    manager.subsync.say_snapshot_timeouts(30.0)
    assert lines() == []  # nothing new
    first = syncs["persistent://t/ns/x-partition-0"].core.controller
    first.stats.timed_out, first.unanswered = 3, {"B", "C"}
    manager.subsync.say_snapshot_timeouts(30.0)
    assert lines() == [
        "2 snapshots timed out on 1 topic partitions in the last 30 s; not answered by B (1), C (1)"
    ]
