"""The manager's decisions, one discovery pass at a time, with a fake store, a fake local
admin REST and fake replicators: which (topic, remote) pairs run, which stop, and whether
a stop deletes the replication subscription."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import pytest

from georep import limits
from georep.client.admin import ClusterAdminClient
from georep.client.errors import AdminRequestFailed
from georep.domain.topic_name import TopicName
from georep.gateway.cluster_endpoint import ClusterEndpoint
from georep.gateway.manager import ReplicationManager
from georep.gateway.meta.replication_policies import (
    ReplicationPolicyRecord,
    ReplicationPolicyRepository,
)
from georep.replicator.replicator import Replicator

NS = "t/ns"
X0, X1, Y = (f"persistent://{NS}/{n}" for n in ("x-partition-0", "x-partition-1", "y"))


class FakeStore:
    def __init__(self) -> None:
        self.policies: dict[tuple[str, str], list[str]] = {}

    async def list_replication_policies(self):
        return [
            ReplicationPolicyRecord(scope, name, tuple(clusters), 0.0, 1)
            for (scope, name), clusters in sorted(self.policies.items())
        ]


class FakeAdmin:
    def __init__(self) -> None:
        self.topics: dict[str, list[str]] = {NS: [X0, X1, Y]}
        self.failing = False
        self.subs: dict[str, list[str]] = {}
        self.deleted: list[tuple[str, str]] = []

    async def list_topics(self, namespace):
        if self.failing:
            raise AdminRequestFailed("admin REST down")
        return self.topics.get(namespace)

    async def partitions(self, topic):
        return {"x": 2, "lone": None}.get(topic.local_name, 0)

    async def subscriptions(self, topic):
        return self.subs.get(str(topic), [])

    async def delete_subscription(self, topic, subscription):
        self.deleted.append((str(topic), subscription))
        return True

    async def close(self):
        pass


class FakeReplicator:
    def __init__(self, *, topic, remote_cluster, partitions, settings, **_) -> None:
        self.settings = settings
        self.topic = topic
        self.topic_name = TopicName.parse(topic)
        self.remote_cluster = remote_cluster
        self.partitions = partitions
        self.stopped: bool | None = None  # None: running; else delete_subscription

    def start(self) -> None:
        pass

    async def stop(self, *, delete_subscription: bool = False) -> None:
        self.stopped = delete_subscription

    def stats(self) -> dict:
        return {"topic": self.topic, "remoteCluster": self.remote_cluster}


def endpoint(name: str, **keys) -> ClusterEndpoint:
    return ClusterEndpoint(name, "pulsar://127.0.0.1:1", "http://127.0.0.1:1", **keys)


@pytest.fixture
async def manager():
    store = FakeStore()
    manager = ReplicationManager(
        local=endpoint("A"),
        remotes={"B": endpoint("B"), "C": endpoint("C", replication_window_entries=50)},
        store=cast(ReplicationPolicyRepository, store),
        replicator_factory=cast(Callable[..., Replicator], FakeReplicator),
    )
    sync_admin = manager.local_admin  # the sync port's, which keeps it
    manager.local_admin = cast(ClusterAdminClient, FakeAdmin())
    yield manager
    await manager.stop()  # closes the remotes' admin clients the passes opened
    await sync_admin.close()


def running(manager) -> dict:
    return {key: r.partitions for key, r in manager.replicators.items()}


async def test_topic_policies_override_the_namespace(manager) -> None:
    store = manager.store
    store.policies[("namespace", NS)] = ["A", "B", "C", "Z"]
    store.policies[("topic", f"persistent://{NS}/x")] = ["B"]  # the partitioned topic
    await manager.discover()
    assert running(manager) == {(X0, "B"): 2, (X1, "B"): 2, (Y, "B"): 0, (Y, "C"): 0}
    assert manager.stats.unknown_clusters == {"Z"}

    store.policies[("topic", X1)] = []  # one partition opted out
    await manager.discover()
    assert (X1, "B") not in manager.replicators


async def test_each_remote_gets_its_own_window(manager) -> None:
    manager.store.policies[("namespace", NS)] = ["B", "C"]
    await manager.discover()
    windows = {key[1]: r.settings.pending_sends_count_max for key, r in manager.replicators.items()}
    assert windows == {"B": limits.replicator_pending_sends_count_max, "C": 50}


async def test_policy_removal_deletes_topic_removal_does_not(manager) -> None:
    store, admin = manager.store, manager.local_admin
    store.policies[("namespace", NS)] = ["B", "C"]
    await manager.discover()
    by_key = dict(manager.replicators)

    store.policies[("namespace", NS)] = ["B"]  # C dropped by policy
    await manager.discover()
    assert {by_key[(t, "C")].stopped for t in (X0, X1, Y)} == {True}

    admin.topics[NS] = [X0, X1]  # topic y deleted
    await manager.discover()
    assert by_key[(Y, "B")].stopped is False

    del store.policies[("namespace", NS)]  # the whole policy gone
    await manager.discover()
    assert by_key[(X0, "B")].stopped is True and manager.replicators == {}


async def test_a_failed_listing_keeps_replicating(manager) -> None:
    manager.store.policies[("namespace", NS)] = ["B"]
    await manager.discover()
    manager.local_admin.failing = True
    await manager.discover()
    assert len(manager.replicators) == 3
    assert "admin REST down" in manager.stats.last_error


async def test_stray_subscriptions_are_deleted_on_first_sight(manager) -> None:
    manager.store.policies[("namespace", NS)] = ["B"]
    manager.local_admin.subs[Y] = ["app", "georep.repl.B", "georep.repl.C"]
    await manager.discover()
    assert manager.local_admin.deleted == [(Y, "georep.repl.C")]


async def test_a_topic_that_only_looks_like_a_partition(manager) -> None:
    lone = f"persistent://{NS}/lone-partition-0"
    manager.local_admin.topics[NS] = [lone]
    manager.store.policies[("namespace", NS)] = ["B"]
    await manager.discover()
    assert running(manager) == {(lone, "B"): 0}


class FakeSyncPolicies:
    def __init__(self) -> None:
        self.policies: dict[tuple[str, str], tuple[str, str | None]] = {}
        self.reads = 0

    async def list_policies(self):
        from georep.gateway.meta.subscription_sync_policies import SubscriptionSyncPolicyRecord

        self.reads += 1
        return [
            SubscriptionSyncPolicyRecord(scope, name, choice, pattern, 0.0, 1)
            for (scope, name), (choice, pattern) in sorted(self.policies.items())
        ]


async def test_a_sync_policy_change_reaches_running_syncs_in_one_read(manager) -> None:
    sync_policies = manager.sync_policies = FakeSyncPolicies()
    sync_policies.policies[("namespace", NS)] = ("flagged", "orders-.*")
    await manager.discover()  # no replication policy: the sync policy's namespace is synced
    assert set(manager.syncs) == {X0, X1, Y}
    choice = manager.syncs[X0].core.namespace_sync
    assert (choice.pattern.pattern, choice.chosen_by) == ("orders-.*", "namespace policy")
    assert manager.syncs[X1].core.namespace_sync is choice  # one per namespace and policy
    choices = manager.sync_choices
    await manager.discover()
    assert manager.sync_choices is choices and sync_policies.reads == 2  # one read a pass

    for sync in manager.syncs.values():
        sync.told_at = None
    sync_policies.policies[("topic", f"persistent://{NS}/x")] = ("all", None)
    await manager.discover()
    x0, y = manager.syncs[X0].core.namespace_sync, manager.syncs[Y].core.namespace_sync
    assert (x0.subscriptions.value, x0.chosen_by) == ("all", "topic policy")
    assert y == choice
    told = {topic for topic, sync in manager.syncs.items() if sync.told_at is not None}
    assert told == {X0, X1}  # only the topics whose choice changed read their states again
