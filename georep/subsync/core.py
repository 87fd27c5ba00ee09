"""Subscription sync of one topic partition on one gateway: the decisions, without I/O.

The gateway of cluster L runs one :class:`SyncCore` per synced topic partition T and
feeds it three things:

- every entry of T on L, in order, read from the beginning by a non-durable reader
  (``on_entry``): data entries build the indexes that translate positions, markers
  carry the protocol;
- the state of T's subscriptions on L, polled from L's admin REST (``on_state``):
  mark-delete position (MDP), acknowledged ranges above it, partially acknowledged
  batches, connected consumers, the replicated flag;
- the clock (``tick``): snapshots start and time out.

It answers with :class:`WriteMarker` (a marker for the gateway to publish into T on L)
and :class:`Apply` (subscription state for the gateway to apply on L through the admin
REST). What the gateway must do with them is in ``topic_sync.py``.

**Source side** (a subscription with consumers here, opted in, mode not ``off``):

- snapshots (snapshot_controller.py) with the remotes this topic replicates to; each
  completed one is written as a local Snapshot marker, and when it is read back it
  enters every synced subscription's cache (snapshot_cache.py);
- when a subscription's MDP passes a cached snapshot: a SubscriptionUpdate with each
  remote's position (both modes);
- ``full`` mode: whenever the subscription's state changes, a SubscriptionAckRanges
  with the whole state: MDP and ranges per origin (ack_ranges_builder.py).

A subscription is synced from where its consumers are: a standby with no consumers
writes nothing, so state applied from a remote is not echoed back, and after a
failover the consumers' new cluster becomes the source. The first state read after its
consumers left still goes out (their last acknowledgements), once.

**Receiving side** (any subscription named by a marker from another cluster):

- SnapshotRequest from X (that this topic replicates back to): answer with a
  SnapshotResponse addressed to X, carrying the request's own position here (every
  entry before it arrived before it);
- SnapshotResponse addressed here: to the controller;
- SubscriptionUpdate naming this cluster: apply that MDP (the broker never moves an MDP
  backwards and creates the subscription if missing);
- SubscriptionAckRanges from X: map through the indexes (ack_sync.py), apply; parts not
  replicated here yet wait and apply as their copies arrive.

**Indexes** (range_mapping.py): per origin cluster X, X's position -> local position
of each copy (forward, for receiving), and local -> X's position (reverse, for
building); for this cluster, each own data entry as itself (identity, so ranges in our
own positions map only onto our own messages). Each keeps at most
``limits.sync_index_runs_max`` runs; the oldest go first.

**Snapshots with remotes that never answer.** A remote that this cluster replicates to
but that does not replicate back (C in A→C) cannot answer, and a snapshot needs every
participant. When a snapshot times out, the remotes that did not answer are left out
of the next ones until anything of theirs is read here or their replicator reconnects.
Every ``snapshot_timeout_s`` while some are left out, a probe request (a request no
snapshot waits for) is written: a remote that answers it is back in. ``full`` mode
needs no snapshot for a one-way remote (ack ranges carry the MDP).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import Message

from georep import limits
from georep.domain.position import Position
from georep.replicator.origin import origin_of
from georep.snapshots import markers_pb2 as pb
from georep.snapshots.errors import MarkerError
from georep.snapshots.markers import MarkerKind, decode, key, position
from georep.snapshots.snapshot_cache import CachedSnapshot, SnapshotCache
from georep.snapshots.snapshot_controller import CompletedSnapshot, SnapshotController, respond
from georep.subsync.ack_ranges_builder import build_ack_ranges
from georep.subsync.ack_sync import AckPlan, AckRangesReceiver
from georep.subsync.exposure import Acked, Exposure, ExposureBook, Indexes
from georep.subsync.range_mapping import OriginIndex, Range
from georep.subsync.settings import NamespaceSync, SyncMode, SyncSettings
from georep.wire import pulsar_wire_pb2 as wire

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SubscriptionState:
    """One subscription on the local cluster, as its admin REST reports it."""

    mark_delete: Position
    ranges: tuple[Range, ...] = ()
    #: entry -> (batch size, acknowledged indexes)
    batches: Mapping[Position, tuple[int, frozenset[int]]] = field(default_factory=dict)
    consumers: int = 0
    replicated: bool = False
    #: Consumers attached so far (georep's clusters say; 0 where unknown): more than at
    #: the previous read means consumers came, even if they left before this read.
    consumers_attached: int = 0


@dataclass(frozen=True, slots=True)
class WriteMarker:
    kind: MarkerKind
    message: Message
    #: Clusters the marker is addressed to (a response: the asker); empty: by kind.
    replicate_to: tuple[str, ...] = ()


@dataclass(slots=True)
class Apply:
    subscription: str
    source: str
    mark_delete: Position | None = None
    ranges: list[Range] = field(default_factory=list)
    batches: dict[Position, set[int]] = field(default_factory=dict)
    #: When the source wrote the marker this comes from (ms), for the sync lag.
    written_ms: int | None = None


@dataclass(slots=True)
class SourceStats:
    markers_written: int = 0
    updates_written: int = 0
    last_mark_delete: Position | None = None
    ranges: int = 0
    truncated: int = 0
    last_written_at: float | None = None
    last_sequence: int | None = None


@dataclass(slots=True)
class AppliedStats:
    last_mark_delete: Position | None = None
    ranges: int = 0
    applies: int = 0
    sync_lag_ms: float | None = None
    applied_at: float | None = None
    pending_ranges: int = 0
    last_sequence: int | None = None


@dataclass(slots=True)
class _Source:
    cache: SnapshotCache
    #: Consumers were attached at the previous read: the state after they left (their
    #: last acknowledgements) is still this cluster's to send, once.
    active: bool = False
    consumers_attached: int = 0
    last_normalized: tuple[Any, ...] | None = None
    last_content: bytes | None = None
    stats: SourceStats = field(default_factory=SourceStats)


class SyncCore:
    def __init__(
        self,
        local_cluster: str,
        *,
        namespace_sync: NamespaceSync,
        settings: SyncSettings,
        remotes: frozenset[str] = frozenset(),
        in_band: bool = True,
        on_copy_without_origin: Callable[[str], None] | None = None,
    ) -> None:
        self.local_cluster = local_cluster
        #: Markers sit in the topic (georep's clusters) or travel on a side topic (real
        #: Pulsar): then only acknowledged ranges are written, no snapshot is taken, and
        #: each subscription's state is written again every
        #: ``limits.sync_side_resend_interval_s``, so that the side topic's retained
        #: part always holds it.
        self.in_band = in_band
        self.namespace_sync = namespace_sync
        self.settings = settings
        #: The clusters this topic replicates to (snapshot participants, answer routes).
        self.remotes = remotes
        self.controller = SnapshotController(
            local_cluster,
            interval_s=settings.snapshot_interval_s,
            timeout_s=settings.snapshot_timeout_s,
        )
        self.silent: set[str] = set()
        self._last_probe: float | None = None
        self.probes = 0
        self.markers_read: dict[str, int] = {}
        self.bad_markers = 0
        #: Per source cluster, the copies read since the last one that named its origin:
        #: Pulsar 3.0's replicator stamps no source position (docs/PULSAR.md), and
        #: acknowledgements made on the source cannot be mapped to such copies.
        self.copies_without_origin: dict[str, int] = {}
        self.on_copy_without_origin = on_copy_without_origin
        self.over_limit_subscriptions = 0
        #: Why each subscription selected at the last state read is synced:
        #: ``flag``, ``policy`` or ``flag+policy`` (``selected``).
        self.synced_by: dict[str, str] = {}
        self.applied: dict[tuple[str, str], AppliedStats] = {}
        self.reset()

    def reset(self) -> None:
        """Forget what was read: the reader starts again from the beginning."""
        self.forward: dict[str, OriginIndex] = {self.local_cluster: OriginIndex()}
        self.reverse: dict[str, OriginIndex] = {}
        self.receivers: dict[tuple[str, str], AckRangesReceiver] = {}
        self.sources: dict[str, _Source] = {}
        #: What each remote stores of the acknowledgements of subscriptions synced
        #: from here (exposure.py); rebuilt from the topic, as the indexes are.
        self.book = ExposureBook(self.local_cluster)
        self._arrived: set[str] = set()
        self._something_new = False
        self._sequence = 0
        #: The last entry the reader handed in.
        self.last_read: Position | None = None
        #: A state named entries the reader had not read yet (its markers could not say
        #: them in their origins' terms): read the state again once it has.
        self._awaiting_read: Position | None = None
        self.state_stale = False

    @property
    def mode(self) -> SyncMode:
        return self.namespace_sync.mode

    def set_remotes(self, remotes: frozenset[str]) -> None:
        """The clusters this topic replicates to now (a replication policy changed): the
        next snapshots ask these."""
        self.remotes = remotes

    def mark_state_fresh(self) -> None:
        """The sync reads the subscriptions' states again (``state_stale`` is answered)."""
        self.state_stale = False

    # -- entries of the topic, in order --

    def on_entry(
        self, where: Position, metadata: wire.MessageMetadata, payload: bytes, now: float
    ) -> list[WriteMarker | Apply]:
        self.last_read = where
        if self._awaiting_read is not None and where >= self._awaiting_read:
            self._awaiting_read = None
            self.state_stale = True
        if metadata.HasField("marker_type"):
            return self._on_marker(where, metadata, payload, now)
        origin = origin_of(metadata)
        if origin is None or origin.cluster == self.local_cluster:
            source = metadata.replicated_from
            if not source:
                self._record(self.forward[self.local_cluster], where, where)
                self._arrived.add(self.local_cluster)
                self._something_new = True
            elif origin is None:
                count = self.copies_without_origin.get(source, 0) + 1
                self.copies_without_origin[source] = count
                if count == 1 and self.on_copy_without_origin is not None:
                    self.on_copy_without_origin(source)
            return []
        cluster = origin.cluster
        self.copies_without_origin.pop(cluster, None)
        self.silent.discard(cluster)
        self._record(self.forward.setdefault(cluster, OriginIndex()), origin.position, where)
        self._record(self.reverse.setdefault(cluster, OriginIndex()), where, origin.position)
        self._arrived.add(cluster)
        return []

    def drain_arrivals(self) -> list[Apply]:
        """Acknowledgements that were waiting for copies read since the last call."""
        arrived, self._arrived = self._arrived, set()
        out = []
        for (subscription, source), receiver in self.receivers.items():
            for cluster in arrived:
                plan = receiver.on_replicated(cluster, self.forward)
                if plan:
                    out.append(self._apply_plan(subscription, source, plan, None, receiver))
        return out

    @staticmethod
    def _record(index: OriginIndex, key_position: Position, value: Position) -> None:
        index.record(key_position, value)
        excess = len(index) - limits.sync_index_runs_max
        if excess > 0:
            index.drop_oldest(excess)

    def _on_marker(
        self, where: Position, metadata: wire.MessageMetadata, payload: bytes, now: float
    ) -> list[WriteMarker | Apply]:
        try:
            kind, message = decode(metadata.marker_type, payload)
        except MarkerError as error:
            self.bad_markers += 1
            log.warning("marker at %s of kind %d ignored: %s", where, metadata.marker_type, error)
            return []
        self.markers_read[kind.name] = self.markers_read.get(kind.name, 0) + 1
        source = metadata.replicated_from
        if not source:
            if isinstance(message, pb.Snapshot):
                self._cache_snapshot(message)
            else:
                self.book.heard(message, where, metadata.publish_time / 1000, self._indexes())
            return []
        return self._on_remote_marker(where, kind, message, source, metadata.publish_time, now)

    def on_side_marker(
        self, kind_number: int, payload: bytes, source: str, written_ms: int
    ) -> list[Apply]:
        """A marker another cluster's gateway wrote on the namespace's side topic (a real
        Pulsar cluster hides in-band markers from every reader; docs/SUBSYNC.md). Only
        acknowledged ranges travel that way: they name their positions in each origin's
        own terms, so where the marker sits means nothing."""
        if source == self.local_cluster:
            return []
        try:
            kind, message = decode(kind_number, payload)
        except MarkerError as error:
            self.bad_markers += 1
            log.warning("side marker of kind %d from %s ignored: %s", kind_number, source, error)
            return []
        self.markers_read[kind.name] = self.markers_read.get(kind.name, 0) + 1
        if not isinstance(message, pb.SubscriptionAckRanges):
            self.bad_markers += 1
            return []
        return self._on_ack_ranges(message, source, written_ms or None)

    def _on_remote_marker(
        self,
        where: Position,
        kind: MarkerKind,
        message: Message,
        source: str,
        publish_time: int,
        now: float,
    ) -> list[WriteMarker | Apply]:
        """``message`` is of ``kind`` (``markers.decode``): its class says the same."""
        self.silent.discard(source)
        written_ms = publish_time or None
        if isinstance(message, pb.SubscriptionAckRanges):
            return [*self._on_ack_ranges(message, source, written_ms)]
        if isinstance(message, pb.SnapshotRequest):
            fresh = now * 1000 - publish_time <= self.settings.snapshot_timeout_s * 1000
            if source in self.remotes and fresh:
                answer = respond(message, self.local_cluster, where)
                return [WriteMarker(MarkerKind.SNAPSHOT_RESPONSE, answer, (source,))]
            return []
        if isinstance(message, pb.SnapshotResponse):
            return [*self._on_response(message, where, now)]
        if isinstance(message, pb.SubscriptionUpdate):
            for cluster in message.clusters:
                if cluster.cluster == self.local_cluster:
                    return [
                        Apply(
                            message.subscription_name,
                            source,
                            mark_delete=key(cluster.position),
                            written_ms=written_ms,
                        )
                    ]
            return []
        return []

    def _on_ack_ranges(
        self, message: pb.SubscriptionAckRanges, source: str, written_ms: int | None
    ) -> list[Apply]:
        name = message.subscription_name
        receiver = self.receivers.get((name, source))
        if receiver is None:
            receiver = self.receivers[(name, source)] = AckRangesReceiver(self.local_cluster)
        plan = receiver.on_marker(message, self.forward)
        if plan is None:
            return []
        return [self._apply_plan(name, source, plan, written_ms, receiver)]

    def _apply_plan(
        self,
        subscription: str,
        source: str,
        plan: AckPlan,
        written_ms: int | None,
        receiver: AckRangesReceiver,
    ) -> Apply:
        stats = self.applied.setdefault((subscription, source), AppliedStats())
        stats.pending_ranges = receiver.pending_ranges
        stats.last_sequence = receiver.last_sequence
        return Apply(
            subscription,
            source,
            ranges=list(plan.ranges),
            batches={p: set(i) for p, i in plan.batches.items()},
            written_ms=written_ms,
        )

    def _on_response(
        self, message: pb.SnapshotResponse, where: Position, now: float
    ) -> list[WriteMarker]:
        outcome = self.controller.on_response(now, message, where)
        if isinstance(outcome, pb.SnapshotRequest):
            return [WriteMarker(MarkerKind.SNAPSHOT_REQUEST, outcome)]
        if isinstance(outcome, CompletedSnapshot):
            return [WriteMarker(MarkerKind.SNAPSHOT, outcome.marker(), (self.local_cluster,))]
        return []

    def _cache_snapshot(self, message: pb.Snapshot) -> None:
        if not message.HasField("local_position"):
            return
        snapshot = CachedSnapshot(
            message.snapshot_id,
            key(message.local_position),
            {c.cluster: key(c.position) for c in message.clusters},
        )
        for source in self.sources.values():
            source.cache.add(snapshot)

    # -- the subscriptions' state, polled --

    def choose(self, namespace_sync: NamespaceSync) -> bool:
        """Sync by ``namespace_sync`` from now on (a policy changed: the manager hands
        every topic its choice once per change). True if the choice of subscriptions
        changed, so their states should be read again."""
        before = self.namespace_sync
        self.namespace_sync = namespace_sync
        return (before.subscriptions, before.pattern) != (
            namespace_sync.subscriptions,
            namespace_sync.pattern,
        )

    def selected(self, states: Mapping[str, SubscriptionState]) -> dict[str, SubscriptionState]:
        """The subscriptions to sync, at most ``limits.sync_subscriptions_per_topic_max``
        (by name): the flagged ones and those the policy takes (``NamespaceSync``). Why
        each is synced is kept for ``/stats`` (``synced_by``)."""
        choice = self.namespace_sync
        chosen: dict[str, SubscriptionState] = {}
        why: dict[str, str] = {}
        for name, state in sorted(states.items()):
            reason = choice.synced_by(name, state.replicated)
            if reason is not None:
                chosen[name] = state
                why[name] = reason
        limit = limits.sync_subscriptions_per_topic_max
        self.over_limit_subscriptions = max(0, len(chosen) - limit)
        kept = dict(list(chosen.items())[:limit])
        self.synced_by = {name: why[name] for name in kept}
        return kept

    def on_state(self, states: Mapping[str, SubscriptionState], now: float) -> list[WriteMarker]:
        if self.mode is SyncMode.OFF:
            return []
        out: list[WriteMarker] = []
        sourced: set[str] = set()
        for name, state in self.selected(states).items():
            written = len(out)
            source = self.sources.get(name)
            if source is None:
                cache = SnapshotCache(self.settings.snapshot_cache_size)
                source = self.sources[name] = _Source(cache)
            came = state.consumers_attached > source.consumers_attached
            source.consumers_attached = state.consumers_attached
            if state.consumers <= 0 and not (source.active or came):
                continue  # a standby: its state comes from elsewhere, not echoed back
            # Consumers that acknowledged and left since the previous read: their last
            # state goes out once (states are read when they change, not at an interval,
            # so the read after the last acknowledgement may find them gone).
            source.active = state.consumers > 0
            # Every poll, not only when the MDP moved: a snapshot read back after the MDP
            # had already passed its position is reached all the same.
            reached = source.cache.advance(state.mark_delete)
            if reached is not None and reached.remote_positions:
                update = pb.SubscriptionUpdate(
                    subscription_name=name,
                    clusters=[
                        pb.ClusterPosition(cluster=c, position=position(*p))
                        for c, p in sorted(reached.remote_positions.items())
                    ],
                )
                out.append(WriteMarker(MarkerKind.SUBSCRIPTION_UPDATE, update))
                source.stats.updates_written += 1
                self.book.update_written(name, update, reached, self._indexes())
            # What changed, in messages: an MDP that only stepped over markers (each
            # marker written here moves it) is no change, or sync would never go idle.
            normalized = self._normalized(state)
            if normalized != source.last_normalized:
                source.last_normalized = normalized
                self._something_new = True
            sourced.add(name)
            self.book.state_read(name, Acked(state.mark_delete, state.ranges), now, self._indexes())
            if self.mode is SyncMode.FULL:
                written_at = source.stats.last_written_at
                restate = self.restate_interval_s
                if restate is not None and written_at is not None and (now - written_at >= restate):
                    source.last_content = None
                marker = self._ack_ranges(name, state, source)
                if marker is not None:
                    out.append(marker)
            source.stats.last_mark_delete = state.mark_delete
            source.stats.ranges = len(state.ranges)
            highest = max([state.mark_delete, *(high for _, high in state.ranges)])
            if self.last_read is None or highest > self.last_read:
                self._awaiting_read = max(highest, self._awaiting_read or highest)
            if len(out) > written:
                source.stats.last_written_at = now
        self.book.sourced_here(sourced)
        return out

    @property
    def restate_interval_s(self) -> float | None:
        """How often an unchanged state is written again: on a side topic, whose retained
        part must always hold it, every ``limits.sync_side_resend_interval_s``; in band
        never (None: the topic itself keeps every marker)."""
        return None if self.in_band else limits.sync_side_resend_interval_s

    def _normalized(self, state: SubscriptionState) -> tuple[Any, ...]:
        below = state.mark_delete
        floors = [self.forward[self.local_cluster].floor(below)]
        floors += [index.floor(below) for _, index in sorted(self.reverse.items())]
        return (tuple(floors), state.ranges, tuple(sorted(state.batches.items())))

    def _ack_ranges(
        self, name: str, state: SubscriptionState, source: _Source
    ) -> WriteMarker | None:
        """The subscription's ack-ranges marker, unless it says what the last one said.
        Built from what the reader has read: copies it has not read yet cannot be put in
        their origin's terms, and the marker is built again (differently) once it has."""
        built = build_ack_ranges(
            subscription=name,
            source_cluster=self.local_cluster,
            sequence=self._sequence + 1,
            mark_delete=state.mark_delete,
            acknowledged=state.ranges,
            partial_batches={p: (size, set(acked)) for p, (size, acked) in state.batches.items()},
            reverse_indexes=self.reverse,
            own_index=self.forward[self.local_cluster],
        )
        content = b"".join(origin.SerializeToString() for origin in built.marker.origins)
        if content == source.last_content:
            return None
        source.last_content = content
        self._sequence += 1
        source.stats.markers_written += 1
        source.stats.truncated += int(built.truncated)
        source.stats.last_sequence = self._sequence
        return WriteMarker(MarkerKind.SUBSCRIPTION_ACK_RANGES, built.marker)

    def set_sequence_floor(self, floor: int) -> None:
        """Sequences of ack-ranges markers continue above ``floor`` (a clock reading in
        microseconds), so a receiver that outlived this gateway's restart takes them."""
        self._sequence = max(self._sequence, floor)

    # -- exposure (exposure.py) --

    def exposure(
        self,
        now: float,
        stored_to: Mapping[str, Position | None],
        markers_stored_to: Mapping[str, Position | None] | None = None,
    ) -> dict[str, dict[str, Exposure | None]]:
        """Per subscription synced from here and per remote: the messages acknowledged
        here whose copies the remote holds unacknowledged (exposure.py). ``stored_to``:
        per remote, how far it stores this topic (None: not known, and neither is the
        exposure). Beside real Pulsar the markers travel on the namespace's side topic:
        ``markers_stored_to`` says how far each remote stores that one (None: not known,
        as where Pulsar replicates it). There only ``full`` mode runs (config.py), whose
        ack ranges say all."""
        if self.mode is SyncMode.OFF:
            return {}
        if self.in_band:
            return self.book.figures(now, self.remotes, stored_to, self._indexes())
        if self.mode is not SyncMode.FULL or markers_stored_to is None:
            return self.book.figures(now, self.remotes, {}, self._indexes())
        return self.book.figures(now, self.remotes, stored_to, self._indexes(), markers_stored_to)

    def marker_written(self, message: Message, where: Position, now: float) -> None:
        """An own marker is stored at ``where`` (its receipt): the book hears it now, not
        only when the reader reads it back, which a failure of this cluster may prevent
        while the replicators already carried it. Beside the topic (``where`` on the
        side topic) only ack ranges are heard (exposure())."""
        if self.in_band or (
            self.mode is SyncMode.FULL and isinstance(message, pb.SubscriptionAckRanges)
        ):
            self.book.heard(message, where, now, self._indexes())

    def _indexes(self) -> Indexes:
        return Indexes(self.local_cluster, self.forward, self.reverse)

    # -- the clock --

    def tick(self, now: float, connected: Mapping[str, bool]) -> list[WriteMarker]:
        if self.controller.expire(now):
            self.silent |= set(self.controller.unanswered)
            self._something_new = True  # what prompted it is still not in a snapshot
            # Per topic at DEBUG: the gateway says them once a watchdog pass, counted.
            log.debug("snapshot timed out; not answered by %s", sorted(self.controller.unanswered))
        if self.mode is SyncMode.OFF or not self.in_band:
            return []
        out: list[WriteMarker] = []
        if self.silent & self.remotes and (
            self._last_probe is None or now - self._last_probe >= self.settings.snapshot_timeout_s
        ):
            self._last_probe = now
            self.probes += 1
            probe = pb.SnapshotRequest(
                snapshot_id=f"{self.local_cluster}-probe-{int(now * 1000)}",
                source_cluster=self.local_cluster,
            )
            out.append(WriteMarker(MarkerKind.SNAPSHOT_REQUEST, probe))
        participants = {r: connected.get(r, False) for r in self.remotes if r not in self.silent}
        request = self.controller.maybe_start(
            now,
            remotes_connected=participants,
            published_since_last=self._something_new,
            replicated_subscriptions=len(self.sources),
        )
        if request is None:
            return out
        self._something_new = False
        return [*out, WriteMarker(MarkerKind.SNAPSHOT_REQUEST, request)]

    def wants_clock(self) -> bool:
        """Whether :meth:`tick` may have something to do before the next change: a
        snapshot in flight (it times out), one due (something new and a synced
        subscription), or a probe of silent remotes. An idle topic needs no clock."""
        if self.controller.pending:
            return True
        if self.mode is SyncMode.OFF or not self.in_band:
            return False
        return bool(self.silent & self.remotes) or (self._something_new and bool(self.sources))

    def reconnected(self, remote: str) -> None:
        """The replicator towards ``remote`` connected again: ask it in snapshots again."""
        self.silent.discard(remote)

    # -- stats --

    def note_applied(
        self, action: Apply, mark_delete: Position | None, ranges: int, now: float
    ) -> None:
        stats = self.applied.setdefault((action.subscription, action.source), AppliedStats())
        stats.applies += 1
        stats.applied_at = now
        if mark_delete is not None:
            stats.last_mark_delete = mark_delete
        stats.ranges = ranges
        if action.written_ms is not None:
            stats.sync_lag_ms = max(0.0, now * 1000 - action.written_ms)

    def stats(self) -> dict[str, Any]:
        controller = self.controller.stats
        subscriptions: dict[str, dict[str, Any]] = {}
        for name, source in self.sources.items():
            entry = subscriptions.setdefault(name, {"applied": {}})
            entry["cacheSize"] = len(source.cache)
            entry["syncedBy"] = self.synced_by.get(name)
            entry["source"] = {
                "lastMarkDelete": _text(source.stats.last_mark_delete),
                "ranges": source.stats.ranges,
                "ackRangesWritten": source.stats.markers_written,
                "updatesWritten": source.stats.updates_written,
                "truncated": source.stats.truncated,
                "lastWrittenAt": source.stats.last_written_at,
                "lastSequence": source.stats.last_sequence,
            }
        for (name, origin), applied in self.applied.items():
            entry = subscriptions.setdefault(name, {"applied": {}})
            entry["applied"][origin] = {
                "lastMarkDelete": _text(applied.last_mark_delete),
                "ranges": applied.ranges,
                "applies": applied.applies,
                "syncLagMs": applied.sync_lag_ms,
                "appliedAt": applied.applied_at,
                "pendingRanges": applied.pending_ranges,
                "lastSequence": applied.last_sequence,
            }
        return {
            "mode": self.mode.value,
            "remotes": sorted(self.remotes),
            "snapshots": {
                "started": controller.started,
                "completed": controller.completed,
                "timedOut": controller.timed_out,
                "ignoredResponses": controller.ignored_responses,
                "pending": self.controller.pending,
                "lastDurationS": controller.duration_s_last,
                "silentRemotes": sorted(self.silent),
                "probes": self.probes,
            },
            "markersRead": dict(self.markers_read),
            "badMarkers": self.bad_markers,
            "copiesWithoutOrigin": dict(sorted(self.copies_without_origin.items())),
            "subscriptionsOverLimit": self.over_limit_subscriptions,
            "subscriptionChoice": self.namespace_sync.choice_json(),
            "indexRuns": {c: len(i) for c, i in sorted(self.forward.items())},
            "subscriptions": subscriptions,
        }


def _text(where: Position | None) -> str | None:
    return None if where is None else str(where)
