"""Taking snapshots of a replicated topic: the protocol's state, without I/O.

Cluster A takes a snapshot of topic partition T with remotes R (docs/ARCHITECTURE.md,
"Snapshots"):

1. A writes a SnapshotRequest marker into T; replication carries it to every remote.
2. Each remote x answers with a SnapshotResponse marker carrying its last position
   P_x of T, written into its own T and replicated back to A only.
3. When every remote answered, the round is complete. With one remote one round is
   enough; with more, A runs a second round (same snapshot id), as Pulsar does, so that
   every remote's reported position already includes the others' first answers and the
   map is consistent for all of them.
4. The snapshot is complete when every round is: A records it as a local Snapshot
   marker with the local position of the last response and each remote's P_x.

A snapshot not complete within the timeout is abandoned; answers to it that arrive
later are ignored, and a partial snapshot is never used. A new snapshot starts only
when the interval has passed, none is in flight, something was published since the
last one, every remote's replicator is connected, and at least one subscription of
the topic is replicated.

:class:`SnapshotController` decides; the gateway performs what it returns (writes a
request, records a snapshot) and feeds back what it reads (responses), with ``now``
from an injectable clock so tests can drive time.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field

from georep import limits
from georep.domain.position import Position
from georep.snapshots import markers_pb2 as pb
from georep.snapshots.markers import key, position


@dataclass(frozen=True, slots=True)
class CompletedSnapshot:
    snapshot_id: str
    local_position: Position
    remote_positions: Mapping[str, Position]

    def marker(self) -> pb.Snapshot:
        return pb.Snapshot(
            snapshot_id=self.snapshot_id,
            local_position=position(*self.local_position),
            clusters=[
                pb.ClusterPosition(cluster=c, position=position(*p))
                for c, p in sorted(self.remote_positions.items())
            ],
        )


@dataclass(slots=True)
class _InFlight:
    snapshot_id: str
    remotes: frozenset[str]
    started_at: float
    rounds: int
    round: int = 1
    answered: dict[str, Position] = field(default_factory=dict)
    last_local: Position | None = None


@dataclass(slots=True)
class SnapshotStats:
    started: int = 0
    completed: int = 0
    timed_out: int = 0
    ignored_responses: int = 0
    duration_s_last: float = 0.0


class SnapshotController:
    """Snapshots of one topic partition, taken by ``local_cluster``."""

    def __init__(
        self,
        local_cluster: str,
        *,
        interval_s: float = limits.snapshot_interval_s_default,
        timeout_s: float = limits.snapshot_timeout_s_default,
    ) -> None:
        self.local_cluster = local_cluster
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.stats = SnapshotStats()
        self._in_flight: _InFlight | None = None
        self._last_started_at: float | None = None
        self._ids = itertools.count(1)
        #: The remotes that had not answered the last snapshot that timed out.
        self.unanswered: frozenset[str] = frozenset()

    @property
    def pending(self) -> bool:
        return self._in_flight is not None

    def maybe_start(
        self,
        now: float,
        *,
        remotes_connected: Mapping[str, bool],
        published_since_last: bool,
        replicated_subscriptions: int,
    ) -> pb.SnapshotRequest | None:
        """A request to write, or None when the rules say not to start one now."""
        self.expire(now)
        if (
            self._in_flight is not None
            or not remotes_connected
            or not all(remotes_connected.values())
            or not published_since_last
            or replicated_subscriptions <= 0
        ):
            return None
        if self._last_started_at is not None and now - self._last_started_at < self.interval_s:
            return None
        remotes = frozenset(remotes_connected)
        snapshot_id = f"{self.local_cluster}-{int(now * 1000)}-{next(self._ids)}"
        self._in_flight = _InFlight(snapshot_id, remotes, now, 1 if len(remotes) == 1 else 2)
        self._last_started_at = now
        self.stats.started += 1
        return pb.SnapshotRequest(snapshot_id=snapshot_id, source_cluster=self.local_cluster)

    def on_response(
        self, now: float, response: pb.SnapshotResponse, local_position: Position
    ) -> pb.SnapshotRequest | CompletedSnapshot | None:
        """A response read back from the local topic at ``local_position``. Returns the
        next round's request, the completed snapshot, or None (waiting, or ignored)."""
        self.expire(now)
        flight = self._in_flight
        if (
            flight is None
            or response.snapshot_id != flight.snapshot_id
            or not response.HasField("cluster")
            or response.cluster.cluster not in flight.remotes
        ):
            self.stats.ignored_responses += 1
            return None
        flight.answered[response.cluster.cluster] = key(response.cluster.position)
        flight.last_local = max(flight.last_local or local_position, local_position)
        if set(flight.answered) != flight.remotes:
            return None
        if flight.round < flight.rounds:
            flight.round += 1
            flight.answered = {}
            return pb.SnapshotRequest(
                snapshot_id=flight.snapshot_id, source_cluster=self.local_cluster
            )
        self._in_flight = None
        self.stats.completed += 1
        self.stats.duration_s_last = now - flight.started_at
        return CompletedSnapshot(flight.snapshot_id, flight.last_local, dict(flight.answered))

    def expire(self, now: float) -> bool:
        """Abandon the snapshot in flight if its time is up; True if one was."""
        flight = self._in_flight
        if flight is not None and now - flight.started_at >= self.timeout_s:
            self._in_flight = None
            self.unanswered = flight.remotes - set(flight.answered)
            self.stats.timed_out += 1
            return True
        return False


def respond(
    request: pb.SnapshotRequest, local_cluster: str, last_position: Position
) -> pb.SnapshotResponse:
    """A remote's answer to a request: its own last position of the topic."""
    return pb.SnapshotResponse(
        snapshot_id=request.snapshot_id,
        cluster=pb.ClusterPosition(cluster=local_cluster, position=position(*last_position)),
    )
