"""Exposure: what a failover now would deliver again, per subscription and remote.

A subscription synced from this cluster (L) to a remote R is *exposed* by every message
it has acknowledged here whose copy R holds and whose acknowledgement R does not hold
yet. Were L to fail now, R's consumers would receive those messages again. This module
counts them, without I/O, from three things the sync already has:

- the subscription's state here (``SyncCore.on_state``): the mark-delete position (MDP)
  and the closed acknowledged ranges above it, in local positions;
- the newest of the gateway's own sync markers for the subscription that R already
  stores: the sync's reader reads each own marker back, at its position in the topic
  (``SyncCore.on_entry``), and the replicator to R says how far R stores the topic
  (``Replicator.delivered``). Markers travel in the topic, in order, so a marker at or
  below that point is on R, where R's gateway applies it;
- the indexes the sync keeps (range_mapping.py), which say which local entries are
  messages (not markers) and which of them R holds: this cluster's own messages up to
  where the replicator to R has delivered, and copies of R's own messages (R holds the
  originals).

What the marker carries depends on the mode. ``full``: the subscription's whole state
(ack_ranges_builder.py), so the exposure is exactly what the state here holds beyond
it. ``pulsar-compatible``: a SubscriptionUpdate moves R's MDP to a snapshot's position;
nothing above the MDP ever travels, so acknowledged ranges stay exposed for as long as
they are ranges (what Pulsar's mark-delete rule leaves).

Worked example, ``full``, own messages at local entries (3,0)..(3,9) with markers at
(3,4) and (3,8): the state is MDP (3,2) and the range (3,5)..(3,6); the newest marker R
stores said MDP (3,1). Acknowledged here and not on R: (3,2), (3,5), (3,6), so the
exposure is 3 if the replicator delivered at least (3,6), and 1 if it delivered only
(3,3) (a copy R does not hold is not delivered twice: it is not delivered at all).

:class:`ExposureBook` keeps, per subscription, the own markers read back and what the
markers each remote stores acknowledge together (a receiver applies each in turn, and
acknowledgements only add up): ``SyncCore`` tells it of states, markers and updates,
and asks it for the figures.

Counted in entries: an unbatched message is one entry; a batch counts once, and a batch
acknowledged in part counts as not acknowledged. Not counted: acknowledgements a
consumer sent that the broker has not taken yet, copies of a third cluster's messages,
and markers stored on R that R's gateway has not applied yet (its ``pendingApplies``
and ``georep_subsync_lag_ms`` show those).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, MutableMapping, Set
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import Message

from georep import limits
from georep.domain.position import Position
from georep.snapshots import markers_pb2 as pb
from georep.snapshots.markers import key
from georep.snapshots.snapshot_cache import CachedSnapshot
from georep.subsync.range_mapping import OriginIndex, Range

#: Entries ``e`` with ``after < e <= upto``.
Interval = tuple[Position, Position]


@dataclass(frozen=True, slots=True)
class Acked:
    """Acknowledged entries in local positions: everything at or below ``mark_delete``
    and each closed range of ``ranges``."""

    mark_delete: Position
    ranges: tuple[Range, ...] = ()

    def intervals(self) -> list[Interval]:
        """As sorted, disjoint intervals.

        >>> Acked(Position(3, 2), ((Position(3, 5), Position(3, 6)),)).intervals()
        [(Position(ledger_id=-1, entry_id=-1), Position(ledger_id=3, entry_id=2)), \
(Position(ledger_id=3, entry_id=4), Position(ledger_id=3, entry_id=6))]
        """
        out: list[Interval] = []
        if self.mark_delete > Position.EARLIEST:
            out.append((Position.EARLIEST, self.mark_delete))
        for first, last in sorted(self.ranges):
            after = first.predecessor()
            if out and after <= out[-1][1]:
                if last > out[-1][1]:
                    out[-1] = (out[-1][0], last)
            elif last > after:
                out.append((after, last))
        return out


def difference(now: Iterable[Interval], base: Iterable[Interval]) -> list[Interval]:
    """The entries of ``now`` not in ``base`` (both sorted and disjoint)."""
    taken = list(base)
    out: list[Interval] = []
    for after, upto in now:
        low = after
        for base_after, base_upto in taken:
            if base_upto <= low:
                continue
            if base_after >= upto:
                break
            if base_after > low:
                out.append((low, base_after))
            low = max(low, base_upto)
            if low >= upto:
                break
        if low < upto:
            out.append((low, upto))
    return out


def union(left: Iterable[Interval], right: Iterable[Interval]) -> list[Interval]:
    """The entries of either (both sorted and disjoint), sorted and disjoint."""
    out: list[Interval] = []
    for after, upto in sorted([*left, *right]):
        if out and after <= out[-1][1]:
            if upto > out[-1][1]:
                out[-1] = (out[-1][0], upto)
        else:
            out.append((after, upto))
    return out


@dataclass(frozen=True, slots=True)
class Exposure:
    #: Messages acknowledged here whose copies the remote holds unacknowledged.
    messages: int
    #: Seconds since the oldest of those acknowledgements was read here (None: none).
    oldest_s: float | None


def exposed(
    now: Acked,
    base: Mapping[str, list[Interval]],
    *,
    local: str,
    remote: str,
    own: OriginIndex,
    delivered: Position,
    remote_copies: OriginIndex | None,
) -> int:
    """How many entries ``now`` acknowledges that the remote holds and the marker it
    stores does not: own messages (``own``, keyed by local position) at or below
    ``delivered`` beyond what the marker says of ``local``'s messages, and copies of the
    remote's messages (``remote_copies``: the reverse index, keyed by local position)
    beyond what it says of ``remote``'s. ``base``: per origin cluster, what the markers
    the remote stores acknowledge, in local positions (a marker says each origin's part
    apart, and a range of one origin covers none of another's messages)."""
    total = 0
    for after, upto in _beyond(now, base.get(local)):
        total += own.count(after, min(upto, delivered))
    if remote_copies is not None:
        for after, upto in _beyond(now, base.get(remote)):
            total += remote_copies.count(after, upto)
    return total


def _beyond(now: Acked, base: list[Interval] | None) -> list[Interval]:
    return difference(now.intervals(), base or [])


@dataclass(frozen=True, slots=True)
class Indexes:
    """The sync's indexes, as the book reads them: ``forward[local]`` holds this
    cluster's own messages (keyed by local position); ``forward[X]`` X's position ->
    local copy; ``reverse[X]`` local copy -> X's position (keyed by local position)."""

    local: str
    forward: Mapping[str, OriginIndex]
    reverse: Mapping[str, OriginIndex]

    def beyond(self, acked: Acked, base: Mapping[str, Acked] | Acked | None) -> bool:
        """Whether ``acked`` holds a message (not a marker) that ``base`` does not (per
        origin, when ``base`` says each origin's part apart)."""
        indexes = {self.local: self.forward[self.local], **self.reverse}
        for origin, index in indexes.items():
            part = base.get(origin) if isinstance(base, Mapping) else base
            gap = difference(acked.intervals(), [] if part is None else part.intervals())
            if any(index.count(after, upto) for after, upto in gap):
                return True
        return False


@dataclass(frozen=True, slots=True)
class _Heard:
    """One of this gateway's own markers for a subscription, read back from the topic:
    where it sits, what a remote storing it holds acknowledged per origin (in local
    positions), and when it was written."""

    position: Position
    acked: Mapping[str, Acked]
    written_at: float


@dataclass(slots=True)
class _Subscription:
    #: What the state read last acknowledges, and since when some of it is in no own
    #: marker read back.
    acked: Acked | None = None
    unheard_since: float | None = None
    #: Own markers heard (at their receipt, or read back) and not yet counted for every
    #: remote, oldest first; and the position of the newest.
    heard: deque[_Heard] = field(default_factory=deque)
    last_heard: Position | None = None
    #: Per remote: the newest marker counted, and what those counted acknowledge
    #: together, per origin.
    folded_to: dict[str, Position] = field(default_factory=dict)
    stored: dict[str, dict[str, list[Interval]]] = field(default_factory=dict)
    #: SubscriptionUpdates written and not read back yet: content -> what the remotes'
    #: MDPs then cover here, per origin.
    updates_in_flight: dict[bytes, dict[str, Acked]] = field(default_factory=dict)


class ExposureBook:
    """Per subscription synced from here: what each remote stores of its
    acknowledgements. At most ``limits.sync_exposure_markers_max`` markers (and updates
    in flight, and snapshot requests) are kept per subscription; past it the oldest go,
    and the exposure counts from an older marker: more than it is, never less."""

    def __init__(self, local_cluster: str) -> None:
        self.local = local_cluster
        self._subscriptions: dict[str, _Subscription] = {}
        #: Own snapshot requests read back: id -> position (``pulsar-compatible``).
        self._requests: dict[str, Position] = {}

    def state_read(self, name: str, acked: Acked, now: float, indexes: Indexes) -> None:
        """The subscription's state, read here (a source's, not a standby's)."""
        book = self._subscriptions.setdefault(name, _Subscription())
        if acked == book.acked:
            return
        if book.unheard_since is None and indexes.beyond(acked, book.acked):
            book.unheard_since = now
        book.acked = acked

    def sourced_here(self, names: Set[str]) -> None:
        """The subscriptions whose state was read here as a source's this time: the
        others (a standby now, deleted, or no longer chosen) have no exposure from here;
        what was heard of them is kept for when they are sources again."""
        for name, book in self._subscriptions.items():
            if name not in names:
                book.acked = None
                book.unheard_since = None

    def update_written(
        self, name: str, update: pb.SubscriptionUpdate, reached: CachedSnapshot, indexes: Indexes
    ) -> None:
        """A SubscriptionUpdate of ``reached`` was written: what it will cover here. Each
        remote R's position in the snapshot is where this cluster's request arrived
        there, after every entry written here before the request; and R's own messages
        up to that position, whose copies here the forward index knows."""
        covered: dict[str, Acked] = {}
        request = self._requests.get(reached.snapshot_id)
        if request is not None:
            covered[self.local] = Acked(request.predecessor())
        for remote, there in reached.remote_positions.items():
            index = indexes.forward.get(remote)
            floor = None if index is None else index.floor(there)
            if floor is not None:
                covered[remote] = Acked(floor)
        in_flight = self._subscriptions.setdefault(name, _Subscription()).updates_in_flight
        in_flight[update.SerializeToString()] = covered
        _bound(in_flight)

    def heard(self, message: Message, where: Position, written_at: float, indexes: Indexes) -> None:
        """One of this gateway's own markers, read back at ``where``."""
        if isinstance(message, pb.SnapshotRequest):
            self._requests[message.snapshot_id] = where
            _bound(self._requests)
            return
        if isinstance(message, pb.SubscriptionAckRanges):
            if message.source_cluster != self.local:
                return
            name = message.subscription_name
            acked = self._acked_in(message, indexes)
        elif isinstance(message, pb.SubscriptionUpdate):
            name = message.subscription_name
            book = self._subscriptions.get(name)
            covered = None
            if book is not None:
                covered = book.updates_in_flight.pop(message.SerializeToString(), None)
            if covered is None:
                return  # written before this reader began: its snapshot is not known
            acked = covered
        else:
            return
        book = self._subscriptions.setdefault(name, _Subscription())
        if book.last_heard is not None and where <= book.last_heard:
            return  # heard at its receipt already, and now read back
        book.last_heard = where
        book.heard.append(_Heard(where, acked, written_at))
        if len(book.heard) > limits.sync_exposure_markers_max:
            book.heard.popleft()
        if book.acked is not None and not indexes.beyond(book.acked, acked):
            book.unheard_since = None

    def _acked_in(self, message: pb.SubscriptionAckRanges, indexes: Indexes) -> dict[str, Acked]:
        """Per origin, an own ack-ranges marker's ranges in local positions. Not its
        mark-delete position: receivers apply what its ranges say, which hold only what
        the reader had read when it was built."""
        out: dict[str, Acked] = {}
        for origin in message.origins:
            cluster = origin.origin_cluster
            index = None if cluster == self.local else indexes.forward.get(cluster)
            if index is None and cluster != self.local:
                continue
            ranges: list[Range] = []
            for span in origin.ranges:
                first, last = key(span.first), key(span.last)
                ranges += [(first, last)] if index is None else index.map_range(first, last)[0]
            out[cluster] = Acked(Position.EARLIEST, tuple(ranges))
        return out

    def figures(
        self,
        now: float,
        remotes: Set[str],
        stored_to: Mapping[str, Position | None],
        indexes: Indexes,
        markers_stored_to: Mapping[str, Position | None] | None = None,
    ) -> dict[str, dict[str, Exposure | None]]:
        """Per subscription with a state read here and per remote: its exposure (None
        where ``stored_to`` does not say how far the remote stores the topic).
        ``markers_stored_to``: how far it stores the topic the markers travel on, when
        that is not the topic itself (beside real Pulsar, the namespace's side topic;
        the positions heard are then that topic's)."""
        markers_at = stored_to if markers_stored_to is None else markers_stored_to
        out: dict[str, dict[str, Exposure | None]] = {}
        for name, book in sorted(self._subscriptions.items()):
            if book.acked is None:
                continue  # a standby: its state comes from elsewhere
            figures: dict[str, Exposure | None] = {}
            for remote in sorted(remotes):
                stored, markers = stored_to.get(remote), markers_at.get(remote)
                if stored is None or markers is None:
                    figures[remote] = None
                    continue
                _fold(book, remote, markers)
                messages = exposed(
                    book.acked,
                    book.stored.get(remote, {}),
                    local=self.local,
                    remote=remote,
                    own=indexes.forward[self.local],
                    delivered=stored,
                    remote_copies=indexes.reverse.get(remote),
                )
                figures[remote] = Exposure(messages, _oldest_s(book, markers, now))
            _forget_stored(book, remotes)
            out[name] = figures
        return out


def _bound(kept: MutableMapping[Any, Any]) -> None:
    """The oldest go past ``limits.sync_exposure_markers_max`` (dicts keep order)."""
    while len(kept) > limits.sync_exposure_markers_max:
        del kept[next(iter(kept))]


def _oldest_s(book: _Subscription, stored: Position, now: float) -> float | None:
    """Seconds since the oldest acknowledgement a remote storing up to ``stored`` does
    not hold was read here: the first own marker it does not store yet, or the first
    state read that no marker carried."""
    times = [h.written_at for h in book.heard if h.position > stored][:1]
    if book.unheard_since is not None:
        times.append(book.unheard_since)
    return max(0.0, now - min(times)) if times else None


def _fold(book: _Subscription, remote: str, stored: Position) -> None:
    """Add what the markers ``remote`` stores since the last fold acknowledge: ack
    ranges and updates alike (``full`` mode writes both, an update first)."""
    done = book.folded_to.get(remote, Position.EARLIEST)
    together = book.stored.setdefault(remote, {})
    for heard in book.heard:
        if heard.position > stored:
            break
        if heard.position <= done:
            continue
        for origin, acked in heard.acked.items():
            together[origin] = union(together.get(origin, []), acked.intervals())
        book.folded_to[remote] = heard.position


def _forget_stored(book: _Subscription, remotes: Set[str]) -> None:
    """Drop the markers every remote stores and has counted."""
    if not remotes or any(r not in book.folded_to for r in remotes):
        return
    oldest = min(book.folded_to[r] for r in remotes)
    while book.heard and book.heard[0].position <= oldest:
        book.heard.popleft()
