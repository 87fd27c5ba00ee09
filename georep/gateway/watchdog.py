"""The gateway's watchdog: parts that stopped moving are said, counted and restarted.

A part (a replicator, a topic's subscription sync) knows when it last moved on and whether
work waits for it (``stalled_s``); the manager asks every quarter of ``[gateway]
stuck_after_s`` which ones stalled that long, and :class:`Watch` decides what to do with
them: restart each (``restart``: what unloading the topic does in Pulsar), at most
``limits.replicator_restarts_max`` times until it moves again, then leave it for the
operator. What it says is one line per group (a remote, for replicators) and pass with a
count, and only when something changed, so 10,000 stuck partitions make one line.
docs/WAN.md, "Stuck replication", is the operator's account.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Generic, Protocol, TypeVar

from georep import limits

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)


class Restartable(Protocol):
    topic: str
    #: Restarts since it last moved on.
    restarts: int
    last_error: str | None

    def stalled_s(self, now: float) -> float: ...

    async def restart(self) -> bool: ...


class Watch(Generic[K]):
    """The stuck parts of one kind, by key, said per group (``group_of``)."""

    def __init__(self, group_of: Callable[[K], str], stuck: str, moving: str) -> None:
        #: How a group's stuck parts are said: ``{group}: {count} topic partitions`` and
        #: then these words (``{s}`` the threshold), or, moving again, ``moving``.
        self._group_of = group_of
        self._stuck = stuck
        self._moving = moving
        self._healing: set[K] = set()
        self._given_up: set[K] = set()
        #: Group -> restarts made since the start.
        self.restarts: dict[str, int] = {}

    def restart_due(
        self, stalled: Mapping[K, Restartable], alive: set[K], stuck_after_s: float
    ) -> list[Restartable]:
        """Which of ``stalled`` to restart now; says what changed since the last pass."""
        self._healing &= alive
        healed = {key for key in self._healing if key not in stalled}
        for group, count in sorted(_count(map(self._group_of, healed)).items()):
            log.info("%s: %d topic partitions %s", group, count, self._moving)
        self._healing -= healed
        self._given_up &= set(stalled)
        due = {
            k: part for k, part in stalled.items() if part.restarts < limits.replicator_restarts_max
        }
        given_up = set(stalled) - set(due) - self._given_up
        self._given_up |= given_up
        for group in sorted({self._group_of(key) for key in {*due, *given_up}}):
            mine = sorted((key for key in stalled if self._group_of(key) == group), key=repr)
            first = stalled[mine[0]]
            log.warning(
                "%s: %d topic partitions %s (first %s, last error: %s); restarting %d,"
                " %d past %d restarts",
                group,
                len(mine),
                self._stuck.format(s=stuck_after_s),
                first.topic,
                first.last_error,
                sum(1 for key in due if self._group_of(key) == group),
                sum(1 for key in given_up if self._group_of(key) == group),
                limits.replicator_restarts_max,
            )
        for key in due:
            group = self._group_of(key)
            self.restarts[group] = self.restarts.get(group, 0) + 1
        self._healing |= set(due)
        return list(due.values())

    def problems(self, stalled: Mapping[K, Restartable], stuck_after_s: float) -> list[str]:
        """``/health``'s lines: per group, how many are stuck, and how many of them could
        not be healed by their restarts."""
        out = []
        for group, count in sorted(_count(map(self._group_of, stalled)).items()):
            past = sum(1 for k in stalled if self._group_of(k) == group and k in self._given_up)
            healing = (
                f"{past} could not be healed by {limits.replicator_restarts_max} restarts"
                if past
                else "restarted"
            )
            stuck = self._stuck.format(s=stuck_after_s)
            out.append(f"{group}: {count} topic partitions {stuck}; {healing}")
        return out


def _count(groups: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for group in groups:
        out[group] = out.get(group, 0) + 1
    return out
