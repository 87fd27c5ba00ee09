"""The metadata store's engine, the one object every repository (``store.py``) is given.

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

Group commit (SQLite only). On SQLite a write transaction's cost is mostly the sync of
the WAL at its commit (``synchronous = FULL``), and the writers already queue for the one
write lock. So the hot writes (a ledger, a managed ledger, a cursor: what a topic load
does) go through :meth:`MetadataEngine.write`, which hands them to the engine's one writer
thread instead. It takes every write queued (at most
``limits.metadata_group_commit_count_max``), opens one ``BEGIN IMMEDIATE`` transaction,
runs each write in a ``SAVEPOINT`` of its own (its ``writing()`` and ``reading()`` are that
transaction), commits once and only then answers every caller. A write that fails is
rolled back to its savepoint and gets its error; the others go on. A database error
inside a write may have lost the whole transaction: that write gets its error and the
others of the group run again in a new transaction (nothing of theirs was committed, and
what they saw of the group is gone). A
failed commit fails every write of the group. The writer never waits for more work: a
write alone is committed at once. Example: six topic loads ask for a ledger each while
the writer syncs; the next transaction runs the six inserts and syncs once. PostgreSQL
keeps one transaction per call (its commits are concurrent already).

Time comes from the injected ``clock`` (seconds), read once per call before the call goes
to its thread. A lease, registration or lock is alive while its expiry is strictly after
``clock()``.

What a repository may use of the engine is :class:`MetadataEngine`'s public interface:
``clock``, ``call`` (run a function in a worker thread, counted, its database errors made
``MetadataUnavailable``), ``write`` (the same for a write that may join a group commit),
``retrying`` with :class:`Conflict`, ``writing`` and
``reading`` (one transaction each), ``insert`` and ``delete_where``; plus ``table_of``
and ``count_rows`` here and the argument checks in ``checks.py``. Each repository keeps
its own tables and its own SQL; none reaches into another's, except through that
repository's public functions.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import dataclasses
import queue
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, ParamSpec, Self, TypeVar

from alembic.runtime.migration import MigrationContext
from sqlalchemy import Table, delete, func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import InterfaceError, OperationalError

from georep import limits
from georep.invariant import InvariantViolation
from georep.storage.errors import (
    BadVersion,
    InvalidArgument,
    MetadataUnavailable,
)
from georep.storage.meta import migrate as migrations
from georep.storage.meta.models import Base

Clock = Callable[[], float]
_P = ParamSpec("_P")
_T = TypeVar("_T")


def table_of(row: type[Base]) -> Table:
    """The table a row class is mapped to (SQLAlchemy declares ``__table__`` as any
    ``FromClause``; every georep model maps one plain table)."""
    table = row.__table__
    if not isinstance(table, Table):
        raise InvariantViolation(f"{row.__name__} is not mapped to a table")
    return table


def count_rows(connection: Connection, table: Table, *conditions: Any) -> int:
    query = select(func.count()).select_from(table).where(*conditions)
    return int(connection.execute(query).scalar_one())


class Conflict(Exception):
    """A repository's internal CAS lost: raised inside a function run by
    :meth:`MetadataEngine.retrying`, which runs it again in a new transaction."""


class MetadataEngine:
    """The engine every repository is given: one SQLAlchemy engine, each call one short
    transaction in a worker thread, CAS retries, counts. Create with :meth:`open`
    (through :class:`~georep.storage.meta.store.MetadataStore`)."""

    def __init__(self, url: str, engine: Engine, clock: Clock) -> None:
        self.url = url
        #: Seconds now; read once per call, before the call goes to its thread.
        self.clock = clock
        self._engine = engine
        self._write_engine = engine.execution_options(**{migrations.BEGIN_OPTION: "IMMEDIATE"})
        self._closed = False
        self._stats: collections.Counter[str] = collections.Counter()
        self._stats_lock = threading.Lock()
        #: The group commit's writer (SQLite only); its thread starts at the first write.
        self._group: _GroupWriter | None = None
        #: ``connection``: the group's transaction, set in the writer thread only.
        self._in_group = threading.local()
        if migrations.is_sqlite(engine):
            self._group = _GroupWriter(self._write_engine, self._in_group)

    @classmethod
    async def open(cls, url: str, *, migrate: bool = True, clock: Clock = time.time) -> Self:
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
            if self._group is not None:
                await asyncio.to_thread(self._group.stop)
            await asyncio.to_thread(self._engine.dispose)

    async def __aenter__(self) -> Self:
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

    # --- what repositories use ------------------------------------------------------
    async def call(self, function: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
        """``function(*args, **kwargs)`` in a worker thread: counted, a stale version
        counted as a CAS conflict, a database error raised as MetadataUnavailable."""
        if self._closed:
            raise InvalidArgument("the metadata store is closed")
        self._count("operations")
        return await self._answer(asyncio.to_thread(function, *args, **kwargs))

    async def write(self, function: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
        """:meth:`call` for a write that may share its commit with others (module
        docstring); it returns once its change is durable, with the same result or error.

        On SQLite ``function`` runs in the writer thread, inside the group's transaction:
        its ``writing()`` blocks are savepoints and its ``reading()`` sees the group's
        changes so far. So ``function`` must do its database work through those two only,
        and nothing else that cannot be done twice: when another write of its group loses
        the transaction, it runs again in the next one.
        """
        if self._group is None:
            return await self.call(function, *args, **kwargs)
        if self._closed:
            raise InvalidArgument("the metadata store is closed")
        self._count("operations")
        future = self._group.submit(lambda: function(*args, **kwargs))
        return await self._answer(asyncio.wrap_future(future))

    async def _answer(self, answer: Awaitable[_T]) -> _T:
        try:
            return await answer
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
    def writing(self) -> Iterator[Connection]:
        """A write transaction (on SQLite it holds the write lock from BEGIN); in a group
        commit's writer thread, a savepoint of the group's transaction."""
        group: Connection | None = getattr(self._in_group, "connection", None)
        if group is not None:
            with group.begin_nested():
                yield group
            return
        with self._write_engine.begin() as connection:
            yield connection

    @contextlib.contextmanager
    def reading(self) -> Iterator[Connection]:
        """A read transaction; in a group commit's writer thread, the group's transaction."""
        group: Connection | None = getattr(self._in_group, "connection", None)
        if group is not None:
            yield group
            return
        with self._engine.connect() as connection:
            yield connection

    def retrying(self, function: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
        """Run ``function`` (one transaction) again while it raises :class:`Conflict`, at
        most ``limits.metadata_cas_retries_max`` times; in the worker thread."""
        for _ in range(limits.metadata_cas_retries_max):
            try:
                return function(*args, **kwargs)
            except Conflict:
                self._count("cas_conflicts")
        raise BadVersion(
            f"{function.__name__}: lost {limits.metadata_cas_retries_max} compare-and-sets in a row"
        )

    def insert(self, table: Table) -> Any:
        """INSERT with ON CONFLICT support for this engine's dialect."""
        dialect = postgresql if self._engine.dialect.name == "postgresql" else sqlite
        return dialect.insert(table)

    def delete_where(self, table: Table, condition: Any) -> None:
        """Delete ``table``'s rows matching ``condition`` in one write transaction."""
        with self.writing() as connection:
            connection.execute(delete(table).where(condition))


def _current_revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


@dataclasses.dataclass(frozen=True, slots=True)
class _Write:
    run: Callable[[], Any]
    future: concurrent.futures.Future[Any]


class _GroupWriter:
    """The writer thread of SQLite's group commit (module docstring). Each write's
    ``future`` is completed only after the transaction holding its change committed."""

    def __init__(self, write_engine: Engine, in_group: threading.local) -> None:
        self._write_engine = write_engine
        self._in_group = in_group
        self._queue: queue.SimpleQueue[_Write | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def submit(self, run: Callable[[], Any]) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._serve, name="metadata-group-commit", daemon=True
                )
                self._thread.start()
            self._queue.put(_Write(run, future))
        return future

    def stop(self) -> None:
        """Commit what is queued, then end the thread."""
        with self._lock:
            thread = self._thread
            if thread is not None:
                self._queue.put(None)
        if thread is not None:
            thread.join()

    def _serve(self) -> None:
        stopping = False
        while not stopping:
            first = self._queue.get()
            if first is None:
                return
            group = [first]
            while len(group) < limits.metadata_group_commit_count_max:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break  # no waiting for more: a write alone commits at once
                if more is None:
                    stopping = True
                    break
                group.append(more)
            # A write whose caller was cancelled before it started is not run (as a
            # worker thread's call that had not started).
            pending = [write for write in group if write.future.set_running_or_notify_cancel()]
            while pending:
                pending = self._commit(pending)

    def _commit(self, group: list[_Write]) -> list[_Write]:
        """Run ``group`` in one transaction and answer them; what must run again."""
        done: list[tuple[_Write, Any]] = []
        failed: list[tuple[_Write, BaseException]] = []
        again: list[_Write] = []
        try:
            with self._write_engine.connect() as connection, connection.begin():
                self._in_group.connection = connection
                try:
                    for index, write in enumerate(group):
                        try:
                            done.append((write, write.run()))
                        except (OperationalError, InterfaceError) as error:
                            # The transaction may be lost: the others run again, those
                            # that failed too (they saw changes that are not kept).
                            failed, done = [(write, error)], []
                            again = group[:index] + group[index + 1 :]
                            raise
                        except Exception as error:  # rolled back to its savepoint
                            failed.append((write, error))
                finally:
                    self._in_group.connection = None
        except (OperationalError, InterfaceError) as error:
            if not again and not any(error is cause for _, cause in failed):
                # BEGIN or COMMIT failed: nothing of the group is stored.
                failed = [(write, error) for write in group]
                done = []
        except BaseException as error:  # every caller must be answered
            failed = [(write, error) for write in group]
            done = []
        for write, result in done:
            write.future.set_result(result)
        for write, cause in failed:
            write.future.set_exception(cause)
        return again
