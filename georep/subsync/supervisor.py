"""Subscription sync's supervisor: the desired set of synced topic partitions → the
syncs, change watches and marker channels that run.

The gateway's replication manager discovers topics and policies; once a pass it hands
this supervisor what should be synced (:class:`DesiredSyncs`: the listed topic
partitions per namespace that are this gateway's, the remotes each replicates to, which
subscriptions each syncs) and asks nothing else of subscription sync. The supervisor:

1. leaves out the side topics (they carry the sync itself, ``side_channel.py``) and,
   past ``topics_max``, the rest (a WARNING says how many; ``problems`` says it too);
2. stops the syncs no longer wanted, tells the running ones their remotes and choice
   (newly chosen subscriptions go out at once), starts the missing ones that may run
   here now (another gateway may still run one: it starts at a later pass);
3. keeps one :class:`ChangeWatch` per namespace with syncs and closes what the port
   shares for namespaces without (beside Pulsar, their side channels).

Pulsar keeps its ``PersistentReplicator`` and its ``ReplicatedSubscriptionsController``
apart in the same way: replication moves entries, subscription sync rides on it and asks
it only how far it got (:class:`Replication`: connected, stored to, read to).

All of a sync's decisions are its core's (``core.py``); this module only runs them. Its
state is the set of running syncs: nothing here that a restart cannot rebuild.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from georep.client.admin import ClusterAdminClient
from georep.client.link import PulsarLink
from georep.domain.position import Position
from georep.domain.topic_name import InvalidTopicName, TopicName
from georep.subsync.change_watch import ChangeWatch
from georep.subsync.core import SyncCore
from georep.subsync.ports import GeorepPort, SyncPort
from georep.subsync.pulsar_port import PulsarPort
from georep.subsync.settings import NamespaceSync, SyncSettings
from georep.subsync.side_channel import is_side_topic, side_topic
from georep.subsync.topic_sync import TopicSync

log = logging.getLogger(__name__)


class Replication(Protocol):
    """What subscription sync asks of the gateway's replication, per topic partition."""

    def replicating(self, topic: str, remote: str) -> bool:
        """Both sides of ``topic``'s replicator to ``remote`` are connected."""
        ...

    def stored_to(self, topic: str, remote: str) -> Position | None:
        """How far ``remote`` stores ``topic``, by this gateway's replicator (None: none)."""
        ...

    def read_to(self, topic: str) -> Position | None:
        """How far this gateway's replicators of ``topic`` read the local topic."""
        ...


class Choices(Protocol):
    """Which subscriptions a topic partition syncs (``gateway/sync_choice.py``)."""

    def for_topic(self, name: TopicName) -> NamespaceSync: ...


@dataclass(frozen=True, slots=True)
class DesiredSyncs:
    """What the gateway wants synced, handed over once a discovery pass."""

    #: namespace -> its listed topic partitions that are this gateway's to sync
    topics: Mapping[str, Sequence[str]]
    #: topic partition -> the clusters it replicates to (absent: none, replicated in only)
    remotes: Mapping[str, frozenset[str]]
    choices: Choices
    #: Whether a topic partition may start here now (False: another gateway still runs it).
    may_run: Callable[[str], bool]


class SyncSupervisor:
    def __init__(
        self,
        *,
        local_cluster: str,
        local_link: PulsarLink,
        local_admin: ClusterAdminClient,
        beside_pulsar: bool,
        instance: str,
        settings: SyncSettings,
        topics_max: int,
        replication: Replication,
        opening: asyncio.Semaphore,
    ) -> None:
        self.local_cluster = local_cluster
        self.settings = settings
        self.topics_max = topics_max
        self._local_link = local_link
        self._replication = replication
        #: Shared with the replicators: the local cluster's opens, paced.
        self._opening = opening
        #: How subscription sync reads and changes the local cluster's subscriptions, and
        #: where its markers travel: a georep cluster's own paths, or real Pulsar's
        #: (``instance`` names this process's side topic reader and writer).
        self.port: SyncPort[Any]
        if beside_pulsar:
            self.port = PulsarPort(
                local_admin,
                local_link,
                local_cluster=local_cluster,
                instance=instance,
                opening=opening,
                scan_interval_s=settings.pulsar_scan_interval_s,
                hot_topics_max=settings.pulsar_hot_topics_max,
                hot_requests_per_s=settings.pulsar_hot_requests_per_s,
                synced=lambda topic: topic in self.syncs,
            )
        else:
            self.port = GeorepPort(
                local_admin, local_link, local_cluster=local_cluster, opening=opening
            )
        #: topic partition -> its subscription sync (topic_sync.py)
        self.syncs: dict[str, TopicSync] = {}
        #: namespace -> its syncs, its change watch
        self._namespace_syncs: dict[str, dict[str, TopicSync]] = {}
        self.watches: dict[str, ChangeWatch[Any]] = {}
        #: Topic partitions wanted at the last update (within the limit).
        self.wanted: set[str] = set()
        self.over_limit = 0
        #: Per synced topic partition, its snapshots timed out at the last look
        #: (:meth:`say_snapshot_timeouts`).
        self._snapshot_timeouts_seen: dict[str, int] = {}
        self._said_without_origin: set[str] = set()

    # -- the desired set --

    async def update(self, desired: DesiredSyncs) -> None:
        """Bring what runs to ``desired`` (the module docstring's steps 1 to 3)."""
        wanted: dict[str, str] = {}
        for namespace, topics in sorted(desired.topics.items()):
            for topic in topics:
                if not is_side_topic(topic):
                    wanted[topic] = namespace
        over = max(0, len(wanted) - self.topics_max)
        if over and over != self.over_limit:
            log.warning(
                "%d topic partitions are not synced: this gateway syncs at most %d"
                " ([limits] sync_topics_max)",
                over,
                self.topics_max,
            )
        self.over_limit = over
        wanted = dict(list(wanted.items())[: self.topics_max])
        self.wanted = set(wanted)
        for topic in [t for t in self.syncs if t not in wanted]:
            await self._drop(topic)
        for topic, namespace in wanted.items():
            remotes = desired.remotes.get(topic, frozenset())
            try:
                choice = desired.choices.for_topic(TopicName.parse(topic))
            except InvalidTopicName:
                continue
            sync = self.syncs.get(topic)
            if sync is not None:
                sync.core.set_remotes(remotes)
                if sync.core.choose(choice):
                    sync.state_changed()  # newly chosen subscriptions go out now
            elif desired.may_run(topic):
                self._start(topic, namespace, remotes, choice)
        await self._watch_namespaces()

    def _start(
        self, topic: str, namespace: str, remotes: frozenset[str], choice: NamespaceSync
    ) -> None:
        core = SyncCore(
            self.local_cluster,
            namespace_sync=choice,
            settings=self.settings,
            remotes=remotes,
            in_band=self.port.in_band,
            on_copy_without_origin=self._copy_without_origin,
        )
        replication = self._replication
        sync = TopicSync(
            topic=topic,
            core=core,
            local_link=self._local_link,
            port=self.port,
            connected=functools.partial(replication.replicating, topic),
            stored_to=functools.partial(replication.stored_to, topic),
            read_elsewhere=functools.partial(replication.read_to, topic),
            markers_stored_to=self._markers_stored_to(topic),
            opening=self._opening,
        )
        self.syncs[topic] = sync
        self._namespace_syncs.setdefault(namespace, {})[topic] = sync
        sync.start()
        sync.state_changed()  # read once: it may have changed before the watch began

    def _markers_stored_to(self, topic: str) -> Callable[[str], Position | None] | None:
        """Beside real Pulsar: how far a remote stores the namespace's side topic, which
        carries ``topic``'s markers, by this gateway's replicator of it (None where
        Pulsar replicates it: no replicator here, not known). In band: None, the topic's
        own replication says it."""
        if self.port.in_band:
            return None
        carrier = str(side_topic(TopicName.parse(topic)))
        return functools.partial(self._replication.stored_to, carrier)

    async def hand_over(self, owned: Callable[[str], bool]) -> int:
        """Stop the syncs of topic partitions that are another gateway's now; how many."""
        moved = [topic for topic in self.syncs if not owned(topic)]
        await asyncio.gather(*(self._drop(topic) for topic in moved), return_exceptions=True)
        return len(moved)

    async def _drop(self, topic: str) -> None:
        sync = self.syncs.pop(topic)
        self._namespace_syncs.get(sync.topic_name.namespace, {}).pop(topic, None)
        await sync.stop()

    async def _watch_namespaces(self) -> None:
        """One change watch per namespace with syncs; what markers of namespaces without
        syncs shared (beside Pulsar, their side channels) closed."""
        for namespace in [n for n, syncs in self._namespace_syncs.items() if not syncs]:
            del self._namespace_syncs[namespace]
        for namespace in [n for n in self.watches if n not in self._namespace_syncs]:
            await self.watches.pop(namespace).stop()
        await self.port.close_idle()
        for namespace in self._namespace_syncs:
            if namespace not in self.watches:
                watch = ChangeWatch(namespace, port=self.port, syncs=self._syncs_of(namespace))
                self.watches[namespace] = watch
                watch.start()

    def _syncs_of(self, namespace: str) -> Callable[[], Mapping[str, TopicSync]]:
        def syncs() -> Mapping[str, TopicSync]:
            return self._namespace_syncs.get(namespace, {})

        return syncs

    async def stop(self) -> None:
        """Stop every watch, sync and what the port runs for all of them."""
        watches, self.watches = list(self.watches.values()), {}
        await asyncio.gather(*(w.stop() for w in watches), return_exceptions=True)
        syncs, self.syncs = list(self.syncs.values()), {}
        self._namespace_syncs = {}
        await asyncio.gather(*(s.stop() for s in syncs), return_exceptions=True)
        await self.port.stop()

    # -- the watchdog's questions --

    def stalled(self, now: float, stuck_after_s: float) -> dict[str, TopicSync]:
        """Syncs with applies waiting and none done for ``stuck_after_s``, or whose reader
        read nothing that long while T holds entries it has not reached."""
        syncs = self.syncs.items()
        return {topic: sync for topic, sync in syncs if sync.stalled_s(now) >= stuck_after_s}

    def say_snapshot_timeouts(self, interval_s: float) -> None:
        """One INFO line for the snapshots that timed out since the last look, over all
        topic partitions, with the remotes that did not answer (per topic at DEBUG; the
        counts are ``georep_subsync_snapshots_timed_out_total``). A busy namespace whose
        remote is slow makes one line a pass, not one a topic."""
        topics = snapshots = 0
        silent: collections.Counter[str] = collections.Counter()
        seen = self._snapshot_timeouts_seen
        for topic, sync in self.syncs.items():
            count = sync.core.controller.stats.timed_out
            grew = count - seen.get(topic, 0)
            seen[topic] = count
            if grew > 0:
                topics += 1
                snapshots += grew
                silent.update(sync.core.controller.unanswered)
        for topic in [t for t in seen if t not in self.syncs]:
            del seen[topic]
        if topics:
            log.info(
                "%d snapshots timed out on %d topic partitions in the last %.0f s; not"
                " answered by %s",
                snapshots,
                topics,
                interval_s,
                ", ".join(f"{remote} ({n})" for remote, n in sorted(silent.items())) or "-",
            )

    # -- what it says --

    def _copy_without_origin(self, source: str) -> None:
        """A sync read a copy from ``source`` that names no origin: said once per cluster
        (every topic meets it), counted per topic in the stats and on ``/health``."""
        if source not in self._said_without_origin:
            self._said_without_origin.add(source)
            log.warning(
                "copies replicated from cluster %s name no origin position, so"
                " acknowledgements made there cannot be synced to them (Pulsar 3.0's replicator"
                " stamps none): run the gateway's own replication"
                " (replicate and sync) or Pulsar 4.0 (docs/PULSAR.md)",
                source,
            )

    def without_origin(self) -> dict[str, int]:
        """Per source cluster, how many synced topic partitions read copies from it that
        name no origin (since the last that named one)."""
        out: dict[str, int] = {}
        for sync in self.syncs.values():
            for source in sync.core.copies_without_origin:
                out[source] = out.get(source, 0) + 1
        return out

    def stats(self, topics: list[str] | None = None) -> dict[str, Any]:
        """Subscription sync's summary, with the stats of ``topics`` (None: every synced
        topic partition; ``GET /stats`` pages them)."""
        chosen = sorted(self.syncs) if topics is None else topics
        return {
            "mode": self.settings.default.mode.value,
            "subscriptions": self.settings.default.subscriptions.value,
            "topicsSynced": len(self.syncs),
            "topicsConnected": sum(1 for s in self.syncs.values() if s.connected),
            "topicsFailing": sum(1 for s in self.syncs.values() if s.failing),
            "topicsOverLimit": self.over_limit,
            "topicsLimit": self.topics_max,
            "watches": [self.watches[n].to_json() for n in sorted(self.watches)],
            "sideChannels": self.port.marker_channels(),
            "changes": self.port.change_stats(),
            "topics": [self.syncs[topic].stats() for topic in chosen if topic in self.syncs],
        }

    def problems(self) -> list[str]:
        """What keeps subscription sync from doing all it was asked (``/health``): topics
        over the limit, copies naming no origin, syncs that cannot attach, watches that
        cannot follow changes, the port's own."""
        out = []
        if self.over_limit:
            out.append(
                f"{self.over_limit} topic partitions not synced:"
                f" more than {self.topics_max} ([limits] sync_topics_max)"
            )
        for source, count in sorted(self.without_origin().items()):
            out.append(
                f"{count} topic partitions' copies from cluster {source} name no origin:"
                " acknowledgements made there are not synced (Pulsar's replicator stamps no"
                " source position on 3.0; docs/PULSAR.md)"
            )
        failing = sum(1 for s in self.syncs.values() if s.failing)
        if failing:
            out.append(f"{failing} topic partitions' subscription sync cannot attach")
        for watch in self.watches.values():
            if watch.failing:
                out.append(f"changes of {watch.namespace} unknown: {watch.last_error}")
        out += self.port.problems()
        return out
