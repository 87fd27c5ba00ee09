"""Subscription sync of one topic partition: the gateway's I/O around :class:`SyncCore`.

Per synced topic partition T the gateway of cluster L holds, on L only (public
interfaces: the binary protocol and the admin REST)::

    reader   non-durable subscription georep.sync on T, from the earliest entry:
             every entry (markers included) -> SyncCore.on_entry
    states   when T's subscriptions changed (state_changed(), told by the namespace's
             ChangeWatch, change_watch.py), after the reader read a marker or entries a
             state was waiting for, and once after each (re)attach: the port's
             states of T -> SyncCore.on_state; at most one read per poll_interval_s
    clock    SyncCore.tick, only while the core wants_clock() (a snapshot in flight or
             due, a silent remote to probe): an idle topic sleeps until told
    writer   the markers SyncCore asks for, through T's marker route, which the port
             chose: in band, producer georep.sync.<L> on T (ports.py); beside real
             Pulsar, the namespace's side topic (side_channel.py)
    hearing  what the route hears besides the reader (beside real Pulsar, T's markers
             from the side topic) -> SyncCore.on_side_marker
    applier  the states SyncCore asks to apply, one at a time, in order, retried
             until they succeed, through the port

Everything but the reader goes through the cluster's
:class:`~georep.subsync.ports.SyncPort`, and nothing here depends on where markers
travel: that is the port's (its route) and the core's (what it writes, and when it
writes a state again). Attaching waits for the gateway's ``opening``
semaphore, so thousands of syncs starting together are paced. A sync that cannot attach
retries with a growing delay (``limits.sync_retry_s_initial`` to ``_max``), says so at
WARNING once per new error, and counts its failures (``/metrics``, ``/health``).

A reconnecting reader resumes where it stopped (the sync's indexes and caches are
kept); only a new TopicSync reads T from its beginning. Nothing lives only in memory
that cannot be rebuilt from T: after a gateway restart the indexes and caches are rebuilt
from what T holds, and markers read again are harmless (MDPs never move backwards,
ranges only add, stale snapshot answers are ignored, old requests are not answered).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from georep import limits
from georep.client.consumer import InitialPosition, LinkConsumer, ReceivedEntry
from georep.client.errors import LinkError, moved, said_once_per_cluster
from georep.client.link import PulsarLink
from georep.client.producer import SendReceipt
from georep.domain.position import Position
from georep.domain.topic_name import TopicName
from georep.runtime.awaiting import stopped_within, within
from georep.runtime.retry import Backoff, RetryPolicy, sync_policy
from georep.snapshots.snapshot_controller import SnapshotStats
from georep.subsync.core import AppliedStats, Apply, SubscriptionState, SyncCore, WriteMarker
from georep.subsync.exposure import Exposure
from georep.subsync.ports import LastEntry, SideMarker, SyncPort

log = logging.getLogger(__name__)

READER_SUBSCRIPTION = "georep.sync"


class TopicSync:
    def __init__(
        self,
        *,
        topic: str,
        core: SyncCore,
        local_link: PulsarLink,
        port: SyncPort[Any],
        connected: Callable[[str], bool],
        stored_to: Callable[[str], Position | None] = lambda remote: None,
        read_elsewhere: Callable[[], Position | None] = lambda: None,
        markers_stored_to: Callable[[str], Position | None] | None = None,
        opening: asyncio.Semaphore | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.topic = topic
        self.topic_name = TopicName.parse(topic)
        self.core = core
        self._link = local_link
        self._port = port
        self._connected = connected
        #: How far a remote stores T (its replicator's word), for the exposure.
        self._stored_to = stored_to
        #: How far this gateway's replicators of T read it: entries the reader must
        #: reach too (:meth:`stalled_s`).
        self._read_elsewhere = read_elsewhere
        #: Beside the topic: how far a remote stores the topic its markers travel on
        #: (None: as ``stored_to``, the markers travel in T).
        self._markers_stored_to = markers_stored_to
        self._opening = opening or asyncio.Semaphore(limits.gateway_opening_count_max)
        self._markers = port.markers(self.topic_name)
        self._clock = clock
        self._task: asyncio.Task[None] | None = None
        self._applies: collections.deque[Apply] = collections.deque()
        self._apply_wakeup = asyncio.Event()
        self._apply_room = asyncio.Event()
        self._apply_room.set()
        #: Wakes the watch loop: a state read is due, or the clock is wanted again.
        self._kick = asyncio.Event()
        self._state_due = False
        #: The watch loop sleeps until kicked (no clock wanted when it began to wait).
        self._clock_idle = False
        self._was_connected: dict[str, bool] = {}
        self._last_states: dict[str, SubscriptionState] = {}
        self._last_states_at: float | None = None
        #: When the namespace's watch last said T changed (``state_changed``).
        self.told_at: float | None = None
        self.markers_written: dict[str, int] = {}
        self.apply_failures = 0
        self.attach_failures = 0
        self.state_reads = 0
        self.last_error: str | None = None
        self.failing_since: float | None = None
        self.connected = False
        #: When an apply last succeeded, or none waited: what the gateway's watchdog
        #: measures a stall from (:meth:`stalled_s`); its restarts since.
        self.progressed_at = clock()
        self.restarts = 0
        #: When the reader last read an entry (or attached), and the furthest own marker
        #: stored on T past what it read: a reader that stopped short of entries T holds
        #: is a stall even with no apply waiting (the source moves, nothing arrives).
        self._read_at = clock()
        self._own_unread: Position | None = None
        self._behind_since: float | None = None
        self.core.set_sequence_floor(int(clock() * 1_000_000))

    def __repr__(self) -> str:
        return f"TopicSync({self.topic} on {self.core.local_cluster})"

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=repr(self))
            self._markers.start()

    async def stop(self) -> None:
        self._markers.stop()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def restart(self) -> bool:
        """Detach and attach again (a fresh lookup and reader; the applies waiting stay
        queued): the watchdog's heal. False when the running task did not end within
        ``limits.replicator_restart_wait_s``, said at ERROR with where it waits."""
        self.restarts += 1
        if not await stopped_within(
            self.stop(), self._task, self, limits.replicator_restart_wait_s
        ):
            return False
        self.progressed_at = self._read_at = self._clock()
        self._behind_since = None
        self.start()
        return True

    def stalled_s(self, now: float) -> float:
        """Seconds without a successful apply while applies wait, or, while attached,
        without an entry read while T holds entries the reader has not reached (an own
        marker stored past it, or entries this gateway's replicator of T read): the
        longer of the two; 0 with neither."""
        if not self._applies:
            self.progressed_at = max(self.progressed_at, now)
            applying = 0.0
        else:
            applying = max(0.0, now - self.progressed_at)
        return max(applying, self._reader_behind_s(now))

    def _reader_behind_s(self, now: float) -> float:
        last = self.core.last_read
        if self._own_unread is not None and last is not None and last >= self._own_unread:
            self._own_unread = None  # read back
        ahead = [
            p
            for p in (self._own_unread, self._read_elsewhere())
            if p is not None and p != Position.LATEST and (last is None or p > last)
        ]
        if not ahead or not self.connected:
            self._behind_since = None
            return 0.0
        if self._behind_since is None:
            self._behind_since = now
        return max(0.0, now - max(self._behind_since, self._read_at))

    def state_changed(self) -> None:
        """T's subscriptions changed (or may have): read their states soon."""
        self.told_at = self._clock()
        self._read_states_soon()

    def _read_states_soon(self) -> None:
        self._state_due = True
        self._kick.set()

    # -- the loop --

    async def _run(self) -> None:
        backoff = Backoff(sync_policy())
        while True:
            consumer = None
            try:
                async with self._opening:
                    consumer = await self._reader()
                self.connected = True
                self._read_at = self._clock()
                self.last_error = None
                self.failing_since = None
                backoff.reset()
                self._read_states_soon()  # what changed while detached
                await self._serve(consumer)
            except asyncio.CancelledError:
                raise
            except (LinkError, ConnectionError) as error:
                # A cluster that cannot be reached is said once by its link, not per topic.
                self._failed(str(error), quiet=said_once_per_cluster(error) or moved(error))
            except Exception as error:  # a bug: say so, and do not spin on it
                log.exception("%s: failed", self)
                self._failed(repr(error))
            finally:
                self.connected = False
                await self._markers.close_writer()
                if consumer is not None:
                    with contextlib.suppress(Exception):
                        await consumer.close()
            await backoff.wait()

    def _failed(self, error: str, *, quiet: bool = False) -> None:
        self.attach_failures += 1
        if self.failing_since is None:
            self.failing_since = self._clock()
        if error != self.last_error and not quiet:
            log.warning("%s: %s; retrying", self, error)
        self.last_error = error

    async def _reader(self) -> LinkConsumer:
        last = self.core.last_read
        return await self._link.subscribe(
            self.topic,
            READER_SUBSCRIPTION,
            durable=False,
            initial_position=InitialPosition.EARLIEST,
            start_message_id=last,
            consumer_name=f"georep-sync-{self.core.local_cluster}",
        )

    async def _serve(self, consumer: LinkConsumer) -> None:
        loop = asyncio.get_running_loop()
        tasks = [
            loop.create_task(self._read(consumer), name=f"{self} read"),
            loop.create_task(self._watch(), name=f"{self} states"),
            loop.create_task(self._apply_loop(), name=f"{self} apply"),
        ]
        for listening in self._markers.listeners(self._hear):
            tasks.append(loop.create_task(listening, name=f"{self} side"))
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    @staticmethod
    def _acknowledge_as_read(consumer: LinkConsumer, entry: ReceivedEntry, unacked: int) -> int:
        """The broker stops dispatching to a consumer past
        ``limits.consumer_unacked_messages_max`` unacknowledged messages; a reader's
        cursor is non-durable, so acknowledging only keeps it flowing. Returns the
        messages still unacknowledged."""
        unacked += entry.messages
        if consumer.queued == 0 or unacked >= limits.sync_reader_ack_every_messages:
            consumer.ack_cumulative(entry.position)
            return 0
        return unacked

    async def _read(self, consumer: LinkConsumer) -> None:
        unacked = 0
        while True:
            entry = await consumer.receive()
            self._read_at = self._clock()
            unacked = self._acknowledge_as_read(consumer, entry, unacked)
            where = entry.position
            last = self.core.last_read
            if last is not None and where <= last:
                continue  # a resumed reader starts at the entry it had read
            actions = self.core.on_entry(where, entry.metadata, entry.payload, self._clock())
            if entry.metadata.HasField("marker_type") or self.core.state_stale:
                # A snapshot read back is reached by an MDP already past it only when
                # the state is read again; a state that outran the reader is built again.
                self.core.mark_state_fresh()
                self._read_states_soon()
            if self._clock_idle and self.core.wants_clock():
                self._kick.set()  # something new to snapshot: the clock is wanted again
            if consumer.queued == 0:
                actions += self.core.drain_arrivals()
            await self._perform(actions)

    async def _hear(self, marker: SideMarker) -> None:
        """A marker about T that its route heard beside the topic."""
        actions = self.core.on_side_marker(
            marker.kind, marker.payload, marker.source, marker.written_ms
        )
        await self._perform(actions)

    async def _watch(self) -> None:
        """States when told, the clock while the core wants it (module docstring)."""
        settings = self.core.settings
        while True:
            timeout = self._clock_timeout()
            if not self._kick.is_set():
                self._clock_idle = timeout is None
                with contextlib.suppress(TimeoutError):
                    await within(self._kick.wait(), timeout)
                self._clock_idle = False
            self._kick.clear()
            now = self._clock()
            actions = list(self.core.tick(now, self._remotes_connected()))
            if self._state_due:
                self._state_due = False
                try:
                    states = await self._port.states(self.topic_name)
                except LinkError as error:
                    self.last_error = f"subscription states: {error}"
                    self._read_states_soon()  # again, after the pause below
                else:
                    self.state_reads += 1
                    if states != self._last_states:
                        # Acknowledgements come in streams: a state that moved is read
                        # again a period later, until it stops moving (beside Pulsar the
                        # next scan would tell of it only a second later).
                        self._read_states_soon()
                    self._last_states, self._last_states_at = states, now
                    actions += self.core.on_state(states, now)
                await self._perform(actions)
                await asyncio.sleep(settings.poll_interval_s)  # at most one read a period
                continue
            if self._resend_due(now):  # states written again (SyncCore.restate_interval_s)
                self._last_states_at = now
                actions += self.core.on_state(self._last_states, now)
            await self._perform(actions)

    def _clock_timeout(self) -> float | None:
        if self.core.wants_clock():
            return self.core.settings.poll_interval_s
        if self.core.restate_interval_s is not None and self._last_states:
            return self.core.restate_interval_s
        return None

    def _resend_due(self, now: float) -> bool:
        restate = self.core.restate_interval_s
        return (
            restate is not None
            and bool(self._last_states)
            and self._last_states_at is not None
            and now - self._last_states_at >= restate
        )

    def _remotes_connected(self) -> dict[str, bool]:
        connected = {}
        for remote in self.core.remotes:
            connected[remote] = self._connected(remote)
            if connected[remote] and not self._was_connected.get(remote, False):
                self.core.reconnected(remote)
        self._was_connected = connected
        return connected

    async def _perform(self, actions: Sequence[WriteMarker | Apply]) -> None:
        for action in actions:
            if isinstance(action, WriteMarker):
                await self._write(action)
            else:
                while len(self._applies) >= limits.sync_pending_applies_max:
                    self._apply_room.clear()
                    await self._apply_room.wait()
                self._applies.append(action)
                self._apply_wakeup.set()

    async def _write(self, action: WriteMarker) -> None:
        receipt = await self._markers.write(action)
        if receipt is not None:  # where it sits, for the exposure, as soon as it is known
            receipt.add_done_callback(lambda done: self._written(action, done))
        name = action.kind.name
        self.markers_written[name] = self.markers_written.get(name, 0) + 1

    def _written(self, action: WriteMarker, receipt: asyncio.Future[SendReceipt]) -> None:
        if receipt.cancelled() or receipt.exception() is not None:
            return
        written = receipt.result()
        if written.duplicate:
            return
        self.core.marker_written(action.message, written.position, self._clock())
        if self.core.in_band and (self._own_unread is None or written.position > self._own_unread):
            self._own_unread = written.position  # read back by the reader in time

    async def _apply_loop(self) -> None:
        # Applies are retried at the initial delay, not doubled: the reader is attached,
        # and a state that waits holds the subscription behind its source.
        backoff = Backoff(RetryPolicy(limits.sync_retry_s_initial, limits.sync_retry_s_initial))
        while True:
            if not self._applies:
                self._apply_wakeup.clear()
                await self._apply_wakeup.wait()
                continue
            action = self._applies[0]
            try:
                applied = await self._port.apply(self.topic_name, action)
            except LinkError as error:
                self.apply_failures += 1
                self.last_error = f"applying {action.subscription}: {error}"
                if not error.retriable:
                    log.warning("%s: dropping a sync of %s: %s", self, action.subscription, error)
                    self._applies.popleft()
                    self._apply_room.set()
                    continue
                await backoff.wait(error)
                continue
            backoff.reset()
            self._applies.popleft()
            self._apply_room.set()
            self.progressed_at = self._clock()
            self.restarts = 0
            self.core.note_applied(action, applied.mark_delete, applied.ranges, self._clock())

    async def behind(self, last_entry: LastEntry) -> list[str]:
        """What this cluster stores of T's sync that the sync has not applied yet, each
        said for people; empty once it has applied all it holds. Before consumers move
        here in a failover (``/sync/caught-up``): what is stored but not applied would
        be delivered again. Copies a state waits for that never arrived (``pendingRanges``)
        do not hold it: those messages are not here to deliver."""
        reasons = []
        if not self.connected:
            reasons.append(f"not attached: {self.last_error or 'attaching'}")
        stored = await last_entry(self.topic)
        read = self.core.last_read
        if stored is not None and (read is None or read < stored):
            reasons.append(f"read to {read or 'nothing'}, stored to {stored}")
        reasons += await self._markers.behind(last_entry)
        if self._applies:
            reasons.append(f"{len(self._applies)} applies waiting")
        return reasons

    @property
    def failing(self) -> bool:
        """Not attached, and at least one attempt failed."""
        return not self.connected and self.failing_since is not None

    @property
    def applied(self) -> Mapping[tuple[str, str], AppliedStats]:
        """Per (subscription, source cluster), what applying its states did (read only)."""
        return self.core.applied

    @property
    def snapshot_stats(self) -> SnapshotStats:
        """What this partition's snapshot rounds did (read only)."""
        return self.core.controller.stats

    def exposure(self) -> dict[str, dict[str, Exposure | None]]:
        """Per subscription synced from here and remote, what a failover now would
        deliver again (exposure.py)."""
        remotes = self.core.remotes
        stored = {remote: self._stored_to(remote) for remote in remotes}
        side = self._markers_stored_to
        markers = None if side is None else {remote: side(remote) for remote in remotes}
        return self.core.exposure(self._clock(), stored, markers)

    def stats(self) -> dict[str, Any]:
        core = self.core.stats()
        for name, figures in self.exposure().items():
            entry = core["subscriptions"].setdefault(name, {"applied": {}})
            entry["exposure"] = {
                remote: None
                if figure is None
                else {"messages": figure.messages, "oldestAckAgeS": _rounded(figure.oldest_s)}
                for remote, figure in figures.items()
            }
        return {
            "topic": self.topic,
            "connected": self.connected,
            "lastError": self.last_error,
            "failingSince": self.failing_since,
            "attachFailures": self.attach_failures,
            "stateReads": self.state_reads,
            "toldAt": self.told_at,
            "statesReadAt": self._last_states_at,
            "markersWritten": dict(self.markers_written),
            "pendingApplies": len(self._applies),
            "stalledSeconds": round(self.stalled_s(self._clock()), 1),
            "restarts": self.restarts,
            "applyFailures": self.apply_failures,
            "sideMarkersDropped": self._markers.dropped,
            **core,
        }


def _rounded(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds, 3)
