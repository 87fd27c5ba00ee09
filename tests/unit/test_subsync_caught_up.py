"""Before consumers move to a cluster in a failover, its gateway must have applied every
state the cluster stores (subsync/caught_up.py): what is stored there but not applied
would be delivered again, and the other cluster's exposure counts it as safe."""

from __future__ import annotations

from typing import Any, cast

import pytest

from georep import limits
from georep.client.admin import ClusterAdminClient, last_entry
from georep.client.errors import AdminRequestFailed
from georep.client.link import PulsarLink
from georep.domain.position import Position
from georep.subsync.caught_up import TooManyTopics, caught_up
from georep.subsync.core import Apply
from georep.subsync.ports import SideMarker, SyncPort
from georep.subsync.pulsar_port import PulsarPort
from georep.subsync.side_channel import SideRoute, side_topic
from georep.subsync.topic_sync import TopicSync
from tests.unit.test_subsync_marker_routes import NO_ADMIN, OTHER, TOPIC, FakeLink, sync_core

SIDE = side_topic(TOPIC)


def test_the_last_entry_is_the_last_confirmed_or_the_last_of_an_earlier_ledger():
    ledgers = [{"ledgerId": 5, "entries": 3}, {"ledgerId": 6, "entries": 0}]
    assert last_entry({"lastConfirmedEntry": "7:12", "ledgers": ledgers}) == Position(7, 12)
    # A ledger just rolled over holds nothing: the last entry is in an earlier one.
    assert last_entry({"lastConfirmedEntry": "7:-1", "ledgers": ledgers}) == Position(5, 2)
    assert last_entry({"lastConfirmedEntry": "7:-1", "ledgers": ledgers[1:]}) is None
    for bad in ({}, {"lastConfirmedEntry": 7}, {"lastConfirmedEntry": "seven"}):
        with pytest.raises(ValueError):
            last_entry(bad)


class Stored:
    """How far the local cluster stores each topic, and who asked."""

    def __init__(self, **stored: Position | None) -> None:
        self.stored = {str(TOPIC): stored.get("topic"), SIDE: stored.get("side")}
        self.asked: list[str] = []

    async def __call__(self, topic: str) -> Position | None:
        self.asked.append(topic)
        return self.stored[topic]


def beside_pulsar_sync() -> tuple[TopicSync, PulsarPort]:
    port = PulsarPort(NO_ADMIN, cast(PulsarLink, FakeLink()), local_cluster="B", instance="i1")
    sync = TopicSync(
        topic=str(TOPIC),
        core=sync_core(in_band=False),
        local_link=cast(PulsarLink, FakeLink()),
        port=cast(SyncPort, port),
        connected=lambda remote: True,
    )
    return sync, port


async def test_a_sync_is_behind_until_it_read_all_its_cluster_stores_and_applied_it():
    sync, port = beside_pulsar_sync()
    channel = port.side_channels["t/ns"]
    stored = Stored(topic=Position(3, 9), side=Position(4, 20))
    reasons = await sync.behind(stored)
    assert reasons == [
        "not attached: attaching",
        "read to nothing, stored to 3:9",
        f"side topic {SIDE} read to nothing, stored to 4:20",
    ]
    sync.connected = True
    sync.core.last_read = Position(3, 9)  # every copy and marker of the topic read
    channel._last_read = Position(4, 19)  # the side topic's last marker not yet
    assert await sync.behind(stored) == [f"side topic {SIDE} read to 4:19, stored to 4:20"]
    channel._last_read = Position(4, 20)
    route = cast(SideRoute, sync._markers)
    route.deliver(SideMarker(100, b"", "A", 1))  # read, not taken by the sync
    assert await sync.behind(stored) == ["1 side markers not taken by the sync yet"]
    route._inbox.clear()  # taken
    sync._applies.append(cast(Apply, "an apply"))  # taken, not applied
    assert await sync.behind(stored) == ["1 applies waiting"]
    sync._applies.clear()
    assert await sync.behind(stored) == []
    # Copies the cluster never got are not waited for: an empty topic is read to its end.
    assert await sync.behind(Stored(topic=None, side=None)) == []
    await port.stop()


class FakeSync:
    def __init__(self, topic: str, reasons: list[str], error: Exception | None = None) -> None:
        self.topic = topic
        self.reasons = reasons
        self.error = error

    async def behind(self, ask: Any) -> list[str]:
        await ask(SIDE)  # every partition asks about its namespace's side topic
        if self.error is not None:
            raise self.error
        return self.reasons


class FakeAdmin:
    def __init__(self) -> None:
        self.asked: list[str] = []

    async def last_entry(self, topic: Any) -> Position | None:
        self.asked.append(str(topic))
        return Position(1, 1)


async def test_every_partition_is_asked_and_the_side_topic_once():
    admin = FakeAdmin()
    syncs = {
        str(TOPIC): FakeSync(str(TOPIC), []),
        str(OTHER): FakeSync(str(OTHER), ["2 applies waiting"]),
        "persistent://t/other/x": FakeSync("x", [], AdminRequestFailed("B: GET ... 500")),
    }
    answer = await caught_up(cast(Any, syncs), cast(ClusterAdminClient, admin))
    assert answer["topics"] == 3 and answer["caughtUp"] is False
    assert answer["behind"] == {
        str(OTHER): ["2 applies waiting"],
        "persistent://t/other/x": [
            "how far the local cluster stores it is unknown: B: GET ... 500"
        ],
    }
    assert admin.asked == [SIDE]  # one question for the namespace's side topic
    only = await caught_up(cast(Any, syncs), cast(ClusterAdminClient, admin), str(TOPIC))
    assert only == {"caughtUp": True, "topics": 1, "behind": {}}
    # Nothing synced matches: not caught up, since nothing says it is.
    none = await caught_up(cast(Any, syncs), cast(ClusterAdminClient, admin), "persistent://no")
    assert none == {"caughtUp": False, "topics": 0, "behind": {}}


async def test_a_request_for_more_partitions_than_the_bound_is_refused(monkeypatch):
    monkeypatch.setattr(limits, "sync_caught_up_topics_max", 1)
    syncs = {str(TOPIC): FakeSync(str(TOPIC), []), str(OTHER): FakeSync(str(OTHER), [])}
    with pytest.raises(TooManyTopics, match=r"2 synced topic partitions .* narrow"):
        await caught_up(cast(Any, syncs), cast(ClusterAdminClient, FakeAdmin()))
