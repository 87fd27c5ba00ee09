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

Counted in entries: an unbatched message is one entry; a batch counts once, and a batch
acknowledged in part counts as not acknowledged. Not counted: acknowledgements a
consumer sent that the broker has not taken yet, copies of a third cluster's messages,
and markers stored on R that R's gateway has not applied yet (its ``pendingApplies``
and ``georep_subsync_lag_ms`` show those).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from georep.position import Position
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
