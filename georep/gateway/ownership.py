"""Which topic partitions this gateway instance runs, when several run for one cluster.

N instances of the gateway of a cluster share its configuration and its metadata store
(PostgreSQL across hosts, SQLite on one host). Each topic partition -- its replicator to
every remote and its subscription sync -- is run by exactly one of them. The mechanism is
the one the metadata store already carries, leases, plus a deterministic assignment, so
there is no coordinator to run and none to lose:

**Members.** Every instance keeps a row in ``gateway_members`` (``gateway/meta/
members.py``) with a lease it renews every ``heartbeat_s`` and that expires
``lease_s`` after a renewal; the same transaction reads every live row. The live
instances are the *membership*.

**Assignment.** A partition belongs to the member with the highest
``blake2b(member, partition)`` (rendezvous hashing): every instance computes the same
owner from the same membership with no message exchanged, each of N owns about 1/N, and
when one joins or leaves only the partitions that move to or from it change hands.

**Views: nobody starts what another may still run.** Each row also carries the member's
*view*: the membership whose shares it has stopped down to. An instance runs a partition
only if its own view gives it that partition; when the membership changes it first stops
what is no longer its own, then writes its new view, and it starts a partition only when
no other live member's view still gives that partition to that member. Both sides write
their view before reading the others' (one transaction each, in the same store), so of
two instances that both want a partition at least one sees the other's claim. A departed
member's row is gone (clean stop) or expired (kill -9), and no longer counts.

**Self-fencing.** An instance that has not renewed its lease for ``lease_s - heartbeat_s``
(its store unreachable, its process paused) while other instances are alive stops
everything it runs before they may take it over; an instance alone keeps running.
Expiry is judged by each reader's clock against the writer's, so instances on several
hosts need clocks in step well within ``heartbeat_s`` (NTP).

What keeps replication exact does not rest on the lease alone: a replicator reads through
an Exclusive subscription (a second reader is refused) and writes with the remote's
deduplication (a message written twice is stored once), so an instance that outlives its
lease (a long pause) costs a refused subscribe, not a duplicate.

Costs: one write and one read of N rows per heartbeat per instance, and nothing per
partition while the membership stands still; a log line when the membership changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Protocol

from georep.gateway.meta.members import GatewayMember
from georep.runtime.awaiting import within
from georep.storage.errors import StorageError

log = logging.getLogger(__name__)


def generated_instance_name() -> str:
    """``<host>-<pid>-<random>``: unique per process, readable in logs and metrics."""
    host = "".join(c if c.isalnum() or c in "._-" else "-" for c in socket.gethostname())
    return f"{host[:32] or 'gateway'}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


def owner_of(partition: str, members: Iterable[str]) -> str | None:
    """The member ``partition`` belongs to under a membership (rendezvous hashing)."""
    best: tuple[bytes, str] | None = None
    for member in members:
        score = hashlib.blake2b(f"{member}\0{partition}".encode(), digest_size=8).digest()
        if best is None or (score, member) > best:
            best = (score, member)
    return None if best is None else best[1]


class _Owners:
    """``owner_of`` remembered per membership: a pass asks it for every partition, and
    the memberships in play (the live one, each member's view) are few and change rarely."""

    def __init__(self, kept: int = 8) -> None:
        self._kept = kept
        self._by_view: dict[frozenset[str], dict[str, str | None]] = {}

    def __call__(self, partition: str, view: frozenset[str]) -> str | None:
        owners = self._by_view.get(view)
        if owners is None:
            if len(self._by_view) >= self._kept:
                self._by_view.pop(next(iter(self._by_view)))
            owners = self._by_view[view] = {}
        owner = owners.get(partition)
        if owner is None and partition not in owners:
            owner = owners[partition] = owner_of(partition, view)
        return owner

    def forget(self, partitions_kept: set[str]) -> None:
        for owners in self._by_view.values():
            for partition in [p for p in owners if p not in partitions_kept]:
                del owners[partition]


class Shares(Protocol):
    """What the replication manager asks of ownership: :class:`Ownership` among several
    instances, :class:`Sole` for a manager alone."""

    instance: str
    generation: int

    def target(self, partition: str) -> bool: ...

    def may_run(self, partition: str) -> bool: ...

    def forget(self, partitions_kept: set[str]) -> None: ...

    async def publish(self) -> None: ...


class Sole:
    """Every partition, for a manager that runs without a metadata store of instances."""

    generation = 0

    def __init__(self, instance: str) -> None:
        self.instance = instance

    def target(self, partition: str) -> bool:
        return True

    def may_run(self, partition: str) -> bool:
        return True

    def forget(self, partitions_kept: set[str]) -> None:
        pass

    async def publish(self) -> None:
        pass


class MemberStore(Protocol):
    """What ownership needs of the metadata store (``gateway/meta/members.py``)."""

    async def member_heartbeat(
        self, cluster: str, instance: str, lease_s: float, view: Iterable[str]
    ) -> list[GatewayMember]: ...

    async def member_leave(self, cluster: str, instance: str) -> None: ...


class Ownership:
    """This instance's membership and the partitions it may run (module docstring)."""

    def __init__(
        self,
        store: MemberStore,
        *,
        cluster: str,
        instance: str,
        lease_s: float,
        heartbeat_s: float,
        on_change: Callable[[], None],
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self.cluster = cluster
        self.instance = instance
        self.lease_s = lease_s
        self.heartbeat_s = heartbeat_s
        self._on_change = on_change
        self._clock = clock
        self._wall_clock = wall_clock
        self._owners = _Owners()
        #: The live membership as last read (this instance included while it holds a lease).
        self.members: list[GatewayMember] = []
        #: The membership this instance's shares are computed from: the live one.
        self.view: frozenset[str] = frozenset()
        #: The view this instance has stopped down to and told the others.
        self.applied: frozenset[str] = frozenset()
        #: No lease: everything is stopped until a heartbeat succeeds again.
        self.fenced = True
        self.generation = 0
        self.heartbeats = 0
        self.heartbeat_failures = 0
        self.last_error: str | None = None
        self._renewed_at: float | None = None
        self._task: asyncio.Task[None] | None = None
        self._beat = asyncio.Lock()

    # -- life cycle --

    async def start(self) -> None:
        """Join: the first heartbeat now (a store that cannot be reached is retried by
        the loop), then one every ``heartbeat_s``."""
        await self.heartbeat()
        self._task = asyncio.get_running_loop().create_task(self._loop(), name="ownership")

    async def stop(self) -> None:
        """Leave: the others take this instance's partitions at their next heartbeat.
        Call after everything this instance ran has stopped."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        try:
            await self._store.member_leave(self.cluster, self.instance)
        except StorageError as error:
            log.warning("leaving the gateways of %s: %s (the lease expires)", self.cluster, error)

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_s)
            await self.heartbeat()

    # -- decisions --

    def target(self, partition: str) -> bool:
        """Whether ``partition`` is this instance's under the live membership."""
        return not self.fenced and self._owners(partition, self.view) == self.instance

    def may_run(self, partition: str) -> bool:
        """Whether this instance may start ``partition`` now: its own under the live
        membership and under the view it told, and no other live member's view gives it
        to that member."""
        if not self.target(partition) or self._owners(partition, self.applied) != self.instance:
            return False
        for member in self.members:
            if member.instance != self.instance:
                view = frozenset(member.view)
                if self._owners(partition, view) == member.instance:
                    return False
        return True

    def forget(self, partitions_kept: set[str]) -> None:
        """Drop remembered owners of partitions no longer listed."""
        self._owners.forget(partitions_kept)

    async def publish(self) -> None:
        """Tell the others this instance has stopped down to the live membership's share
        (the caller stopped what is no longer its own)."""
        if not self.fenced and self.applied != self.view:
            self.applied = self.view
            await self.heartbeat()

    # -- the heartbeat --

    async def heartbeat(self) -> None:
        async with self._beat:
            started = self._clock()
            try:  # a store that hangs counts as one that fails: the lease runs out alike
                members = await within(
                    self._store.member_heartbeat(
                        self.cluster, self.instance, self.lease_s, self.applied
                    ),
                    self.lease_s - self.heartbeat_s,
                )
            except (StorageError, TimeoutError) as error:
                self._failed(
                    str(error)
                    or f"no answer within {self.lease_s - self.heartbeat_s:g} s"
                    " (the metadata store, or this process, too busy)"
                )
                return
            self.heartbeats += 1
            self._renewed_at = started
            self.last_error = None
            self._read(members, was_fenced=self.fenced)

    def _failed(self, error: str) -> None:
        self.heartbeat_failures += 1
        if self.last_error is None:
            log.warning("gateway lease of %s not renewed: %s", self.instance, error)
        self.last_error = error
        renewed, now = self._renewed_at, self._clock()
        expiring = renewed is None or now - renewed >= self.lease_s - self.heartbeat_s
        # Alone, nobody would take over: stopping everything would only cost a restart
        # of every partition (a gateway starting 10,000 of them is slow to heartbeat).
        others = any(m.instance != self.instance for m in self.members)
        if not self.fenced and expiring and others:
            log.warning(
                "gateway %s stops everything it runs: its lease may have expired (%s)",
                self.instance,
                error,
            )
            self.fenced = True
            self.view = self.applied = frozenset()
            self.generation += 1
            self._on_change()

    def _read(self, members: list[GatewayMember], *, was_fenced: bool) -> None:
        live = frozenset(m.instance for m in members)
        views = {m.instance: m.view for m in members if m.instance != self.instance}
        before = (
            self.view,
            {m.instance: m.view for m in self.members if m.instance != self.instance},
        )
        self.members = members
        self.fenced = self.instance not in live  # a lease renewed is in the rows read
        self.view = live if not self.fenced else frozenset()
        if was_fenced and not self.fenced:
            self.applied = frozenset()  # nothing runs yet: tell an empty view first
        if (self.view, views) != before or was_fenced != self.fenced:
            self.generation += 1
            if self.view != before[0]:
                log.info(
                    "gateways of %s: %s (this one: %s)",
                    self.cluster,
                    ", ".join(sorted(live)) or "none",
                    self.instance,
                )
            self._on_change()

    # -- what it tells --

    def members_json(self) -> list[dict[str, object]]:
        now = self._wall_clock()
        return [
            {
                "instance": m.instance,
                "view": sorted(m.view),
                "joinedAt": m.joined_at,
                "expiresInSeconds": round(max(0.0, m.expires_at - now), 3),
            }
            for m in self.members
        ]

    def owner(self, partition: str) -> str | None:
        """The live member ``partition`` belongs to."""
        return self._owners(partition, self.view) if self.view else None
