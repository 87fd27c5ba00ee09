"""Storage's tables of the metadata store (ledgers, bookies, under-replication markers,
leases, managed ledgers and cursors), as SQLAlchemy 2 typed models, and the one
``MetaData`` (``Base``) every layer declares its tables on: the broker's are
``broker/meta/models.py``, the gateway's ``gateway/meta/models.py``; one chain of
migrations owns them all (``georep/migrations/tables.py`` gathers them).

These models describe the schema; they never create it. Alembic migrations under
``georep/migrations/versions`` own the schema, and ``tests/unit/test_migrations.py``
checks that the migrated database and these models agree (autogenerate finds no diff).

Every mutable row carries ``version``, the compare-and-set token: an update says
``... WHERE key = :key AND version = :expected`` and sets ``version = expected + 1``; an
update that matched no row lost against a concurrent writer. Example: two workers read
ledger 7 at version 3; both send ``UPDATE ledgers SET ..., version = 4 WHERE ledger_id = 7
AND version = 3``; the database serializes them, the first changes one row, the second
changes none and gets ``BadVersion``.

Times are seconds since the epoch as doubles, taken from the store's injectable clock,
so that leases can be tested deterministically.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    CheckConstraint,
    Double,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

#: Constraint names are spelled out so that migrations can name what they drop.
NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

#: Bookie addresses, lease names and lock holders are short identifiers.
name_chars_max = 255

#: A ledger id: 64 bits on PostgreSQL; on SQLite an INTEGER PRIMARY KEY (the 64-bit rowid).
LedgerId = BigInteger().with_variant(Integer(), "sqlite")


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON}


class LedgerRow(Base):
    """One ledger's metadata (see ``ledger_metadata.LedgerMetadata``).

    ``ensembles`` is JSON ``[[first_entry_id, [bookie, ...]], ...]``; ``custom`` is a JSON
    object of strings. Ids are never reused, even after a delete: bookies may still hold
    entries of a deleted ledger until their garbage collection runs (AUTOINCREMENT on
    SQLite, a sequence on PostgreSQL).
    """

    __tablename__ = "ledgers"
    __table_args__ = (
        CheckConstraint(
            "ensemble_size >= write_quorum AND write_quorum >= ack_quorum AND ack_quorum >= 1",
            name="quorums",
        ),
        CheckConstraint("state IN ('OPEN', 'IN_RECOVERY', 'CLOSED')", name="state"),
        CheckConstraint("version >= 1", name="version"),
        {"sqlite_autoincrement": True},
    )

    ledger_id: Mapped[int] = mapped_column(LedgerId, primary_key=True, autoincrement=True)
    ensemble_size: Mapped[int] = mapped_column(Integer)
    write_quorum: Mapped[int] = mapped_column(Integer)
    ack_quorum: Mapped[int] = mapped_column(Integer)
    state: Mapped[str] = mapped_column(String(16))
    last_entry_id: Mapped[int] = mapped_column(BigInteger)
    length: Mapped[int] = mapped_column(BigInteger)
    ensembles: Mapped[list[Any]] = mapped_column(JSON)
    custom: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[float] = mapped_column(Double)
    version: Mapped[int] = mapped_column(Integer)


class BookieRow(Base):
    """A bookie's registration; it is alive while ``lease_expires_at`` is in the future."""

    __tablename__ = "bookies"
    __table_args__ = (CheckConstraint("version >= 1", name="version"),)

    address: Mapped[str] = mapped_column(String(name_chars_max), primary_key=True)
    registered_at: Mapped[float] = mapped_column(Double)
    lease_expires_at: Mapped[float] = mapped_column(Double)
    version: Mapped[int] = mapped_column(Integer)


class UnderReplicatedRow(Base):
    """A ledger with fragments on lost bookies, and the lock of the worker repairing it.

    ``lost_bookies`` is a sorted JSON list. The lock is free when ``lock_holder`` is NULL
    or ``lock_expires_at`` has passed. Deleting the ledger deletes the marker.
    """

    __tablename__ = "underreplicated_ledgers"
    __table_args__ = (
        CheckConstraint("version >= 1", name="version"),
        Index(None, "marked_at"),
    )

    ledger_id: Mapped[int] = mapped_column(
        LedgerId,
        ForeignKey("ledgers.ledger_id", ondelete="CASCADE"),
        primary_key=True,
        autoincrement=False,
    )
    lost_bookies: Mapped[list[Any]] = mapped_column(JSON)
    marked_at: Mapped[float] = mapped_column(Double)
    lock_holder: Mapped[str | None] = mapped_column(String(name_chars_max))
    lock_expires_at: Mapped[float | None] = mapped_column(Double)
    version: Mapped[int] = mapped_column(Integer)


class LeaseRow(Base):
    """A named lease (auditor leadership, topic ownership) held until ``expires_at``."""

    __tablename__ = "leases"
    __table_args__ = (CheckConstraint("version >= 1", name="version"),)

    name: Mapped[str] = mapped_column(String(name_chars_max), primary_key=True)
    holder: Mapped[str] = mapped_column(String(name_chars_max))
    acquired_at: Mapped[float] = mapped_column(Double)
    expires_at: Mapped[float] = mapped_column(Double)
    version: Mapped[int] = mapped_column(Integer)


#: A managed ledger's name (a topic partition) and a cursor's name (a subscription).
managed_name_chars_max = 255


class ManagedLedgerRow(Base):
    """A managed ledger: a topic partition's log as an ordered list of ledgers.

    ``ledgers`` is JSON ``[[ledger_id, entries, size_bytes, created_at, closed_at], ...]``
    in id order; the last one is the current ledger, written by the owner, whose entries
    and size read 0 and ``closed_at`` null until it is closed. Opening the log as its new
    owner, rolling over and trimming each CAS this row: ``version`` is the ownership token.
    """

    __tablename__ = "managed_ledgers"
    __table_args__ = (CheckConstraint("version >= 1", name="version"),)

    name: Mapped[str] = mapped_column(String(managed_name_chars_max), primary_key=True)
    ledgers: Mapped[list[Any]] = mapped_column(JSON)
    created_at: Mapped[float] = mapped_column(Double)
    version: Mapped[int] = mapped_column(Integer)


class ManagedCursorRow(Base):
    """A cursor (subscription) of a managed ledger.

    Its state lives in the entries of its own ledger, ``cursor_ledger_id``; the row points
    at that ledger and keeps the mark-delete position and properties as of when the
    ledger was started (a fallback if the ledger is ever lost). Deleting the managed
    ledger deletes its cursors.
    """

    __tablename__ = "managed_cursors"
    __table_args__ = (CheckConstraint("version >= 1", name="version"),)

    managed_ledger: Mapped[str] = mapped_column(
        String(managed_name_chars_max),
        ForeignKey("managed_ledgers.name", ondelete="CASCADE"),
        primary_key=True,
    )
    name: Mapped[str] = mapped_column(String(managed_name_chars_max), primary_key=True)
    cursor_ledger_id: Mapped[int | None] = mapped_column(BigInteger)
    mark_delete_ledger_id: Mapped[int] = mapped_column(BigInteger)
    mark_delete_entry_id: Mapped[int] = mapped_column(BigInteger)
    properties: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[float] = mapped_column(Double)
    version: Mapped[int] = mapped_column(Integer)


metadata = Base.metadata
