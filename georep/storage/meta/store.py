"""The metadata store: ledger metadata, bookie registrations, under-replication, leases.

One SQLAlchemy engine (SQLite file by default, PostgreSQL by URL; see ``migrate.py`` for
how each is configured) behind an asyncio facade: every operation is one short
transaction run in a worker thread with ``asyncio.to_thread``. Metadata is off the hot data
path (a ledger is created, CAS'd a few times and closed), so a thread per call is cheap
and keeps the database code plain and synchronous. A cancelled call's transaction still
runs to its end in its thread: the caller only stops waiting.

Every change to a mutable row is a compare-and-set on its ``version``. For ledgers the
caller holds the version (``LedgerMetadata.version``) and a stale one gets ``BadVersion``;
the caller re-reads and decides again. Under-replication locks and leases are CAS'd by the
store itself, retried at most ``limits.metadata_cas_retries_max`` times. Worked example of
``lock_underreplicated`` with two workers on PostgreSQL (READ COMMITTED):

1. both read the oldest free marker, ledger 7 at version 2;
2. both send ``UPDATE ... SET lock_holder = me, version = 3 WHERE ledger_id = 7 AND
   version = 2``; the second blocks on the row lock until the first commits, then finds
   version 3 and changes no row;
3. the second counts a CAS conflict, starts a new transaction, and takes ledger 8.

On SQLite the writers' ``BEGIN IMMEDIATE`` serializes the two transactions whole, so the
second already reads ledger 7 as locked.

Time comes from the injected ``clock`` (seconds), read once per call before the call goes
to its thread. A lease, registration or lock is alive while its expiry is strictly after
``clock()``.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import enum
import math
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

from alembic.runtime.migration import MigrationContext
from sqlalchemy import Table, case, delete, func, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine, Row
from sqlalchemy.exc import IntegrityError, InterfaceError, OperationalError

from georep import limits
from georep.invariant import invariant
from georep.storage.errors import (
    BadVersion,
    InvalidArgument,
    MetadataUnavailable,
    NoSuchCursor,
    NoSuchLedger,
    NoSuchManagedLedger,
)
from georep.storage.meta import migrate as migrations
from georep.storage.meta.ledger_metadata import LedgerMetadata, LedgerState
from georep.storage.meta.models import (
    BookieRow,
    LeaseRow,
    LedgerRow,
    ManagedCursorRow,
    ManagedLedgerRow,
    NamespaceRow,
    RemoteClusterRow,
    ReplicationPolicyRow,
    TenantRow,
    UnderReplicatedRow,
    managed_name_chars_max,
    name_chars_max,
    url_chars_max,
)

Clock = Callable[[], float]
_P = ParamSpec("_P")
_T = TypeVar("_T")

_ledgers: Table = LedgerRow.__table__  # type: ignore[assignment]
_bookies: Table = BookieRow.__table__  # type: ignore[assignment]
_underreplicated: Table = UnderReplicatedRow.__table__  # type: ignore[assignment]
_leases: Table = LeaseRow.__table__  # type: ignore[assignment]
_managed_ledgers: Table = ManagedLedgerRow.__table__  # type: ignore[assignment]
_managed_cursors: Table = ManagedCursorRow.__table__  # type: ignore[assignment]


@dataclass(frozen=True)
class BookieRegistration:
    address: str
    registered_at: float
    lease_expires_at: float


@dataclass(frozen=True)
class UnderReplicatedLedger:
    ledger_id: int
    lost_bookies: frozenset[str]
    marked_at: float
    lock_holder: str | None
    lock_expires_at: float | None
    version: int


@dataclass(frozen=True)
class LedgerInfo:
    """One ledger of a managed ledger's list. The current (last) ledger reads 0 entries
    and bytes, and ``closed_at`` None, until it is closed."""

    ledger_id: int
    entries: int = 0
    size_bytes: int = 0
    created_at: float = 0.0
    closed_at: float | None = None


@dataclass(frozen=True)
class ManagedLedgerInfo:
    """A managed ledger's row: its ledgers in id order, and the CAS ``version``."""

    name: str
    ledgers: tuple[LedgerInfo, ...]
    created_at: float
    version: int

    def replace(self, **changes: Any) -> ManagedLedgerInfo:
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class ManagedCursorInfo:
    """A cursor's row: the ledger holding its persisted states, and the mark-delete
    position ``(ledger id, entry id)`` and properties as of when that ledger started."""

    managed_ledger: str
    name: str
    cursor_ledger_id: int | None
    mark_delete: tuple[int, int]
    properties: Mapping[str, str]
    created_at: float
    version: int

    def replace(self, **changes: Any) -> ManagedCursorInfo:
        return dataclasses.replace(self, **changes)


class _Conflict(Exception):
    """A store-internal CAS lost; the operation retries in a new transaction."""


class MetadataStore:
    """Async access to the metadata database. Create with :meth:`open`."""

    def __init__(self, url: str, engine: Engine, clock: Clock) -> None:
        self.url = url
        self._engine = engine
        self._write_engine = engine.execution_options(**{migrations.BEGIN_OPTION: "IMMEDIATE"})
        self._clock = clock
        self._closed = False
        self._stats: collections.Counter[str] = collections.Counter()
        self._stats_lock = threading.Lock()

    @classmethod
    async def open(
        cls, url: str, *, migrate: bool = True, clock: Clock = time.time
    ) -> MetadataStore:
        """Connect to ``url``; with ``migrate`` first bring its schema to head.

        Without ``migrate`` the schema must already be at this code's head revision.
        """
        migrations.database_url(url)  # InvalidArgument before any I/O
        try:
            if migrate:
                await asyncio.to_thread(migrations.upgrade, url)
            engine = await asyncio.to_thread(migrations.create_engine, url)
            try:
                revision = await asyncio.to_thread(_current_revision, engine)
            except BaseException:
                engine.dispose()
                raise
        except (OperationalError, InterfaceError) as error:
            raise MetadataUnavailable(f"metadata database unavailable: {error}") from error
        head = await asyncio.to_thread(migrations.head)
        if revision != head:
            engine.dispose()
            raise InvalidArgument(
                f"metadata schema at revision {revision}, this code needs {head}:"
                " open with migrate=True or run the migrations"
            )
        return cls(url, engine, clock)

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            await asyncio.to_thread(self._engine.dispose)

    async def __aenter__(self) -> MetadataStore:
        return self

    async def __aexit__(self, *_exc_info: object) -> None:
        await self.close()

    def stats(self) -> dict[str, int]:
        """Counts: ``operations``, ``cas_conflicts`` (stale versions and lost internal
        CAS), ``unavailable`` (database errors surfaced as ``MetadataUnavailable``)."""
        with self._stats_lock:
            return {
                "operations": self._stats["operations"],
                "cas_conflicts": self._stats["cas_conflicts"],
                "unavailable": self._stats["unavailable"],
            }

    # --- ledgers --------------------------------------------------------------------
    async def create_ledger(
        self,
        *,
        ensemble_size: int,
        write_quorum: int,
        ack_quorum: int,
        ensemble: Sequence[str],
        custom: Mapping[str, str] | None = None,
    ) -> LedgerMetadata:
        """A new OPEN ledger with one segment ``(0, ensemble)``, at version 1."""
        for name, value in (("E", ensemble_size), ("Qw", write_quorum), ("Qa", ack_quorum)):
            _check_int(name, value, 1)
        if not ensemble_size >= write_quorum >= ack_quorum:
            raise InvalidArgument(
                f"need E >= Qw >= Qa >= 1, got {ensemble_size}/{write_quorum}/{ack_quorum}"
            )
        if ensemble_size > limits.ensemble_size_max:
            raise InvalidArgument(
                f"ensemble size {ensemble_size} > {limits.ensemble_size_max} (the maximum)"
            )
        bookies = _check_ensemble(ensemble, ensemble_size)
        custom_dict = _check_custom(custom or {})
        now = self._clock()
        return await self._call(
            self._create_ledger, now, ensemble_size, write_quorum, ack_quorum, bookies, custom_dict
        )

    async def get_ledger(self, ledger_id: int) -> LedgerMetadata:
        _check_int("ledger id", ledger_id, 0)
        return await self._call(self._get_ledger, ledger_id)

    async def update_ledger(self, metadata: LedgerMetadata) -> LedgerMetadata:
        """CAS: store ``metadata`` if the stored version is ``metadata.version``.

        Stores state, last entry id, length, ensembles and custom; returns the metadata at
        version + 1. The quorums and creation time never change, and a CLOSED ledger stays
        CLOSED with the same end (readers rely on it): asking otherwise is InvalidArgument.
        """
        if not isinstance(metadata, LedgerMetadata):
            raise InvalidArgument(f"not LedgerMetadata: {metadata!r}")
        _check_int("ledger id", metadata.ledger_id, 0)
        _check_int("last entry id", metadata.last_entry_id, -1)
        _check_int("length", metadata.length, 0)
        for _, bookies in metadata.ensembles:
            _check_ensemble(bookies, metadata.ensemble_size)
        _check_custom(metadata.custom)
        return await self._call(self._update_ledger, metadata)

    async def delete_ledger(self, ledger_id: int) -> None:
        """Delete the ledger and its under-replication marker; a no-op when absent."""
        _check_int("ledger id", ledger_id, 0)
        await self._call(self._delete_ledger, ledger_id)

    async def list_ledger_ids(self) -> list[int]:
        return await self._call(self._list_ledger_ids)

    # --- bookies --------------------------------------------------------------------
    async def register_bookie(self, address: str, lease_s: float) -> None:
        """Register (or re-register) ``address`` alive until ``clock() + lease_s``."""
        _check_name("bookie address", address)
        _check_duration(lease_s)
        await self._call(self._upsert_bookie, address, self._clock(), lease_s, True)

    async def renew_bookie(self, address: str, lease_s: float) -> None:
        """Like :meth:`register_bookie`, but keeps the first ``registered_at``."""
        _check_name("bookie address", address)
        _check_duration(lease_s)
        await self._call(self._upsert_bookie, address, self._clock(), lease_s, False)

    async def unregister_bookie(self, address: str) -> None:
        _check_name("bookie address", address)
        await self._call(self._delete_where, _bookies, _bookies.c.address == address)

    async def list_bookies(self, *, alive_only: bool = True) -> list[BookieRegistration]:
        """Registered bookies sorted by address; by default only those whose lease is
        still running."""
        return await self._call(self._list_bookies, self._clock() if alive_only else None)

    # --- under-replicated ledgers ---------------------------------------------------
    async def mark_underreplicated(self, ledger_id: int, lost_bookies: Iterable[str]) -> None:
        """Mark the ledger under-replicated, adding ``lost_bookies`` to its lost set.

        A ledger marked again keeps its ``marked_at`` (its place in the queue) and its lock.
        NoSuchLedger when the ledger does not exist.
        """
        _check_int("ledger id", ledger_id, 0)
        lost = _check_names("lost bookie", lost_bookies)
        if not lost:
            raise InvalidArgument(f"ledger {ledger_id}: no lost bookies given")
        await self._call(self._retrying, self._mark_underreplicated, ledger_id, lost, self._clock())

    async def list_underreplicated(self) -> list[UnderReplicatedLedger]:
        """Every marker, oldest marked first."""
        return await self._call(self._list_underreplicated)

    async def lock_underreplicated(
        self, holder: str, lock_s: float, *, exclude: Iterable[int] = ()
    ) -> UnderReplicatedLedger | None:
        """Lock the oldest marker whose lock is free or expired, not in ``exclude``, for
        ``holder`` until ``clock() + lock_s``; None when there is none."""
        _check_name("lock holder", holder)
        _check_duration(lock_s)
        excluded = sorted({_check_int("ledger id", ledger_id, 0) for ledger_id in exclude})
        return await self._call(
            self._retrying, self._lock_underreplicated, holder, lock_s, excluded, self._clock()
        )

    async def unlock_underreplicated(self, ledger_id: int, holder: str) -> None:
        """Free the lock if ``holder`` holds it; a no-op otherwise."""
        _check_int("ledger id", ledger_id, 0)
        _check_name("lock holder", holder)
        await self._call(self._unlock_underreplicated, ledger_id, holder)

    async def complete_underreplicated(
        self, ledger_id: int, holder: str, *, replicated: Iterable[str]
    ) -> None:
        """Record that ``replicated`` bookies' fragments were copied elsewhere.

        Only the lock's holder may (even past the lock's expiry, as long as nobody took it
        over); anyone else gets BadVersion. Removes those bookies from the lost set, then
        deletes the marker when the set is empty, else frees the lock. A no-op when the
        marker is already gone.
        """
        _check_int("ledger id", ledger_id, 0)
        _check_name("lock holder", holder)
        done = _check_names("replicated bookie", replicated)
        await self._call(self._retrying, self._complete_underreplicated, ledger_id, holder, done)

    # --- leases ---------------------------------------------------------------------
    async def acquire_lease(self, name: str, holder: str, lease_s: float) -> bool:
        """Take or renew lease ``name`` for ``holder`` until ``clock() + lease_s``.

        True when the lease was free, expired, or already ``holder``'s; False when another
        holder's lease is running.
        """
        _check_name("lease name", name)
        _check_name("lease holder", holder)
        _check_duration(lease_s)
        return await self._call(self._acquire_lease, name, holder, lease_s, self._clock())

    async def release_lease(self, name: str, holder: str) -> None:
        """Give the lease up if ``holder`` holds it; a no-op otherwise."""
        _check_name("lease name", name)
        _check_name("lease holder", holder)
        await self._call(
            self._delete_where, _leases, (_leases.c.name == name) & (_leases.c.holder == holder)
        )

    async def lease_holder(self, name: str) -> str | None:
        """Who holds lease ``name``; None when it is free or expired."""
        _check_name("lease name", name)
        return await self._call(self._lease_holder, name, self._clock())

    # --- plumbing -------------------------------------------------------------------
    async def _call(self, function: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
        if self._closed:
            raise InvalidArgument("the metadata store is closed")
        self._count("operations")
        try:
            return await asyncio.to_thread(function, *args, **kwargs)
        except BadVersion:
            self._count("cas_conflicts")
            raise
        except (OperationalError, InterfaceError) as error:
            self._count("unavailable")
            raise MetadataUnavailable(f"metadata database unavailable: {error}") from error

    def _count(self, key: str, amount: int = 1) -> None:
        with self._stats_lock:
            self._stats[key] += amount

    @contextlib.contextmanager
    def _writing(self) -> Iterator[Connection]:
        """A write transaction (on SQLite it holds the write lock from BEGIN)."""
        with self._write_engine.begin() as connection:
            yield connection

    @contextlib.contextmanager
    def _reading(self) -> Iterator[Connection]:
        with self._engine.connect() as connection:
            yield connection

    def _retrying(self, function: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
        """Run ``function`` (one transaction) again while its internal CAS loses."""
        for _ in range(limits.metadata_cas_retries_max):
            try:
                return function(*args, **kwargs)
            except _Conflict:
                self._count("cas_conflicts")
        raise BadVersion(
            f"{function.__name__}: lost {limits.metadata_cas_retries_max} compare-and-sets in a row"
        )

    def _insert(self, table: Table) -> Any:
        """INSERT with ON CONFLICT support for this engine's dialect."""
        dialect = postgresql if self._engine.dialect.name == "postgresql" else sqlite
        return dialect.insert(table)

    def _delete_where(self, table: Table, condition: Any) -> None:
        with self._writing() as connection:
            connection.execute(delete(table).where(condition))

    # --- ledgers, in a worker thread ------------------------------------------------
    def _create_ledger(
        self,
        now: float,
        ensemble_size: int,
        write_quorum: int,
        ack_quorum: int,
        ensemble: tuple[str, ...],
        custom: dict[str, str],
    ) -> LedgerMetadata:
        values = {
            "ensemble_size": ensemble_size,
            "write_quorum": write_quorum,
            "ack_quorum": ack_quorum,
            "state": LedgerState.OPEN.value,
            "last_entry_id": -1,
            "length": 0,
            "ensembles": [[0, list(ensemble)]],
            "custom": custom,
            "created_at": now,
            "version": 1,
        }
        with self._writing() as connection:
            statement = _ledgers.insert().values(values).returning(_ledgers.c.ledger_id)
            ledger_id = connection.execute(statement).scalar_one()
        return LedgerMetadata(
            ledger_id=ledger_id,
            ensemble_size=ensemble_size,
            write_quorum=write_quorum,
            ack_quorum=ack_quorum,
            ensembles=((0, ensemble),),
            custom=custom,
            version=1,
            created_at=now,
        )

    def _get_ledger(self, ledger_id: int) -> LedgerMetadata:
        with self._reading() as connection:
            row = _select_ledger(connection, ledger_id)
        return _ledger_from_row(row)

    def _update_ledger(self, metadata: LedgerMetadata) -> LedgerMetadata:
        ledger_id, expected = metadata.ledger_id, metadata.version
        with self._writing() as connection:
            row = _select_ledger(connection, ledger_id)
            if row.version != expected:
                raise BadVersion(
                    f"ledger {ledger_id}: version {expected} is stale, stored is {row.version}"
                )
            quorums = (metadata.ensemble_size, metadata.write_quorum, metadata.ack_quorum)
            if quorums != (row.ensemble_size, row.write_quorum, row.ack_quorum):
                raise InvalidArgument(
                    f"ledger {ledger_id}: E/Qw/Qa are {row.ensemble_size}/{row.write_quorum}"
                    f"/{row.ack_quorum} and cannot change"
                )
            if row.state == LedgerState.CLOSED.value and (
                metadata.state != LedgerState.CLOSED
                or (metadata.last_entry_id, metadata.length) != (row.last_entry_id, row.length)
            ):
                raise InvalidArgument(
                    f"ledger {ledger_id} is CLOSED at entry {row.last_entry_id}: its state"
                    " and end cannot change"
                )
            result = connection.execute(
                update(_ledgers)
                .where(_ledgers.c.ledger_id == ledger_id, _ledgers.c.version == expected)
                .values(
                    state=LedgerState(metadata.state).value,
                    last_entry_id=metadata.last_entry_id,
                    length=metadata.length,
                    ensembles=[[first, list(bookies)] for first, bookies in metadata.ensembles],
                    custom=dict(metadata.custom),
                    version=expected + 1,
                )
            )
            if result.rowcount != 1:  # PostgreSQL: a concurrent CAS committed first
                raise BadVersion(f"ledger {ledger_id}: version {expected} is stale")
        return metadata.replace(version=expected + 1, created_at=row.created_at)

    def _delete_ledger(self, ledger_id: int) -> None:
        with self._writing() as connection:
            connection.execute(delete(_ledgers).where(_ledgers.c.ledger_id == ledger_id))

    def _list_ledger_ids(self) -> list[int]:
        with self._reading() as connection:
            ids = connection.execute(select(_ledgers.c.ledger_id).order_by(_ledgers.c.ledger_id))
            return list(ids.scalars())

    # --- bookies, in a worker thread ------------------------------------------------
    def _upsert_bookie(self, address: str, now: float, lease_s: float, register: bool) -> None:
        insert = self._insert(_bookies).values(
            address=address, registered_at=now, lease_expires_at=now + lease_s, version=1
        )
        changes = {
            "lease_expires_at": insert.excluded.lease_expires_at,
            "version": _bookies.c.version + 1,
        }
        if register:
            changes["registered_at"] = insert.excluded.registered_at
        with self._writing() as connection:
            connection.execute(
                insert.on_conflict_do_update(index_elements=[_bookies.c.address], set_=changes)
            )

    def _list_bookies(self, alive_after: float | None) -> list[BookieRegistration]:
        query = select(_bookies).order_by(_bookies.c.address)
        if alive_after is not None:
            query = query.where(_bookies.c.lease_expires_at > alive_after)
        with self._reading() as connection:
            rows = connection.execute(query).all()
        return [
            BookieRegistration(row.address, row.registered_at, row.lease_expires_at) for row in rows
        ]

    # --- under-replicated ledgers, in a worker thread -------------------------------
    def _mark_underreplicated(self, ledger_id: int, lost: frozenset[str], now: float) -> None:
        with self._writing() as connection:
            _select_ledger(connection, ledger_id)  # NoSuchLedger
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
                    raise _Conflict from error
                return
            merged = sorted(set(row.lost_bookies) | lost)
            if merged != sorted(row.lost_bookies):
                _cas_marker(connection, row, lost_bookies=merged)

    def _list_underreplicated(self) -> list[UnderReplicatedLedger]:
        query = select(_underreplicated).order_by(
            _underreplicated.c.marked_at, _underreplicated.c.ledger_id
        )
        with self._reading() as connection:
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
        with self._writing() as connection:
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
        with self._writing() as connection:
            connection.execute(
                update(_underreplicated)
                .where(markers.ledger_id == ledger_id, markers.lock_holder == holder)
                .values(lock_holder=None, lock_expires_at=None, version=markers.version + 1)
            )

    def _complete_underreplicated(
        self, ledger_id: int, holder: str, replicated: frozenset[str]
    ) -> None:
        markers = _underreplicated.c
        with self._writing() as connection:
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
                raise _Conflict

    # --- leases, in a worker thread -------------------------------------------------
    def _acquire_lease(self, name: str, holder: str, lease_s: float, now: float) -> bool:
        """One upsert: insert, or take over when held by ``holder`` or expired."""
        leases = _leases.c
        insert = self._insert(_leases).values(
            name=name, holder=holder, acquired_at=now, expires_at=now + lease_s, version=1
        )
        proposed = insert.excluded
        statement = insert.on_conflict_do_update(
            index_elements=[leases.name],
            set_={
                "holder": proposed.holder,
                "expires_at": proposed.expires_at,
                "acquired_at": case(
                    (leases.holder == proposed.holder, leases.acquired_at),
                    else_=proposed.acquired_at,
                ),
                "version": leases.version + 1,
            },
            where=or_(leases.holder == proposed.holder, leases.expires_at <= now),
        ).returning(leases.holder)
        with self._writing() as connection:
            return connection.execute(statement).one_or_none() is not None

    def _lease_holder(self, name: str, now: float) -> str | None:
        query = select(_leases.c.holder).where(_leases.c.name == name, _leases.c.expires_at > now)
        with self._reading() as connection:
            return connection.execute(query).scalar_one_or_none()

    # --- managed ledgers and cursors (appended with storage/managed_ledger) ----------
    async def create_managed_ledger(self, name: str) -> ManagedLedgerInfo:
        """A new managed ledger with no ledgers, at version 1; BadVersion when ``name``
        exists already."""
        _check_managed_name("managed ledger name", name)
        return await self._call(self._create_managed_ledger, name, self._clock())

    async def get_managed_ledger(self, name: str) -> ManagedLedgerInfo:
        """NoSuchManagedLedger when absent."""
        _check_managed_name("managed ledger name", name)
        return await self._call(self._get_managed_ledger, name)

    async def update_managed_ledger(self, info: ManagedLedgerInfo) -> ManagedLedgerInfo:
        """CAS: store ``info.ledgers`` if the stored version is ``info.version``; returns
        the info at version + 1. BadVersion when stale, NoSuchManagedLedger when deleted."""
        if not isinstance(info, ManagedLedgerInfo):
            raise InvalidArgument(f"not ManagedLedgerInfo: {info!r}")
        _check_managed_name("managed ledger name", info.name)
        ledgers = _check_ledger_infos(info.ledgers)
        return await self._call(self._update_managed_ledger, info, ledgers)

    async def delete_managed_ledger(self, name: str) -> None:
        """Delete the managed ledger's row and its cursors' rows (not their ledgers); a
        no-op when absent."""
        _check_managed_name("managed ledger name", name)
        await self._call(self._delete_managed_ledger, name)

    async def list_managed_ledger_names(self) -> list[str]:
        """Sorted."""
        return await self._call(self._list_managed_ledger_names)

    async def create_managed_cursor(
        self,
        managed_ledger: str,
        name: str,
        *,
        cursor_ledger_id: int | None,
        mark_delete: tuple[int, int],
        properties: Mapping[str, str] | None = None,
    ) -> ManagedCursorInfo:
        """A new cursor row at version 1. BadVersion when the cursor exists,
        NoSuchManagedLedger when the managed ledger does not."""
        info = ManagedCursorInfo(
            managed_ledger=managed_ledger,
            name=name,
            cursor_ledger_id=cursor_ledger_id,
            mark_delete=mark_delete,
            properties=properties or {},
            created_at=self._clock(),
            version=1,
        )
        info = _check_cursor_info(info)
        return await self._call(self._create_managed_cursor, info)

    async def list_managed_cursors(self, managed_ledger: str) -> list[ManagedCursorInfo]:
        """The managed ledger's cursors sorted by name (none for an unknown one)."""
        _check_managed_name("managed ledger name", managed_ledger)
        return await self._call(self._list_managed_cursors, managed_ledger)

    async def update_managed_cursor(self, info: ManagedCursorInfo) -> ManagedCursorInfo:
        """CAS: store the cursor ledger id, mark-delete position and properties if the
        stored version is ``info.version``; returns the info at version + 1. BadVersion
        when stale, NoSuchCursor when deleted."""
        if not isinstance(info, ManagedCursorInfo):
            raise InvalidArgument(f"not ManagedCursorInfo: {info!r}")
        return await self._call(self._update_managed_cursor, _check_cursor_info(info))

    async def delete_managed_cursor(self, managed_ledger: str, name: str) -> None:
        """A no-op when absent."""
        _check_managed_name("managed ledger name", managed_ledger)
        _check_managed_name("cursor name", name)
        cursors = _managed_cursors.c
        await self._call(
            self._delete_where,
            _managed_cursors,
            (cursors.managed_ledger == managed_ledger) & (cursors.name == name),
        )

    # --- managed ledgers and cursors, in a worker thread ------------------------------
    def _create_managed_ledger(self, name: str, now: float) -> ManagedLedgerInfo:
        with self._writing() as connection:
            if _select_managed_ledger(connection, name) is not None:
                raise BadVersion(f"managed ledger {name!r} exists already")
            try:
                connection.execute(
                    _managed_ledgers.insert().values(
                        name=name, ledgers=[], created_at=now, version=1
                    )
                )
            except IntegrityError as error:  # PostgreSQL: a concurrent create committed
                raise BadVersion(f"managed ledger {name!r} exists already") from error
        return ManagedLedgerInfo(name=name, ledgers=(), created_at=now, version=1)

    def _get_managed_ledger(self, name: str) -> ManagedLedgerInfo:
        with self._reading() as connection:
            row = _select_managed_ledger(connection, name)
        if row is None:
            raise NoSuchManagedLedger(f"managed ledger {name!r} does not exist")
        return _managed_ledger_from_row(row)

    def _update_managed_ledger(
        self, info: ManagedLedgerInfo, ledgers: list[Any]
    ) -> ManagedLedgerInfo:
        expected = info.version
        with self._writing() as connection:
            row = _select_managed_ledger(connection, info.name)
            if row is None:
                raise NoSuchManagedLedger(f"managed ledger {info.name!r} does not exist")
            if row.version != expected:
                raise BadVersion(
                    f"managed ledger {info.name!r}: version {expected} is stale,"
                    f" stored is {row.version}"
                )
            table = _managed_ledgers.c
            result = connection.execute(
                update(_managed_ledgers)
                .where(table.name == info.name, table.version == expected)
                .values(ledgers=ledgers, version=expected + 1)
            )
            if result.rowcount != 1:
                raise BadVersion(f"managed ledger {info.name!r}: version {expected} is stale")
        return info.replace(version=expected + 1, created_at=row.created_at)

    def _delete_managed_ledger(self, name: str) -> None:
        with self._writing() as connection:
            connection.execute(
                delete(_managed_cursors).where(_managed_cursors.c.managed_ledger == name)
            )
            connection.execute(delete(_managed_ledgers).where(_managed_ledgers.c.name == name))

    def _list_managed_ledger_names(self) -> list[str]:
        table = _managed_ledgers.c
        with self._reading() as connection:
            return list(connection.execute(select(table.name).order_by(table.name)).scalars())

    def _create_managed_cursor(self, info: ManagedCursorInfo) -> ManagedCursorInfo:
        with self._writing() as connection:
            if _select_managed_ledger(connection, info.managed_ledger) is None:
                raise NoSuchManagedLedger(f"managed ledger {info.managed_ledger!r} does not exist")
            if _select_managed_cursor(connection, info.managed_ledger, info.name) is not None:
                raise BadVersion(f"cursor {info.name!r} of {info.managed_ledger!r} exists already")
            try:
                connection.execute(
                    _managed_cursors.insert().values(
                        managed_ledger=info.managed_ledger,
                        name=info.name,
                        cursor_ledger_id=info.cursor_ledger_id,
                        mark_delete_ledger_id=info.mark_delete[0],
                        mark_delete_entry_id=info.mark_delete[1],
                        properties=dict(info.properties),
                        created_at=info.created_at,
                        version=1,
                    )
                )
            except IntegrityError as error:
                # PostgreSQL: created, or its managed ledger deleted, concurrently.
                raise BadVersion(
                    f"cursor {info.name!r} of {info.managed_ledger!r}: lost a concurrent change"
                ) from error
        return info

    def _list_managed_cursors(self, managed_ledger: str) -> list[ManagedCursorInfo]:
        cursors = _managed_cursors.c
        query = (
            select(_managed_cursors)
            .where(cursors.managed_ledger == managed_ledger)
            .order_by(cursors.name)
        )
        with self._reading() as connection:
            return [_managed_cursor_from_row(row) for row in connection.execute(query)]

    def _update_managed_cursor(self, info: ManagedCursorInfo) -> ManagedCursorInfo:
        expected = info.version
        cursors = _managed_cursors.c
        with self._writing() as connection:
            row = _select_managed_cursor(connection, info.managed_ledger, info.name)
            if row is None:
                raise NoSuchCursor(
                    f"cursor {info.name!r} of {info.managed_ledger!r} does not exist"
                )
            if row.version != expected:
                raise BadVersion(
                    f"cursor {info.name!r} of {info.managed_ledger!r}: version {expected}"
                    f" is stale, stored is {row.version}"
                )
            result = connection.execute(
                update(_managed_cursors)
                .where(
                    cursors.managed_ledger == info.managed_ledger,
                    cursors.name == info.name,
                    cursors.version == expected,
                )
                .values(
                    cursor_ledger_id=info.cursor_ledger_id,
                    mark_delete_ledger_id=info.mark_delete[0],
                    mark_delete_entry_id=info.mark_delete[1],
                    properties=dict(info.properties),
                    version=expected + 1,
                )
            )
            if result.rowcount != 1:
                raise BadVersion(f"cursor {info.name!r}: version {expected} is stale")
        return info.replace(version=expected + 1, created_at=row.created_at)

    # --- tenants and namespaces ---------------------------------------------------------
    async def create_tenant(
        self, name: str, *, admin_roles: Iterable[str] = (), allowed_clusters: Iterable[str] = ()
    ) -> CatalogOutcome:
        """DONE, EXISTS, or FULL at ``limits.tenants_count_max`` tenants."""
        _check_name("tenant", name)
        roles = _check_name_list("admin role", admin_roles)
        clusters = _check_name_list("allowed cluster", allowed_clusters)
        return await self._call(
            self._retrying, self._create_tenant, name, roles, clusters, self._clock()
        )

    async def get_tenant(self, name: str) -> TenantRecord | None:
        _check_name("tenant", name)
        return await self._call(self._get_tenant, name)

    async def list_tenants(self) -> list[str]:
        """Tenant names, sorted."""
        return await self._call(self._list_names, select(_tenants.c.name).order_by(_tenants.c.name))

    async def update_tenant(self, tenant: TenantRecord) -> TenantRecord:
        """CAS: store ``tenant``'s roles and clusters if the stored version is
        ``tenant.version``; returns it at version + 1. BadVersion when stale or deleted."""
        if not isinstance(tenant, TenantRecord):
            raise InvalidArgument(f"not a TenantRecord: {tenant!r}")
        _check_name("tenant", tenant.name)
        roles = _check_name_list("admin role", tenant.admin_roles)
        clusters = _check_name_list("allowed cluster", tenant.allowed_clusters)
        _check_int("version", tenant.version, 1)
        return await self._call(self._update_tenant, tenant, roles, clusters)

    async def delete_tenant(self, name: str) -> CatalogOutcome:
        """DONE, MISSING, or NOT_EMPTY while the tenant has namespaces."""
        _check_name("tenant", name)
        return await self._call(self._retrying, self._delete_tenant, name)

    async def create_namespace(
        self,
        tenant: str,
        name: str,
        *,
        retention: tuple[int, int] | None = None,
        message_ttl_s: int | None = None,
    ) -> CatalogOutcome:
        """DONE, EXISTS, MISSING (no such tenant), or FULL at
        ``limits.namespaces_count_max`` namespaces. ``retention`` is (minutes, MB)."""
        _check_name("tenant", tenant)
        _check_name("namespace", name)
        policies = _check_policies(retention, message_ttl_s)
        return await self._call(
            self._retrying, self._create_namespace, tenant, name, policies, self._clock()
        )

    async def get_namespace(self, tenant: str, name: str) -> NamespaceRecord | None:
        _check_name("tenant", tenant)
        _check_name("namespace", name)
        return await self._call(self._get_namespace, tenant, name)

    async def list_namespaces(self, tenant: str) -> list[str]:
        """Names (without the tenant) of the tenant's namespaces, sorted."""
        _check_name("tenant", tenant)
        query = (
            select(_namespaces.c.name)
            .where(_namespaces.c.tenant == tenant)
            .order_by(_namespaces.c.name)
        )
        return await self._call(self._list_names, query)

    async def update_namespace(self, namespace: NamespaceRecord) -> NamespaceRecord:
        """CAS: store the namespace's policies if the stored version is
        ``namespace.version``; returns it at version + 1. BadVersion when stale or deleted."""
        if not isinstance(namespace, NamespaceRecord):
            raise InvalidArgument(f"not a NamespaceRecord: {namespace!r}")
        _check_name("tenant", namespace.tenant)
        _check_name("namespace", namespace.name)
        _check_int("version", namespace.version, 1)
        retention = namespace.retention
        _check_policies(retention, namespace.message_ttl_s)
        return await self._call(self._update_namespace, namespace)

    async def delete_namespace(self, tenant: str, name: str) -> CatalogOutcome:
        """DONE or MISSING. Whether it still has topics is the caller's to check."""
        _check_name("tenant", tenant)
        _check_name("namespace", name)
        return await self._call(self._delete_namespace, tenant, name)

    # --- tenants and namespaces, in a worker thread -------------------------------------
    def _list_names(self, query: Any) -> list[str]:
        with self._reading() as connection:
            return list(connection.execute(query).scalars())

    def _create_tenant(
        self, name: str, roles: list[str], clusters: list[str], now: float
    ) -> CatalogOutcome:
        with self._writing() as connection:
            if _select_tenant(connection, name) is not None:
                return CatalogOutcome.EXISTS
            if _count(connection, _tenants) >= limits.tenants_count_max:
                return CatalogOutcome.FULL
            try:
                connection.execute(
                    _tenants.insert().values(
                        name=name,
                        admin_roles=roles,
                        allowed_clusters=clusters,
                        created_at=now,
                        version=1,
                    )
                )
            except IntegrityError as error:
                # PostgreSQL: created by a concurrent transaction; the retry says EXISTS.
                raise _Conflict from error
        return CatalogOutcome.DONE

    def _get_tenant(self, name: str) -> TenantRecord | None:
        with self._reading() as connection:
            row = _select_tenant(connection, name)
        return None if row is None else _tenant_from_row(row)

    def _update_tenant(
        self, tenant: TenantRecord, roles: list[str], clusters: list[str]
    ) -> TenantRecord:
        tenants = _tenants.c
        with self._writing() as connection:
            result = connection.execute(
                update(_tenants)
                .where(tenants.name == tenant.name, tenants.version == tenant.version)
                .values(admin_roles=roles, allowed_clusters=clusters, version=tenant.version + 1)
                .returning(_tenants)
            )
            row = result.one_or_none()
        if row is None:
            raise BadVersion(f"tenant {tenant.name}: version {tenant.version} is stale or gone")
        return _tenant_from_row(row)

    def _delete_tenant(self, name: str) -> CatalogOutcome:
        with self._writing() as connection:
            if _select_tenant(connection, name) is None:
                return CatalogOutcome.MISSING
            if _count(connection, _namespaces, _namespaces.c.tenant == name):
                return CatalogOutcome.NOT_EMPTY
            try:
                connection.execute(delete(_tenants).where(_tenants.c.name == name))
            except IntegrityError as error:
                # PostgreSQL: a namespace was created concurrently; the retry says NOT_EMPTY.
                raise _Conflict from error
        return CatalogOutcome.DONE

    def _create_namespace(
        self, tenant: str, name: str, policies: dict[str, int | None], now: float
    ) -> CatalogOutcome:
        with self._writing() as connection:
            if _select_tenant(connection, tenant) is None:
                return CatalogOutcome.MISSING
            if _select_namespace(connection, tenant, name) is not None:
                return CatalogOutcome.EXISTS
            if _count(connection, _namespaces) >= limits.namespaces_count_max:
                return CatalogOutcome.FULL
            try:
                connection.execute(
                    _namespaces.insert().values(
                        tenant=tenant, name=name, **policies, created_at=now, version=1
                    )
                )
            except IntegrityError as error:
                # PostgreSQL: the namespace was created, or its tenant deleted, concurrently.
                raise _Conflict from error
        return CatalogOutcome.DONE

    def _get_namespace(self, tenant: str, name: str) -> NamespaceRecord | None:
        with self._reading() as connection:
            row = _select_namespace(connection, tenant, name)
        return None if row is None else _namespace_from_row(row)

    def _update_namespace(self, namespace: NamespaceRecord) -> NamespaceRecord:
        namespaces = _namespaces.c
        minutes, size_mb = namespace.retention or (None, None)
        with self._writing() as connection:
            row = connection.execute(
                update(_namespaces)
                .where(
                    namespaces.tenant == namespace.tenant,
                    namespaces.name == namespace.name,
                    namespaces.version == namespace.version,
                )
                .values(
                    retention_time_minutes=minutes,
                    retention_size_mb=size_mb,
                    message_ttl_s=namespace.message_ttl_s,
                    version=namespace.version + 1,
                )
                .returning(_namespaces)
            ).one_or_none()
        if row is None:
            raise BadVersion(
                f"namespace {namespace.tenant}/{namespace.name}: version {namespace.version}"
                " is stale or gone"
            )
        return _namespace_from_row(row)

    def _delete_namespace(self, tenant: str, name: str) -> CatalogOutcome:
        namespaces = _namespaces.c
        with self._writing() as connection:
            result = connection.execute(
                delete(_namespaces).where(namespaces.tenant == tenant, namespaces.name == name)
            )
        return CatalogOutcome.DONE if result.rowcount == 1 else CatalogOutcome.MISSING

    # --- gateway: remote clusters and replication policies -----------------------------
    async def sync_remote_clusters(
        self, clusters: Mapping[str, tuple[str, str]]
    ) -> list[RemoteClusterRecord]:
        """Make the stored remote clusters exactly ``clusters`` (name -> (service URL,
        admin URL)) in one transaction: new ones inserted, changed ones updated (version
        + 1), others deleted. Returns them sorted by name."""
        if not isinstance(clusters, Mapping):
            raise InvalidArgument(f"clusters must map names to URLs, got {clusters!r}")
        if len(clusters) > limits.remote_clusters_count_max:
            raise InvalidArgument(f"at most {limits.remote_clusters_count_max} remote clusters")
        checked = {}
        for name, urls in clusters.items():
            _check_name("cluster", name)
            if not isinstance(urls, tuple) or len(urls) != 2:
                raise InvalidArgument(f"cluster {name}: need (service URL, admin URL)")
            checked[name] = (_check_url("service URL", urls[0]), _check_url("admin URL", urls[1]))
        return await self._call(self._sync_remote_clusters, checked, self._clock())

    async def list_remote_clusters(self) -> list[RemoteClusterRecord]:
        return await self._call(self._list_remote_clusters)

    async def get_replication_policy(self, scope: str, name: str) -> ReplicationPolicyRecord | None:
        _check_scope(scope)
        _check_name("policy name", name)
        return await self._call(self._get_replication_policy, scope, name)

    async def list_replication_policies(
        self, scope: str | None = None
    ) -> list[ReplicationPolicyRecord]:
        """Every policy (of ``scope`` when given), sorted by scope and name."""
        if scope is not None:
            _check_scope(scope)
        return await self._call(self._list_replication_policies, scope)

    async def put_replication_policy(
        self,
        scope: str,
        name: str,
        clusters: Iterable[str],
        *,
        expected_version: int | None = None,
    ) -> ReplicationPolicyRecord:
        """Create or replace a policy; returns it as stored.

        ``expected_version``: None replaces whatever is there (last writer wins, CAS
        retried internally); 0 creates only (BadVersion if it exists); n >= 1 replaces
        only version n (BadVersion otherwise). InvalidArgument past
        ``limits.replication_policies_count_max`` policies."""
        _check_scope(scope)
        _check_name("policy name", name)
        names = sorted(_check_names("cluster", clusters))
        if len(names) > limits.remote_clusters_count_max:
            raise InvalidArgument(f"a policy names at most {limits.remote_clusters_count_max}")
        if expected_version is not None:
            _check_int("expected version", expected_version, 0)
        return await self._call(
            self._retrying,
            self._put_replication_policy,
            scope,
            name,
            names,
            expected_version,
            self._clock(),
        )

    async def delete_replication_policy(
        self, scope: str, name: str, *, expected_version: int | None = None
    ) -> bool:
        """Delete a policy; False when there was none. With ``expected_version`` only
        that version is deleted (BadVersion otherwise)."""
        _check_scope(scope)
        _check_name("policy name", name)
        if expected_version is not None:
            _check_int("expected version", expected_version, 1)
        return await self._call(self._delete_replication_policy, scope, name, expected_version)

    # --- gateway, in a worker thread --------------------------------------------------
    def _sync_remote_clusters(
        self, clusters: dict[str, tuple[str, str]], now: float
    ) -> list[RemoteClusterRecord]:
        table = _remote_clusters
        with self._writing() as connection:
            existing = {row.name: row for row in connection.execute(select(table))}
            for name, (service_url, admin_url) in clusters.items():
                row = existing.get(name)
                if row is None:
                    connection.execute(
                        table.insert().values(
                            name=name,
                            service_url=service_url,
                            admin_url=admin_url,
                            updated_at=now,
                            version=1,
                        )
                    )
                elif (row.service_url, row.admin_url) != (service_url, admin_url):
                    connection.execute(
                        update(table)
                        .where(table.c.name == name)
                        .values(
                            service_url=service_url,
                            admin_url=admin_url,
                            updated_at=now,
                            version=row.version + 1,
                        )
                    )
            gone = set(existing) - set(clusters)
            if gone:
                connection.execute(delete(table).where(table.c.name.in_(sorted(gone))))
            rows = connection.execute(select(table).order_by(table.c.name)).all()
        return [_remote_cluster_from_row(row) for row in rows]

    def _list_remote_clusters(self) -> list[RemoteClusterRecord]:
        table = _remote_clusters
        with self._reading() as connection:
            rows = connection.execute(select(table).order_by(table.c.name)).all()
        return [_remote_cluster_from_row(row) for row in rows]

    def _get_replication_policy(self, scope: str, name: str) -> ReplicationPolicyRecord | None:
        with self._reading() as connection:
            row = _select_policy(connection, scope, name)
        return None if row is None else _policy_from_row(row)

    def _list_replication_policies(self, scope: str | None) -> list[ReplicationPolicyRecord]:
        table = _replication_policies
        query = select(table).order_by(table.c.scope, table.c.name)
        if scope is not None:
            query = query.where(table.c.scope == scope)
        with self._reading() as connection:
            rows = connection.execute(query).all()
        return [_policy_from_row(row) for row in rows]

    def _put_replication_policy(
        self,
        scope: str,
        name: str,
        clusters: list[str],
        expected_version: int | None,
        now: float,
    ) -> ReplicationPolicyRecord:
        table = _replication_policies
        with self._writing() as connection:
            row = _select_policy(connection, scope, name)
            if row is None:
                if expected_version not in (None, 0):
                    raise BadVersion(f"{scope} policy {name}: no version {expected_version}")
                if _count(connection, table) >= limits.replication_policies_count_max:
                    raise InvalidArgument(
                        f"at most {limits.replication_policies_count_max} replication policies"
                    )
                try:
                    connection.execute(
                        table.insert().values(
                            scope=scope, name=name, clusters=clusters, updated_at=now, version=1
                        )
                    )
                except IntegrityError as error:
                    if expected_version == 0:
                        raise BadVersion(f"{scope} policy {name} exists") from error
                    raise _Conflict from error
                return ReplicationPolicyRecord(scope, name, tuple(clusters), now, 1)
            if expected_version is not None and expected_version != row.version:
                raise BadVersion(
                    f"{scope} policy {name} is at version {row.version}, not {expected_version}"
                )
            result = connection.execute(
                update(table)
                .where(table.c.scope == scope, table.c.name == name, table.c.version == row.version)
                .values(clusters=clusters, updated_at=now, version=row.version + 1)
            )
            if result.rowcount != 1:
                if expected_version is not None:
                    raise BadVersion(f"{scope} policy {name} changed meanwhile")
                raise _Conflict
        return ReplicationPolicyRecord(scope, name, tuple(clusters), now, row.version + 1)

    def _delete_replication_policy(
        self, scope: str, name: str, expected_version: int | None
    ) -> bool:
        table = _replication_policies
        conditions = [table.c.scope == scope, table.c.name == name]
        with self._writing() as connection:
            row = _select_policy(connection, scope, name)
            if row is None:
                if expected_version is not None:
                    raise BadVersion(f"{scope} policy {name}: no version {expected_version}")
                return False
            if expected_version is not None:
                if row.version != expected_version:
                    raise BadVersion(
                        f"{scope} policy {name} is at version {row.version}, not {expected_version}"
                    )
                conditions.append(table.c.version == expected_version)
            result = connection.execute(delete(table).where(*conditions))
        return result.rowcount == 1


# --- rows ---------------------------------------------------------------------------
def _current_revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def _select_ledger(connection: Connection, ledger_id: int) -> Row[Any]:
    query = select(_ledgers).where(_ledgers.c.ledger_id == ledger_id)
    row = connection.execute(query).one_or_none()
    if row is None:
        raise NoSuchLedger(f"ledger {ledger_id} does not exist")
    return row


def _ledger_from_row(row: Row[Any]) -> LedgerMetadata:
    """The stored row as LedgerMetadata, whose constructor checks it on the way out."""
    return LedgerMetadata(
        ledger_id=row.ledger_id,
        ensemble_size=row.ensemble_size,
        write_quorum=row.write_quorum,
        ack_quorum=row.ack_quorum,
        ensembles=tuple((int(first), tuple(bookies)) for first, bookies in row.ensembles),
        state=LedgerState(row.state),
        last_entry_id=row.last_entry_id,
        length=row.length,
        custom=dict(row.custom),
        version=row.version,
        created_at=row.created_at,
    )


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
        raise _Conflict


def _marker_from_row(row: Row[Any]) -> UnderReplicatedLedger:
    return UnderReplicatedLedger(
        ledger_id=row.ledger_id,
        lost_bookies=frozenset(row.lost_bookies),
        marked_at=row.marked_at,
        lock_holder=row.lock_holder,
        lock_expires_at=row.lock_expires_at,
        version=row.version,
    )


# --- checks on the way in -----------------------------------------------------------
def _check_int(what: str, value: object, minimum: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise InvalidArgument(f"{what} must be an integer >= {minimum}, got {value!r}")
    return value


def _check_name(what: str, value: object) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= name_chars_max:
        raise InvalidArgument(f"{what} must be 1..{name_chars_max} characters, got {value!r}")
    return value


def _check_names(what: str, values: Iterable[str]) -> frozenset[str]:
    if isinstance(values, str):
        raise InvalidArgument(f"{what}s must be a collection of strings, got {values!r}")
    return frozenset(_check_name(what, value) for value in values)


def _check_duration(seconds: object) -> float:
    if (
        not isinstance(seconds, int | float)
        or isinstance(seconds, bool)
        or not math.isfinite(seconds)
        or seconds <= 0
    ):
        raise InvalidArgument(f"a duration must be finite seconds > 0, got {seconds!r}")
    return float(seconds)


def _check_ensemble(ensemble: Sequence[str], ensemble_size: int) -> tuple[str, ...]:
    if isinstance(ensemble, str):
        raise InvalidArgument(f"an ensemble is a sequence of bookies, got {ensemble!r}")
    bookies = tuple(_check_name("bookie address", bookie) for bookie in ensemble)
    if len(bookies) != ensemble_size or len(set(bookies)) != len(bookies):
        raise InvalidArgument(f"ensemble {bookies} is not {ensemble_size} distinct bookies")
    return bookies


def _check_custom(custom: Mapping[str, str]) -> dict[str, str]:
    if not isinstance(custom, Mapping) or not all(
        isinstance(key, str) and isinstance(value, str) for key, value in custom.items()
    ):
        raise InvalidArgument(f"custom metadata must map strings to strings, got {custom!r}")
    return dict(custom)


# --- managed ledgers and cursors: rows and checks -------------------------------------
invariant(
    limits.managed_ledger_name_chars_max <= managed_name_chars_max
    and limits.cursor_name_chars_max <= managed_name_chars_max,
    "managed ledger and cursor names must fit their columns",
)


def _select_managed_ledger(connection: Connection, name: str) -> Row[Any] | None:
    query = select(_managed_ledgers).where(_managed_ledgers.c.name == name)
    return connection.execute(query).one_or_none()


def _select_managed_cursor(
    connection: Connection, managed_ledger: str, name: str
) -> Row[Any] | None:
    cursors = _managed_cursors.c
    query = select(_managed_cursors).where(
        cursors.managed_ledger == managed_ledger, cursors.name == name
    )
    return connection.execute(query).one_or_none()


def _managed_ledger_from_row(row: Row[Any]) -> ManagedLedgerInfo:
    """The stored row, checked on the way out like on the way in."""
    ledgers = tuple(
        LedgerInfo(int(ledger_id), int(entries), int(size), float(created), closed)
        for ledger_id, entries, size, created, closed in row.ledgers
    )
    _check_ledger_infos(ledgers)
    return ManagedLedgerInfo(
        name=row.name, ledgers=ledgers, created_at=row.created_at, version=row.version
    )


def _managed_cursor_from_row(row: Row[Any]) -> ManagedCursorInfo:
    return _check_cursor_info(
        ManagedCursorInfo(
            managed_ledger=row.managed_ledger,
            name=row.name,
            cursor_ledger_id=row.cursor_ledger_id,
            mark_delete=(row.mark_delete_ledger_id, row.mark_delete_entry_id),
            properties=dict(row.properties),
            created_at=row.created_at,
            version=row.version,
        )
    )


def _check_managed_name(what: str, value: object) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= managed_name_chars_max:
        raise InvalidArgument(
            f"{what} must be 1..{managed_name_chars_max} characters, got {value!r}"
        )
    return value


def _check_time(what: str, value: object) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        raise InvalidArgument(f"{what} must be finite seconds, got {value!r}")
    return float(value)


def _check_ledger_infos(ledgers: Sequence[LedgerInfo]) -> list[Any]:
    """The ledgers as stored JSON; InvalidArgument unless ids strictly increase and every
    count is >= 0."""
    stored: list[Any] = []
    previous = -1
    for info in ledgers:
        if not isinstance(info, LedgerInfo):
            raise InvalidArgument(f"not LedgerInfo: {info!r}")
        _check_int("ledger id", info.ledger_id, 0)
        if info.ledger_id <= previous:
            raise InvalidArgument(f"ledger ids must increase: {info.ledger_id} after {previous}")
        previous = info.ledger_id
        _check_int("entries", info.entries, 0)
        _check_int("size bytes", info.size_bytes, 0)
        created = _check_time("created_at", info.created_at)
        closed = None if info.closed_at is None else _check_time("closed_at", info.closed_at)
        stored.append([info.ledger_id, info.entries, info.size_bytes, created, closed])
    return stored


def _check_cursor_info(info: ManagedCursorInfo) -> ManagedCursorInfo:
    _check_managed_name("managed ledger name", info.managed_ledger)
    _check_managed_name("cursor name", info.name)
    if info.cursor_ledger_id is not None:
        _check_int("cursor ledger id", info.cursor_ledger_id, 0)
    if not isinstance(info.mark_delete, tuple) or len(info.mark_delete) != 2:
        raise InvalidArgument(f"mark-delete position must be (ledger, entry): {info.mark_delete!r}")
    for value in info.mark_delete:
        _check_int("mark-delete id", value, -1)
    _check_custom(info.properties)
    return info


# --- tenants and namespaces -----------------------------------------------------------
class CatalogOutcome(enum.Enum):
    """What a create or delete of a tenant or namespace did. These are answers, not
    failures: the caller (the admin REST) turns each into its own status."""

    DONE = "done"
    #: create: the name is taken.
    EXISTS = "exists"
    #: delete: no such row; create_namespace: no such tenant.
    MISSING = "missing"
    #: delete_tenant: the tenant still has namespaces.
    NOT_EMPTY = "not empty"
    #: create: ``limits.tenants_count_max`` / ``namespaces_count_max`` reached.
    FULL = "full"


@dataclass(frozen=True)
class TenantRecord:
    name: str
    admin_roles: tuple[str, ...]
    allowed_clusters: tuple[str, ...]
    created_at: float
    version: int


@dataclass(frozen=True)
class NamespaceRecord:
    """A namespace and its policies. ``retention`` is (minutes, MB), -1 meaning unlimited,
    None the broker's default; ``message_ttl_s`` None or 0 means no TTL."""

    tenant: str
    name: str
    retention: tuple[int, int] | None
    message_ttl_s: int | None
    created_at: float
    version: int


_tenants: Table = TenantRow.__table__  # type: ignore[assignment]
_namespaces: Table = NamespaceRow.__table__  # type: ignore[assignment]


def _select_tenant(connection: Connection, name: str) -> Row[Any] | None:
    return connection.execute(select(_tenants).where(_tenants.c.name == name)).one_or_none()


def _select_namespace(connection: Connection, tenant: str, name: str) -> Row[Any] | None:
    query = select(_namespaces).where(_namespaces.c.tenant == tenant, _namespaces.c.name == name)
    return connection.execute(query).one_or_none()


def _count(connection: Connection, table: Table, *conditions: Any) -> int:
    query = select(func.count()).select_from(table).where(*conditions)
    return int(connection.execute(query).scalar_one())


def _tenant_from_row(row: Row[Any]) -> TenantRecord:
    return TenantRecord(
        name=row.name,
        admin_roles=tuple(_check_name_list("admin role", row.admin_roles)),
        allowed_clusters=tuple(_check_name_list("allowed cluster", row.allowed_clusters)),
        created_at=row.created_at,
        version=row.version,
    )


def _namespace_from_row(row: Row[Any]) -> NamespaceRecord:
    retention = None
    if row.retention_time_minutes is not None:
        retention = (row.retention_time_minutes, row.retention_size_mb)
    return NamespaceRecord(
        tenant=row.tenant,
        name=row.name,
        retention=retention,
        message_ttl_s=row.message_ttl_s,
        created_at=row.created_at,
        version=row.version,
    )


def _check_name_list(what: str, values: Iterable[str]) -> list[str]:
    """Names in their given order, duplicates dropped."""
    if isinstance(values, str):
        raise InvalidArgument(f"{what}s must be a collection of strings, got {values!r}")
    return list(dict.fromkeys(_check_name(what, value) for value in values))


def _check_policies(
    retention: tuple[int, int] | None, message_ttl_s: int | None
) -> dict[str, int | None]:
    minutes = size_mb = None
    if retention is not None:
        if not isinstance(retention, tuple) or len(retention) != 2:
            raise InvalidArgument(f"retention must be (minutes, MB), got {retention!r}")
        minutes = _check_int("retention minutes", retention[0], -1)
        size_mb = _check_int("retention MB", retention[1], -1)
        if minutes > limits.retention_minutes_max or size_mb > limits.retention_size_mb_max:
            raise InvalidArgument(f"retention {retention} is above the limits")
    if message_ttl_s is not None:
        _check_int("message TTL", message_ttl_s, 0)
        if message_ttl_s > limits.message_ttl_s_max:
            raise InvalidArgument(f"message TTL {message_ttl_s} s is above the limit")
    return {
        "retention_time_minutes": minutes,
        "retention_size_mb": size_mb,
        "message_ttl_s": message_ttl_s,
    }


# --- gateway: remote clusters and replication policies ------------------------------------
#: Scopes of a replication policy: a namespace, or a topic overriding its namespace.
POLICY_SCOPES = ("namespace", "topic")


@dataclass(frozen=True)
class RemoteClusterRecord:
    name: str
    service_url: str
    admin_url: str
    updated_at: float
    version: int


@dataclass(frozen=True)
class ReplicationPolicyRecord:
    """The remote clusters a namespace or topic replicates to (sorted names)."""

    scope: str
    name: str
    clusters: tuple[str, ...]
    updated_at: float
    version: int


_remote_clusters: Table = RemoteClusterRow.__table__  # type: ignore[assignment]
_replication_policies: Table = ReplicationPolicyRow.__table__  # type: ignore[assignment]


def _check_scope(scope: object) -> str:
    if scope not in POLICY_SCOPES:
        raise InvalidArgument(f"policy scope must be one of {POLICY_SCOPES}, got {scope!r}")
    return scope  # type: ignore[return-value]


def _check_url(what: str, value: object) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= url_chars_max:
        raise InvalidArgument(f"{what} must be 1..{url_chars_max} characters, got {value!r}")
    return value


def _select_policy(connection: Connection, scope: str, name: str) -> Row[Any] | None:
    table = _replication_policies
    query = select(table).where(table.c.scope == scope, table.c.name == name)
    return connection.execute(query).one_or_none()


def _remote_cluster_from_row(row: Row[Any]) -> RemoteClusterRecord:
    return RemoteClusterRecord(
        name=row.name,
        service_url=row.service_url,
        admin_url=row.admin_url,
        updated_at=row.updated_at,
        version=row.version,
    )


def _policy_from_row(row: Row[Any]) -> ReplicationPolicyRecord:
    return ReplicationPolicyRecord(
        scope=row.scope,
        name=row.name,
        clusters=tuple(sorted(_check_names("cluster", row.clusters))),
        updated_at=row.updated_at,
        version=row.version,
    )
