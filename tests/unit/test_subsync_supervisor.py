"""Subscription sync's supervisor: the desired set handed over each pass → the syncs and
change watches that run (against clusters that cannot be reached: nothing attaches, the
decisions are the supervisor's)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from georep.client.admin import ClusterAdminClient
from georep.client.link import PulsarLink
from georep.domain.position import Position
from georep.domain.topic_name import TopicName
from georep.gateway.sync_choice import SyncChoices
from georep.subsync import DesiredSyncs, SyncSettings, SyncSupervisor
from georep.subsync.side_channel import side_topic

NS = "t/ns"
X0, X1, Y = (f"persistent://{NS}/{n}" for n in ("x-partition-0", "x-partition-1", "y"))
SIDE = str(side_topic(TopicName.parse(X0)))


class Replication:
    def __init__(self) -> None:
        self.stored: dict[tuple[str, str], Position] = {}

    def replicating(self, topic: str, remote: str) -> bool:
        return (topic, remote) in self.stored

    def stored_to(self, topic: str, remote: str) -> Position | None:
        return self.stored.get((topic, remote))

    def read_to(self, topic: str) -> Position | None:
        return None


@pytest.fixture
async def supervisor() -> AsyncIterator[SyncSupervisor]:
    link = PulsarLink("pulsar://127.0.0.1:1", cluster="A")
    admin = ClusterAdminClient("http://127.0.0.1:1", cluster_name="A")
    supervisor = SyncSupervisor(
        local_cluster="A",
        local_link=link,
        local_admin=admin,
        beside_pulsar=False,
        instance="i1",
        settings=SyncSettings(),
        topics_max=3,
        replication=Replication(),
        opening=asyncio.Semaphore(4),
    )
    yield supervisor
    await supervisor.stop()
    await link.close()
    await admin.close()


def desired(
    topics: list[str], remotes: dict[str, frozenset[str]] | None = None, may_run: bool = True
) -> DesiredSyncs:
    return DesiredSyncs(
        topics={NS: topics},
        remotes=remotes or {},
        choices=SyncChoices(SyncSettings(), ()),
        may_run=lambda _topic: may_run,
    )


async def test_the_desired_set_starts_updates_and_stops_syncs(supervisor: SyncSupervisor) -> None:
    await supervisor.update(desired([X0, X1, SIDE], {X0: frozenset({"B"})}))
    assert set(supervisor.syncs) == {X0, X1}  # the side topic carries the sync itself
    assert set(supervisor.watches) == {NS} and supervisor.wanted == {X0, X1}
    x0 = supervisor.syncs[X0]
    assert x0.core.remotes == {"B"} and supervisor.syncs[X1].core.remotes == frozenset()

    await supervisor.update(desired([X0], {X0: frozenset({"B", "C"})}))
    assert set(supervisor.syncs) == {X0} and supervisor.syncs[X0] is x0
    assert x0.core.remotes == {"B", "C"}  # told, not started again

    await supervisor.update(desired([]))
    assert supervisor.syncs == {} and supervisor.watches == {}


async def test_past_the_limit_topics_are_left_out_and_said(supervisor: SyncSupervisor) -> None:
    topics = [f"persistent://{NS}/z-partition-{i}" for i in range(5)]
    await supervisor.update(desired(topics))
    assert len(supervisor.syncs) == 3 and supervisor.over_limit == 2
    assert "2 topic partitions not synced: more than 3" in supervisor.problems()[0]
    assert supervisor.stats([])["topicsOverLimit"] == 2


async def test_a_topic_another_gateway_still_runs_waits(supervisor: SyncSupervisor) -> None:
    await supervisor.update(desired([X0], may_run=False))
    assert supervisor.syncs == {} and supervisor.wanted == {X0}
    await supervisor.update(desired([X0, Y]))
    assert set(supervisor.syncs) == {X0, Y}
    assert await supervisor.hand_over(lambda topic: topic != Y) == 1
    assert set(supervisor.syncs) == {X0}
