"""The replication manager: policies x local topics → the replicators that should run.

One discovery pass (every ``discovery_interval_s``, and at once after a policy change
over REST — :meth:`ReplicationManager.poke`):

1. read every policy from the gateway's metadata store;
2. list the topics of every namespace a policy names, on the local cluster's admin REST
   (partitions listed one by one; ``limits.gateway_namespace_topics_max`` per namespace);
   a namespace whose listing fails keeps its last known topics, so a blip of the admin
   REST never stops replication;
3. for each topic partition, the effective remote clusters: a policy on the partition
   itself, else on its (partitioned) topic, else on its namespace; the local cluster and
   clusters the gateway has no remote for are dropped (the latter reported in stats);
4. start the replicators that should run and are not running, stop those that run and
   should not;
5. hand subscription sync the topic partitions it should sync, with their remotes and
   choices (:class:`~georep.subsync.DesiredSyncs`): its supervisor
   (``subsync/supervisor.py``) runs the syncs, their change watches and side channels,
   and asks this manager only how far replication got (``replicating``, ``stored_to``,
   ``read_to``).

Policy removal and topic removal differ: a replicator whose topic is no longer
replicated to that remote (its policy changed or was deleted) is stopped *and its
subscription deleted* (the cursor would otherwise hold the topic's backlog forever); a
replicator whose topic disappeared from its namespace's listing is only stopped. A
subscription that could not be deleted (the local cluster was down) is retried on every
pass. When a topic is first seen in a run, its subscriptions are
listed and replication subscriptions for remotes the policy no longer names (left by a
gateway that was down while its policy changed) are deleted too.

New topics and partitions are picked up on the next pass; a cluster added to a policy
gets a replicator whose cursor starts at the EARLIEST retained entry of each topic (see
``replicator.py``).

Scale (docs/ARCHITECTURE.md "Scale"): replicators and syncs open their consumers and
producers through one semaphore per cluster (``clusters.py``), so a gateway started
beside 10,000 topics opens them at a pace each cluster answers. At most
``replicators_max`` replicators and ``sync_topics_max`` syncs run (``[limits]`` of the
configuration; ``limits.py`` has the defaults); past either, topics
are left out, a WARNING says how many, and ``/health`` answers degraded.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from georep import limits
from georep.client.errors import LinkError, said_once_per_cluster
from georep.client.refusals import RIGHTS_DOCUMENT, Refusal
from georep.domain.position import Position
from georep.domain.topic_name import InvalidTopicName, TopicName
from georep.gateway.cluster_endpoint import ClusterEndpoint, ClusterKind
from georep.gateway.clusters import ClusterLinks
from georep.gateway.errors import GatewayError
from georep.gateway.meta.replication_policies import ReplicationPolicyRepository
from georep.gateway.meta.subscription_sync_policies import SubscriptionSyncPolicyRepository
from georep.gateway.ownership import Shares, Sole
from georep.gateway.sync_choice import SyncChoices
from georep.gateway.watchdog import Watch
from georep.replicator.origin import REPLICATION_NAME_PREFIX
from georep.replicator.replicator import Replicator
from georep.replicator.settings import ReplicatorSettings
from georep.runtime.awaiting import awaiting, within
from georep.storage.errors import StorageError
from georep.subsync import DesiredSyncs, SyncSettings, SyncSupervisor, TopicSync

log = logging.getLogger(__name__)

Key = tuple[str, str]  # (topic partition, remote cluster)


@dataclass
class DiscoveryStats:
    passes: int = 0
    errors: int = 0
    last_pass_at: float | None = None
    last_error: str | None = None
    namespaces: int = 0
    topics: int = 0
    #: Clusters named by a policy that this gateway has no [remotes] entry for.
    unknown_clusters: set[str] = field(default_factory=set)
    #: Topic partitions left without replicators past the replicator limit.
    over_limit: int = 0
    pending_deletions: int = 0
    #: Topic partitions first seen whose stray replication subscriptions are still to be
    #: looked for (``gateway_sweep_topics_per_pass_max`` a pass): start-up work left.
    topics_to_sweep: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "passes": self.passes,
            "errorsCounter": self.errors,
            "lastPassTimestamp": self.last_pass_at,
            "lastError": self.last_error,
            "namespaces": self.namespaces,
            "topics": self.topics,
            "unknownClusters": sorted(self.unknown_clusters),
            "topicsOverLimit": self.over_limit,
            "pendingSubscriptionDeletions": self.pending_deletions,
            "topicsToSweep": self.topics_to_sweep,
        }


class ReplicationManager:
    def __init__(
        self,
        *,
        local: ClusterEndpoint,
        remotes: Mapping[str, ClusterEndpoint],
        store: ReplicationPolicyRepository,
        settings: ReplicatorSettings | None = None,
        discovery_interval_s: float = limits.gateway_discovery_interval_s_default,
        clock: Callable[[], float] = time.time,
        replicator_factory: Callable[..., Replicator] = Replicator,
        sync_settings: SyncSettings | None = None,
        replicators_max: int = limits.gateway_replicators_count_max,
        sync_topics_max: int = limits.sync_topics_count_max,
        ownership: Shares | None = None,
        stuck_after_s: float = limits.replicator_stuck_after_s_default,
        sync_policies: SubscriptionSyncPolicyRepository | None = None,
    ) -> None:
        self.local = local
        #: Which subscriptions each topic syncs beside the flagged (sync_choice.py); None:
        #: the configuration alone.
        self.sync_policies = sync_policies
        #: Which topic partitions this instance runs among the gateways of its cluster
        #: (ownership.py); alone, all of them.
        self.ownership: Shares = ownership or Sole(uuid.uuid4().hex[:8])
        self.replicators_max = replicators_max
        self.sync_topics_max = sync_topics_max
        #: Names this process's readers and writers where they must differ from another
        #: process's (the side topic's: side_channel.py).
        self.instance = self.ownership.instance
        self.remotes = dict(remotes)
        #: The links and admin clients of every cluster, and the pacing of opens on each
        #: (clusters.py).
        self.clusters = ClusterLinks(local, self.remotes)
        self.opening = self.clusters.opening
        self.local_link = self.clusters.local_link
        self.local_admin = self.clusters.local_admin
        self.remote_links = self.clusters.remote_links
        self.store = store
        self.settings = settings or ReplicatorSettings()
        self.discovery_interval_s = discovery_interval_s
        #: The watchdog's threshold (:meth:`heal_stalled`).
        self.stuck_after_s = stuck_after_s
        #: What the watchdog restarted, and says (watchdog.py).
        self.replication_watch: Watch[Key] = Watch(
            lambda key: f"replication to {key[1]}",
            "moved nothing on for {s:g} s or more while entries wait",
            "move again",
        )
        self.sync_watch: Watch[str] = Watch(
            lambda _topic: "subscription sync",
            "moved nothing on for {s:g} s or more while states or entries wait",
            "move again",
        )
        self._clock = clock
        self._replicator_factory = replicator_factory
        self.replicators: dict[Key, Replicator] = {}
        self.sync_settings = sync_settings or SyncSettings()
        #: The stored subscription-sync policies read at the last pass, over the
        #: configuration (built again only when they changed).
        self.sync_choices = SyncChoices(self.sync_settings, ())
        self._sync_policies_read: tuple[object, ...] = ()
        #: Subscription sync, handed the topic partitions to sync each pass: it runs the
        #: syncs, their change watches and side channels (subsync/supervisor.py).
        self.subsync = SyncSupervisor(
            local_cluster=local.name,
            local_link=self.local_link,
            local_admin=self.local_admin,
            beside_pulsar=local.kind is ClusterKind.PULSAR,
            instance=self.instance,
            settings=self.sync_settings,
            topics_max=sync_topics_max,
            replication=self,
            opening=self.opening,
        )
        #: Topic partitions this instance should run, and those of them it waits to start
        #: until the gateway that ran them has let go (ownership.py).
        self.partitions_owned = 0
        self.partitions_pending = 0
        self._topics: dict[str, list[str]] = {}  # namespace -> last known topics
        self._partitions: dict[str, int] = {}  # base topic -> partitions (0: none)
        self._seen: set[str] = set()  # topics whose stray subscriptions were swept
        self._pending_deletions: set[Key] = set()
        #: Policies and listings of the last complete pass (``_discover`` skips a pass
        #: that would decide the same).
        self._last_signature: object = None
        self.stats = DiscoveryStats()
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._watchdog: asyncio.Task[None] | None = None
        self._pass_lock = asyncio.Lock()

    # -- life cycle --

    def start(self) -> None:
        if self._task is None:
            loop = asyncio.get_running_loop()
            self._task = loop.create_task(self._loop(), name="discovery")
            self._watchdog = loop.create_task(self._watch_stalls(), name="watchdog")

    async def stop(self) -> None:
        """Stop every replicator (their subscriptions stay: replication resumes from
        them at the next start) and close the links."""
        for task in (self._task, self._watchdog):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._task = self._watchdog = None
        await self.subsync.stop()
        replicators, self.replicators = list(self.replicators.values()), {}
        await asyncio.gather(*(r.stop() for r in replicators), return_exceptions=True)
        await self.clusters.close()

    def poke(self) -> None:
        """Run a discovery pass now (after a policy change)."""
        self._wakeup.set()

    async def _loop(self) -> None:
        while True:
            self._wakeup.clear()
            try:
                await self._watched_pass()
            except asyncio.CancelledError:
                raise
            except (GatewayError, LinkError, StorageError) as error:
                self._record(error)
            except Exception as error:  # a bug: log it, keep the replicators running
                log.exception("discovery pass failed")
                self._record(error)
            with contextlib.suppress(TimeoutError):
                await within(self._wakeup.wait(), self.discovery_interval_s)

    async def _watched_pass(self) -> None:
        """One pass, said at WARNING with where it waits while it runs past
        ``limits.gateway_discovery_pass_slow_s``."""
        task = asyncio.ensure_future(self.discover())
        running_s = 0.0
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=limits.gateway_discovery_pass_slow_s)
                if done:
                    return task.result()
                running_s += limits.gateway_discovery_pass_slow_s
                log.warning(
                    "discovery pass still running after %.0f s, waiting in: %s",
                    running_s,
                    awaiting(task),
                )
        finally:
            if not task.done():
                task.cancel()

    # -- the watchdog --

    async def _watch_stalls(self) -> None:
        interval_s = self.stuck_after_s / 4
        while True:
            await asyncio.sleep(interval_s)
            try:
                await self.heal_stalled()
                self.subsync.say_snapshot_timeouts(interval_s)
            except asyncio.CancelledError:
                raise
            except Exception:  # a bug: say it, keep watching
                log.exception("watchdog pass failed")

    def stalled(self) -> dict[Key, Replicator]:
        """Replicators that moved no entry on for ``stuck_after_s`` while entries wait
        (a remote that refused a schema is said on its own and not counted)."""
        now = self._clock()
        return {
            key: replicator
            for key, replicator in self.replicators.items()
            if replicator.schema_refused is None and replicator.stalled_s(now) >= self.stuck_after_s
        }

    def stalled_syncs(self) -> dict[str, TopicSync]:
        """Subscription syncs stalled for ``stuck_after_s`` (SyncSupervisor.stalled)."""
        return self.subsync.stalled(self._clock(), self.stuck_after_s)

    @property
    def syncs(self) -> Mapping[str, TopicSync]:
        """topic partition -> its subscription sync, as run by ``subsync``."""
        return self.subsync.syncs

    @property
    def syncs_over_limit(self) -> int:
        return self.subsync.over_limit

    async def heal_stalled(self) -> None:
        """One watchdog pass (watchdog.py): restart each stalled replicator and sync (a
        fresh lookup and connections, as unloading the topic does in Pulsar), at most
        ``limits.replicator_restarts_max`` times until it moves again. Runs between
        discovery passes, never beside one."""
        async with self._pass_lock:
            due = self.replication_watch.restart_due(
                self.stalled(), set(self.replicators), self.stuck_after_s
            )
            due += self.sync_watch.restart_due(
                self.stalled_syncs(), set(self.syncs), self.stuck_after_s
            )
            await asyncio.gather(*(part.restart() for part in due))

    def _record(self, error: BaseException) -> None:
        self.stats.errors += 1
        self.stats.last_error = f"{type(error).__name__}: {error}"
        if not said_once_per_cluster(error):  # its client said it, once per cluster
            log.warning("discovery: %s", self.stats.last_error)

    # -- one pass --

    async def discover(self) -> None:
        async with self._pass_lock:
            await self._discover()

    async def _discover(self) -> None:
        policies = await self.store.list_replication_policies()
        namespace_policies = {p.name: p.clusters for p in policies if p.scope == "namespace"}
        topic_policies = {p.name: p.clusters for p in policies if p.scope == "topic"}
        await self._read_sync_policies()
        namespaces = set(namespace_policies) | set(self.sync_settings.namespaces)
        namespaces |= self.sync_choices.namespaces()
        for name in topic_policies:
            with contextlib.suppress(InvalidTopicName):
                namespaces.add(TopicName.parse(name).namespace)
        for gone in set(self._topics) - namespaces:
            del self._topics[gone]
        for namespace in sorted(namespaces):
            try:
                listed = await self.local_admin.list_topics(namespace)
            except LinkError as error:
                self._record(error)
                continue  # keep the last known topics of this namespace
            self._topics[namespace] = listed or []

        # Nothing changed since the last complete pass (policies, listings): the rest is
        # work per topic that would decide the same, every pass, at 10,000 topics.
        signature = (
            sorted(namespace_policies.items()),
            sorted(topic_policies.items()),
            self._sync_policies_read,
            sorted((namespace, tuple(topics)) for namespace, topics in self._topics.items()),
            self.ownership.generation,
        )
        if (
            signature == self._last_signature
            and not self._pending_deletions
            and not self.stats.topics_to_sweep
        ):
            self.stats.passes += 1
            self.stats.last_pass_at = self._clock()
            return
        errors_before = self.stats.errors

        unknown: set[str] = set()
        desired: dict[Key, int] = {}
        over_limit = 0
        for namespace, topics in sorted(self._topics.items()):
            for topic in topics:
                try:
                    parsed = TopicName.parse(topic)
                except InvalidTopicName:
                    continue
                clusters = topic_policies.get(topic)
                if clusters is None:
                    clusters = topic_policies.get(str(parsed.base))
                if clusters is None:
                    clusters = namespace_policies.get(namespace, ())
                wanted = [c for c in clusters if c != self.local.name]
                unknown.update(c for c in wanted if c not in self.remotes)
                targets = [c for c in wanted if c in self.remotes]
                if not targets:
                    continue
                if len(desired) + len(targets) > self.replicators_max:
                    over_limit += 1
                    continue
                partitions = await self._partitions_of(parsed, topics)
                for remote in targets:
                    desired[(topic, remote)] = partitions

        listed_topics = {t for topics in self._topics.values() for t in topics}
        owned = self.ownership
        owned.forget(listed_topics)
        await self._hand_over()
        for key in [k for k in self.replicators if k not in desired]:
            replicator = self.replicators.pop(key)
            namespace = replicator.topic_name.namespace
            if namespace in self._topics and key[0] not in listed_topics:
                await replicator.stop()
                log.info("replicator %s -> %s stopped: the topic is gone", *key)
            else:  # the policy no longer names the remote (or is gone)
                await self._stop_and_delete(key, replicator)
        await owned.publish()  # what is another's now has stopped: the others may start it
        started = 0
        for key, partitions in desired.items():
            if key not in self.replicators and owned.may_run(key[0]):
                self._start(key, partitions)
                started += 1
        if started:  # one line a pass, not one per topic: thousands start at once
            log.info("%d replicators started (%d running)", started, len(self.replicators))
        remotes: dict[str, frozenset[str]] = {}
        for topic, remote in desired:
            remotes[topic] = remotes.get(topic, frozenset()) | {remote}
        await self.subsync.update(
            DesiredSyncs(
                topics={
                    namespace: [t for t in topics if owned.target(t)]
                    for namespace, topics in self._topics.items()
                },
                remotes=remotes,
                choices=self.sync_choices,
                may_run=owned.may_run,
            )
        )
        # After the starts: what it looks for is never a replicator the pass wants.
        await self._sweep_new_topics({t for t in listed_topics if owned.target(t)}, desired)
        for key in sorted(self._pending_deletions):
            if not owned.target(key[0]):
                self._pending_deletions.discard(key)  # its owner's sweep finds it
            elif key not in desired:
                await self._delete_subscription(key)
            else:
                self._pending_deletions.discard(key)

        owned_topics = {t for t in listed_topics if owned.target(t)}
        running = {t for t, _ in self.replicators} | set(self.syncs)
        to_run = {t for t, _ in desired} | self.subsync.wanted  # one set: 10,000 topics
        self.partitions_owned = len(owned_topics)
        self.partitions_pending = len((owned_topics & to_run) - running)
        # A pass that met an error (a partition count it could not ask) is done again, and
        # so is one that left partitions waiting for another gateway to let go.
        complete = self.stats.errors == errors_before and not self.partitions_pending
        self._last_signature = signature if complete else None
        stats = self.stats
        stats.passes += 1
        stats.last_pass_at = self._clock()
        stats.namespaces = len(self._topics)
        stats.topics = len(listed_topics)
        stats.unknown_clusters = unknown
        if over_limit and over_limit != stats.over_limit:
            log.warning(
                "%d topic partitions are not replicated: this gateway runs at most %d"
                " replicators ([limits] replicators_max)",
                over_limit,
                self.replicators_max,
            )
        stats.over_limit = over_limit
        stats.pending_deletions = len(self._pending_deletions)

    async def _read_sync_policies(self) -> None:
        """The stored subscription-sync policies, in one query a pass (like the
        replication policies'); the topics' choices are built again only when they
        changed (sync_choice.py)."""
        if self.sync_policies is None:
            return
        records = await self.sync_policies.list_policies()
        read = tuple((p.scope, p.name, p.subscriptions, p.pattern) for p in records)
        if read != self._sync_policies_read:
            self.sync_choices = SyncChoices(self.sync_settings, records)
            self._sync_policies_read = read

    async def _hand_over(self) -> None:
        """Stop the replicators and syncs of partitions that are another gateway's now
        (their subscriptions stay: the new owner resumes from them)."""
        owned = self.ownership
        moved = [key for key in self.replicators if not owned.target(key[0])]
        stopped = await asyncio.gather(
            *(self.replicators.pop(key).stop() for key in moved),
            self.subsync.hand_over(owned.target),
            return_exceptions=True,
        )
        moved_syncs = stopped[-1] if isinstance(stopped[-1], int) else 0
        if not moved and not moved_syncs:
            return
        log.info(
            "%d replicators and %d syncs stopped: their partitions are another gateway's",
            len(moved),
            moved_syncs,
        )

    # -- what subscription sync asks of replication (subsync.Replication) --

    def replicating(self, topic: str, remote: str) -> bool:
        replicator = self.replicators.get((topic, remote))
        if replicator is None:
            return False
        return replicator.local_connected and replicator.remote_connected

    def stored_to(self, topic: str, remote: str) -> Position | None:
        replicator = self.replicators.get((topic, remote))
        return None if replicator is None else replicator.stored_to

    def read_to(self, topic: str) -> Position | None:
        """How far this gateway's replicators of ``topic`` read the local topic: a sync
        reader that stops short of it is stalled (TopicSync.stalled_s)."""
        replicators = (self.replicators.get((topic, remote)) for remote in self.remotes)
        read = [r.read_to for r in replicators if r is not None and r.read_to is not None]
        return max(read, default=None)

    async def _partitions_of(self, name: TopicName, listed: list[str]) -> int:
        """The partition count of ``name``'s base topic (0 when not partitioned), asked of
        the local admin REST once per base topic, and again when more partitions show."""
        if not name.is_partition:
            return 0
        base = str(name.base)
        seen = self._partitions.get(base)
        if seen is not None and name.partition_index < seen:
            return seen
        try:
            count = await self.local_admin.partitions(name.base)
        except LinkError as error:  # infer from the listing; asked again next pass
            self._record(error)
            prefix = f"{base}-partition-"
            listed_count = sum(1 for t in listed if t.startswith(prefix))
            return max(listed_count, name.partition_index + 1)
        if not count:
            # A topic that only looks like a partition ("x-partition-0" created on its
            # own): replicated as the plain topic it is.
            count = 0
        self._partitions[base] = count
        return count

    def _remote_settings(self, remote: str) -> ReplicatorSettings:
        """The replicators' settings towards ``remote``: its window (docs/WAN.md)."""
        endpoint = self.remotes[remote]
        return dataclasses.replace(
            self.settings,
            pending_sends_count_max=min(
                self.settings.pending_sends_count_max, endpoint.replication_window_entries
            ),
            pending_sends_bytes_max=min(
                self.settings.pending_sends_bytes_max, endpoint.replication_window_bytes
            ),
        )

    def _start(self, key: Key, partitions: int) -> None:
        topic, remote = key
        replicator = self._replicator_factory(
            topic=topic,
            local_cluster=self.local.name,
            remote_cluster=remote,
            local_link=self.local_link,
            remote_link=self.clusters.remote_links[remote],
            remote_admin=self.clusters.remote_admins[remote],
            local_admin=self.local_admin,
            partitions=partitions,
            settings=self._remote_settings(remote),
            opening=self.opening,
            remote_opening=self.clusters.remote_openings[remote],
        )
        self.replicators[key] = replicator
        self._pending_deletions.discard(key)
        replicator.start()
        log.debug("replicator %s -> %s started", topic, remote)

    async def _stop_and_delete(self, key: Key, replicator: Replicator) -> None:
        try:
            await replicator.stop(delete_subscription=True)
            log.info("replicator %s -> %s stopped by policy; subscription deleted", *key)
        except LinkError as error:
            log.warning("replicator %s -> %s: deleting its subscription: %s", *key, error)
            self._pending_deletions.add(key)

    async def _delete_subscription(self, key: Key) -> None:
        topic, remote = key
        try:
            await self.local_admin.delete_subscription(
                TopicName.parse(topic), f"{REPLICATION_NAME_PREFIX}{remote}"
            )
        except LinkError as error:
            if error.retriable:
                return  # next pass
            log.warning("deleting the subscription of %s -> %s: %s", topic, remote, error)
        self._pending_deletions.discard(key)

    async def _sweep_new_topics(self, listed: set[str], desired: Mapping[Key, int]) -> None:
        """Find stray replication subscriptions of topics first seen in this run (their
        deletion follows in the pass); the topics' listings are asked together."""
        fresh = sorted(listed - self._seen)[: limits.gateway_sweep_topics_per_pass_max]

        async def listing(topic: str) -> list[str]:
            return await self.local_admin.subscriptions(TopicName.parse(topic))

        answers = await asyncio.gather(*map(listing, fresh), return_exceptions=True)
        for topic, answer in zip(fresh, answers, strict=True):
            if isinstance(answer, LinkError | InvalidTopicName):
                self._record(answer)
                continue
            if isinstance(answer, BaseException):
                raise answer
            self._seen.add(topic)
            for subscription in answer:
                if not subscription.startswith(REPLICATION_NAME_PREFIX):
                    continue
                remote = subscription.removeprefix(REPLICATION_NAME_PREFIX)
                if (topic, remote) not in desired:
                    log.info("deleting stray subscription %s of %s", subscription, topic)
                    self._pending_deletions.add((topic, remote))
        if len(self._seen) > limits.gateway_namespace_topics_max:
            self._seen = set(listed)
        self.stats.topics_to_sweep = len(listed - self._seen)

    # -- stats --

    def sync_stats(self, topics: list[str] | None = None) -> dict[str, Any]:
        """Subscription sync's summary, with the stats of ``topics`` (None: every one)."""
        return self.subsync.stats(topics)

    def replicator_stats(self, keys: list[Key] | None = None) -> list[dict[str, Any]]:
        chosen = sorted(self.replicators) if keys is None else keys
        return [self.replicators[key].stats() for key in chosen if key in self.replicators]

    def admin_requests(self) -> dict[str, int]:
        return self.clusters.admin_requests()

    def admin_requests_by_kind(self) -> dict[str, dict[str, int]]:
        return self.clusters.admin_requests_by_kind()

    def unreachable(self) -> dict[str, list[str]]:
        return self.clusters.unreachable()

    def refused(self) -> dict[str, dict[str, Refusal]]:
        return self.clusters.refused()

    def replication_summary(self) -> dict[str, dict[str, Any]]:
        """Per remote, how far behind its replicators are: entries left on the local
        topics (``replicationBacklog``, summed over the replicators that know theirs),
        the oldest unreplicated entry's age, the messages a second going out now, and
        how many are not connected or stalled (:meth:`stalled`). After an outage the
        backlog falls while ``catchingUp`` (``/health``). Read from the replicators'
        fields, not their stats: ``/health`` is asked often, beside 10,000 of them."""
        out: dict[str, dict[str, Any]] = {}
        stalled = self.stalled()
        for key, replicator in self.replicators.items():
            entry = out.setdefault(
                key[1],
                {"replicators": 0, "notConnected": 0, "stalled": 0, "restarts": 0,
                 "backlogEntries": 0, "delayS": 0.0, "msgRateOut": 0.0},
            )  # fmt: skip
            entry["replicators"] += 1
            entry["notConnected"] += not replicator.connected
            entry["stalled"] += key in stalled
            entry["backlogEntries"] += replicator.backlog_entries or 0
            entry["delayS"] = max(entry["delayS"], replicator.delay_s or 0.0)
            entry["msgRateOut"] += replicator.rates["msgRateOut"]
        for remote, entry in out.items():
            entry["restarts"] = self.restarts_to(remote)
            entry["catchingUp"] = entry["backlogEntries"] > 0 and entry["msgRateOut"] > 0
            entry["delayS"] = round(entry["delayS"], 3)
            entry["msgRateOut"] = round(entry["msgRateOut"], 1)
        return out

    def restarts_to(self, remote: str) -> int:
        """Restarts of stuck replicators towards ``remote`` since the start."""
        return self.replication_watch.restarts.get(f"replication to {remote}", 0)

    def problems(self) -> list[str]:
        """What keeps this gateway from doing all it was asked (``/health`` degraded)."""
        out = []
        if self.stats.over_limit:
            out.append(
                f"{self.stats.over_limit} topic partitions not replicated:"
                f" more than {self.replicators_max} replicators ([limits] replicators_max)"
            )
        for name, reasons in self.unreachable().items():
            out += [f"cluster {name} unreachable: {reason}" for reason in reasons]
        for name, refusals in self.refused().items():
            out += [
                f"cluster {name} refused the gateway's role: {operation}: {refusal.reason}"
                f" ({refusal.count} times; rights: {RIGHTS_DOCUMENT})"
                for operation, refusal in sorted(refusals.items())
            ]
        refused = [r for r in self.replicators.values() if r.schema_refused is not None]
        if refused:
            out.append(
                f"{len(refused)} topic partitions' replication stopped: the remote refused"
                f" a schema (first {refused[0]!r}: {refused[0].schema_refused})"
            )
        out += self.replication_watch.problems(self.stalled(), self.stuck_after_s)
        out += self.sync_watch.problems(self.stalled_syncs(), self.stuck_after_s)
        out += self.subsync.problems()
        return out
