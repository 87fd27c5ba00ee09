"""Connecting to the metadata database, and moving its schema with Alembic.

Migrations and the store connect the same way, so both live on :func:`create_engine`:

- URLs: ``sqlite:///path.db`` (relative) or ``sqlite:////abs/path.db``; and
  ``postgresql://user@host:port/db``, which maps to the psycopg 3 driver
  (``postgresql+psycopg://``, also accepted as is). In-memory SQLite is refused: each
  connection would see its own empty database.
- SQLite is shared by several processes (bookies, the auditor, the cluster): WAL journal,
  ``synchronous=FULL``, a busy timeout, foreign keys on, and pysqlite's own transaction
  handling switched off so that georep emits ``BEGIN`` itself. A connection whose
  execution options carry ``georep_begin="IMMEDIATE"`` takes the write lock at ``BEGIN``:
  two writers never both hold a read snapshot and then both ask for the write lock (which
  SQLite resolves by failing one with "database is locked"); the second waits at
  ``BEGIN`` for up to the busy timeout instead.

The schema is created only by the migrations in ``georep/migrations`` (an Alembic script
directory shipped as package data). :func:`upgrade` and :func:`downgrade` run them
programmatically, one process at a time per database: an ``fcntl`` lock on
``<database file>.migrate.lock`` for SQLite, a session-level ``pg_advisory_lock`` for
PostgreSQL. Example: three bookies start at once on a new SQLite file; the first takes
the file lock and creates the tables, the other two wait, then find the database at head
and do nothing.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import zlib
from collections.abc import Iterator

import sqlalchemy
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import event
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError

from georep import limits
from georep.invariant import invariant
from georep.storage.errors import InvalidArgument

#: Key of the PostgreSQL advisory lock that serializes migrations of one database.
postgres_migration_lock_key = zlib.crc32(b"georep.migrations")
#: Alembic script directory, as a package resource.
script_location = "georep:migrations"

#: Execution option naming the SQLite transaction mode (DEFERRED or IMMEDIATE).
BEGIN_OPTION = "georep_begin"

_SQLITE_DRIVERS = {"sqlite", "sqlite+pysqlite"}
_POSTGRES_DRIVERS = {"postgresql", "postgres", "postgresql+psycopg"}


def database_url(url: str) -> URL:
    """The SQLAlchemy URL for a georep metadata URL; ``InvalidArgument`` when unsupported."""
    try:
        parsed = make_url(url)
    except ArgumentError as error:
        raise InvalidArgument(f"not a database URL: {url!r}") from error
    if parsed.drivername in _SQLITE_DRIVERS:
        if parsed.database in (None, "", ":memory:") or parsed.database.startswith("file:"):
            raise InvalidArgument(
                f"metadata URL {url!r}: SQLite needs a file path, as sqlite:///path.db"
            )
        return parsed.set(drivername="sqlite+pysqlite")
    if parsed.drivername in _POSTGRES_DRIVERS:
        return parsed.set(drivername="postgresql+psycopg")
    raise InvalidArgument(
        f"metadata URL {url!r}: use sqlite:///path.db or postgresql://user@host:port/db"
    )


def is_sqlite(engine_or_url: Engine | URL) -> bool:
    url = engine_or_url.url if isinstance(engine_or_url, Engine) else engine_or_url
    return url.get_backend_name() == "sqlite"


def create_engine(url: str, **engine_options: object) -> Engine:
    """An engine for ``url`` configured as the module docstring says."""
    parsed = database_url(url)
    if parsed.get_backend_name() != "sqlite":
        return sqlalchemy.create_engine(parsed, pool_pre_ping=True, **engine_options)

    if parsed.database is None:  # database_url refuses it; said again for the checker
        raise InvalidArgument(f"metadata URL {url!r}: SQLite needs a file path")
    directory = os.path.dirname(os.path.abspath(parsed.database))
    if not os.path.isdir(directory):
        raise InvalidArgument(f"metadata URL {url!r}: directory {directory} does not exist")
    engine = sqlalchemy.create_engine(
        parsed, connect_args={"timeout": limits.sqlite_busy_timeout_s_max}, **engine_options
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: sqlite3.Connection, _record: object) -> None:
        # No implicit BEGIN from pysqlite: the "begin" hook below emits it.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {int(limits.sqlite_busy_timeout_s_max * 1000)}")
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA synchronous = FULL")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        mode = connection.get_execution_options().get(BEGIN_OPTION, "DEFERRED")
        connection.exec_driver_sql(f"BEGIN {mode}")

    return engine


def _config(connection: Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", script_location)
    config.set_main_option("path_separator", "os")
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def head() -> str:
    """The newest revision this code knows."""
    revision = ScriptDirectory.from_config(_config()).get_current_head()
    invariant(revision is not None, f"no migrations found at {script_location}")
    return str(revision)


def revisions() -> list[str]:
    """Every revision, oldest first."""
    walked = ScriptDirectory.from_config(_config()).walk_revisions("base", "heads")
    return [script.revision for script in reversed(list(walked))]


def current(url: str) -> str | None:
    """The revision the database at ``url`` is at; None for an empty database."""
    engine = create_engine(url, poolclass=sqlalchemy.NullPool)
    try:
        with engine.connect() as connection:
            return MigrationContext.configure(connection).get_current_revision()
    finally:
        engine.dispose()


def upgrade(url: str, revision: str = "head") -> None:
    """Migrate the database at ``url`` up to ``revision``; a no-op when already there."""
    with _locked_connection(url) as connection:
        command.upgrade(_config(connection), revision)


def downgrade(url: str, revision: str) -> None:
    """Migrate the database at ``url`` down to ``revision`` (``"base"``: drop everything)."""
    with _locked_connection(url) as connection:
        command.downgrade(_config(connection), revision)


@contextlib.contextmanager
def _locked_connection(url: str) -> Iterator[Connection]:
    """A connection holding this database's migration lock; its transactions write."""
    engine = create_engine(url, poolclass=sqlalchemy.NullPool)
    try:
        if is_sqlite(engine):
            with _file_lock(f"{engine.url.database}.migrate.lock"), engine.connect() as conn:
                yield conn.execution_options(**{BEGIN_OPTION: "IMMEDIATE"})
        else:
            with engine.connect() as connection:
                lock_args = {"key": postgres_migration_lock_key}
                connection.execute(sqlalchemy.text("SELECT pg_advisory_lock(:key)"), lock_args)
                connection.commit()
                try:
                    yield connection
                finally:
                    connection.rollback()
                    connection.execute(
                        sqlalchemy.text("SELECT pg_advisory_unlock(:key)"), lock_args
                    )
                    connection.commit()
    finally:
        engine.dispose()


@contextlib.contextmanager
def _file_lock(path: str) -> Iterator[None]:
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # closing releases the lock
