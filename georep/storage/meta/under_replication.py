"""Under-replicated ledgers in the metadata store (BookKeeper's
LedgerUnderreplicationManager): the auditor marks, replication workers lock, re-replicate
and complete; locks expire so a dead worker's ledger is taken again."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, or_, select, update
from sqlalchemy.engine import Connection, Row
from sqlalchemy.exc import IntegrityError

from georep.storage.errors import (
    BadVersion,
    InvalidArgument,
)
from georep.storage.meta.checks import check_duration, check_int, check_name, check_names
from georep.storage.meta.engine import Conflict, MetadataEngine, table_of
from georep.storage.meta.ledgers import select_ledger
from georep.storage.meta.models import UnderReplicatedRow

_underreplicated = table_of(UnderReplicatedRow)


@dataclass(frozen=True)
class UnderReplicatedLedger:
    ledger_id: int
    lost_bookies: frozenset[str]
    marked_at: float
    lock_holder: str | None
    lock_expires_at: float | None
    version: int


class UnderReplicationRepository:
    """Under-replicated ledgers: markers, locks held by replication workers, completion
    (BookKeeper's LedgerUnderreplicationManager)."""

    def __init__(self, engine: MetadataEngine) -> None:
        self._engine = engine

    # --- under-replicated ledgers ---------------------------------------------------
    async def mark_underreplicated(self, ledger_id: int, lost_bookies: Iterable[str]) -> None:
        """Mark the ledger under-replicated, adding ``lost_bookies`` to its lost set.

        A ledger marked again keeps its ``marked_at`` (its place in the queue) and its lock.
        NoSuchLedger when the ledger does not exist.
        """
        check_int("ledger id", ledger_id, 0)
        lost = check_names("lost bookie", lost_bookies)
        if not lost:
            raise InvalidArgument(f"ledger {ledger_id}: no lost bookies given")
        await self._engine.call(
            self._engine.retrying, self._mark_underreplicated, ledger_id, lost, self._engine.clock()
        )

    async def list_underreplicated(self) -> list[UnderReplicatedLedger]:
        """Every marker, oldest marked first."""
        return await self._engine.call(self._list_underreplicated)

    async def lock_underreplicated(
        self, holder: str, lock_s: float, *, exclude: Iterable[int] = ()
    ) -> UnderReplicatedLedger | None:
        """Lock the oldest marker whose lock is free or expired, not in ``exclude``, for
        ``holder`` until ``clock() + lock_s``; None when there is none."""
        check_name("lock holder", holder)
        check_duration(lock_s)
        excluded = sorted({check_int("ledger id", ledger_id, 0) for ledger_id in exclude})
        return await self._engine.call(
            self._engine.retrying,
            self._lock_underreplicated,
            holder,
            lock_s,
            excluded,
            self._engine.clock(),
        )

    async def unlock_underreplicated(self, ledger_id: int, holder: str) -> None:
        """Free the lock if ``holder`` holds it; a no-op otherwise."""
        check_int("ledger id", ledger_id, 0)
        check_name("lock holder", holder)
        await self._engine.call(self._unlock_underreplicated, ledger_id, holder)

    async def complete_underreplicated(
        self, ledger_id: int, holder: str, *, replicated: Iterable[str]
    ) -> None:
        """Record that ``replicated`` bookies' fragments were copied elsewhere.

        Only the lock's holder may (even past the lock's expiry, as long as nobody took it
        over); anyone else gets BadVersion. Removes those bookies from the lost set, then
        deletes the marker when the set is empty, else frees the lock. A no-op when the
        marker is already gone.
        """
        check_int("ledger id", ledger_id, 0)
        check_name("lock holder", holder)
        done = check_names("replicated bookie", replicated)
        await self._engine.call(
            self._engine.retrying, self._complete_underreplicated, ledger_id, holder, done
        )

    # --- under-replicated ledgers, in a worker thread -------------------------------
    def _mark_underreplicated(self, ledger_id: int, lost: frozenset[str], now: float) -> None:
        with self._engine.writing() as connection:
            select_ledger(connection, ledger_id)  # NoSuchLedger
            row = _select_marker(connection, ledger_id)
            if row is None:
                try:
                    connection.execute(
                        _underreplicated.insert().values(
                            ledger_id=ledger_id,
                            lost_bookies=sorted(lost),
                            marked_at=now,
                            lock_holder=None,
                            lock_expires_at=None,
                            version=1,
                        )
                    )
                except IntegrityError as error:
                    # PostgreSQL: marked (or the ledger deleted) by a concurrent transaction;
                    # the retry merges into that marker (or raises NoSuchLedger).
                    raise Conflict from error
                return
            merged = sorted(set(row.lost_bookies) | lost)
            if merged != sorted(row.lost_bookies):
                _cas_marker(connection, row, lost_bookies=merged)

    def _list_underreplicated(self) -> list[UnderReplicatedLedger]:
        query = select(_underreplicated).order_by(
            _underreplicated.c.marked_at, _underreplicated.c.ledger_id
        )
        with self._engine.reading() as connection:
            return [_marker_from_row(row) for row in connection.execute(query)]

    def _lock_underreplicated(
        self, holder: str, lock_s: float, excluded: list[int], now: float
    ) -> UnderReplicatedLedger | None:
        markers = _underreplicated.c
        query = (
            select(_underreplicated)
            .where(or_(markers.lock_holder.is_(None), markers.lock_expires_at <= now))
            .order_by(markers.marked_at, markers.ledger_id)
            .limit(1)
        )
        if excluded:
            query = query.where(markers.ledger_id.not_in(excluded))
        with self._engine.writing() as connection:
            row = connection.execute(query).one_or_none()
            if row is None:
                return None
            _cas_marker(connection, row, lock_holder=holder, lock_expires_at=now + lock_s)
        return UnderReplicatedLedger(
            ledger_id=row.ledger_id,
            lost_bookies=frozenset(row.lost_bookies),
            marked_at=row.marked_at,
            lock_holder=holder,
            lock_expires_at=now + lock_s,
            version=row.version + 1,
        )

    def _unlock_underreplicated(self, ledger_id: int, holder: str) -> None:
        markers = _underreplicated.c
        with self._engine.writing() as connection:
            connection.execute(
                update(_underreplicated)
                .where(markers.ledger_id == ledger_id, markers.lock_holder == holder)
                .values(lock_holder=None, lock_expires_at=None, version=markers.version + 1)
            )

    def _complete_underreplicated(
        self, ledger_id: int, holder: str, replicated: frozenset[str]
    ) -> None:
        markers = _underreplicated.c
        with self._engine.writing() as connection:
            row = _select_marker(connection, ledger_id)
            if row is None:
                return
            if row.lock_holder != holder:
                raise BadVersion(
                    f"ledger {ledger_id}: under-replication lock is held by"
                    f" {row.lock_holder!r}, not {holder!r}"
                )
            remaining = sorted(set(row.lost_bookies) - replicated)
            if remaining:
                _cas_marker(
                    connection, row, lost_bookies=remaining, lock_holder=None, lock_expires_at=None
                )
                return
            result = connection.execute(
                delete(_underreplicated).where(
                    markers.ledger_id == ledger_id, markers.version == row.version
                )
            )
            if result.rowcount != 1:
                raise Conflict


def _select_marker(connection: Connection, ledger_id: int) -> Row[Any] | None:
    query = select(_underreplicated).where(_underreplicated.c.ledger_id == ledger_id)
    return connection.execute(query).one_or_none()


def _cas_marker(connection: Connection, row: Row[Any], **values: object) -> None:
    markers = _underreplicated.c
    result = connection.execute(
        update(_underreplicated)
        .where(markers.ledger_id == row.ledger_id, markers.version == row.version)
        .values(**values, version=row.version + 1)
    )
    if result.rowcount != 1:
        raise Conflict


def _marker_from_row(row: Row[Any]) -> UnderReplicatedLedger:
    return UnderReplicatedLedger(
        ledger_id=row.ledger_id,
        lost_bookies=frozenset(row.lost_bookies),
        marked_at=row.marked_at,
        lock_holder=row.lock_holder,
        lock_expires_at=row.lock_expires_at,
        version=row.version,
    )
