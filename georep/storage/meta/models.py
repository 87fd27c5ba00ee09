"""Tables of the metadata store, as SQLAlchemy 2 typed models.

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
    Boolean,
    CheckConstraint,
    Double,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
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


class TenantRow(Base):
    """A tenant (Pulsar's ``TenantInfo``): who administers it and where it may live.

    ``admin_roles`` and ``allowed_clusters`` are JSON lists of names. A tenant is deleted
    only when it has no namespace left (the store checks in the deleting transaction).
    """

    __tablename__ = "tenants"
    __table_args__ = (CheckConstraint("version >= 1", name="version"),)

    name: Mapped[str] = mapped_column(String(name_chars_max), primary_key=True)
    admin_roles: Mapped[list[Any]] = mapped_column(JSON)
    allowed_clusters: Mapped[list[Any]] = mapped_column(JSON)
    created_at: Mapped[float] = mapped_column(Double)
    version: Mapped[int] = mapped_column(Integer)


class NamespaceRow(Base):
    """A namespace of a tenant, with its policies.

    Retention is both columns or neither (NULL: the broker's default); -1 means unlimited,
    as in Pulsar. ``message_ttl_s`` NULL or 0 means messages never expire. Policies are
    changed by CAS on ``version``.
    """

    __tablename__ = "namespaces"
    __table_args__ = (
        CheckConstraint("version >= 1", name="version"),
        CheckConstraint(
            "(retention_time_minutes IS NULL) = (retention_size_mb IS NULL)",
            name="retention_pair",
        ),
        CheckConstraint(
            "retention_time_minutes >= -1 AND retention_size_mb >= -1", name="retention"
        ),
        CheckConstraint("message_ttl_s >= 0", name="message_ttl_s"),
    )

    tenant: Mapped[str] = mapped_column(
        String(name_chars_max), ForeignKey("tenants.name"), primary_key=True
    )
    name: Mapped[str] = mapped_column(String(name_chars_max), primary_key=True)
    retention_time_minutes: Mapped[int | None] = mapped_column(Integer)
    retention_size_mb: Mapped[int | None] = mapped_column(BigInteger)
    message_ttl_s: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[float] = mapped_column(Double)
    version: Mapped[int] = mapped_column(Integer)


class PartitionedTopicRow(Base):
    """A partitioned topic of the embedded cluster and its number of partitions (each
    partition is a topic of its own, ``<name>-partition-<i>``). Kept by the broker
    (``broker/catalog.py``)."""

    __tablename__ = "partitioned_topics"
    __table_args__ = (
        CheckConstraint("partitions >= 1", name="partitions"),
        CheckConstraint("version >= 1", name="version"),
    )

    name: Mapped[str] = mapped_column(String(name_chars_max), primary_key=True)
    partitions: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[float] = mapped_column(Double)
    version: Mapped[int] = mapped_column(Integer)


class TopicSchemaRow(Base):
    """One version of a topic's schema (``storage/meta/schemas.py``): per base topic name
    (a partitioned topic's partitions share it), versions 0, 1, 2, ... never reused. A
    deletion is a version too (``deleted``, no data), as in Pulsar: versions before it no
    longer count, and the next schema starts a new history at the next number."""

    __tablename__ = "topic_schemas"
    __table_args__ = (CheckConstraint("version >= 0", name="version"),)

    topic: Mapped[str] = mapped_column(String(name_chars_max), primary_key=True)
    version: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    schema_type: Mapped[str] = mapped_column(String(32))
    data: Mapped[bytes] = mapped_column(LargeBinary)
    properties: Mapped[dict[str, Any]] = mapped_column(JSON)
    deleted: Mapped[bool] = mapped_column(Boolean)
    created_at: Mapped[float] = mapped_column(Double)


class SchemaCompatibilityRow(Base):
    """A namespace's schema compatibility strategy (absent: Pulsar's default, FULL)."""

    __tablename__ = "schema_compatibility"
    __table_args__ = (CheckConstraint("version >= 1", name="version"),)

    namespace: Mapped[str] = mapped_column(String(name_chars_max), primary_key=True)
    strategy: Mapped[str] = mapped_column(String(32))
    version: Mapped[int] = mapped_column(Integer)


#: A service or admin URL of a remote cluster.
url_chars_max = 1024


class RemoteClusterRow(Base):
    """A remote cluster a gateway replicates to: its public endpoints.

    Written from the gateway's configuration when it starts (the configuration is the
    source of truth; tokens stay there and are never stored). ``version`` counts changes.
    """

    __tablename__ = "remote_clusters"
    __table_args__ = (CheckConstraint("version >= 1", name="version"),)

    name: Mapped[str] = mapped_column(String(name_chars_max), primary_key=True)
    service_url: Mapped[str] = mapped_column(String(url_chars_max))
    admin_url: Mapped[str] = mapped_column(String(url_chars_max))
    updated_at: Mapped[float] = mapped_column(Double)
    version: Mapped[int] = mapped_column(Integer)


class ReplicationPolicyRow(Base):
    """The remote clusters a namespace (``scope = 'namespace'``, name ``tenant/ns``) or a
    topic (``scope = 'topic'``, name ``persistent://tenant/ns/topic``, a partitioned
    topic's base name) replicates to. A topic's row overrides its namespace's, even with
    an empty list. ``clusters`` is a sorted JSON list of names; changes CAS ``version``.
    """

    __tablename__ = "replication_policies"
    __table_args__ = (
        CheckConstraint("version >= 1", name="version"),
        CheckConstraint("scope IN ('namespace', 'topic')", name="scope"),
    )

    scope: Mapped[str] = mapped_column(String(16), primary_key=True)
    name: Mapped[str] = mapped_column(String(name_chars_max), primary_key=True)
    clusters: Mapped[list[Any]] = mapped_column(JSON)
    updated_at: Mapped[float] = mapped_column(Double)
    version: Mapped[int] = mapped_column(Integer)


#: A stored subscription pattern's column (``limits.sync_subscription_pattern_chars_max``
#: is what a policy may use of it).
pattern_chars_max = 1024


class SubscriptionSyncPolicyRow(Base):
    """Which subscriptions a namespace (``scope = 'namespace'``) or topic (``scope =
    'topic'``) syncs beside the flagged ones, names as in ``replication_policies``:
    ``subscriptions`` is ``all`` or ``flagged``; with ``flagged``, ``pattern`` (a regular
    expression a name must match whole) adds the subscriptions it matches. A topic's row
    overrides its namespace's; changes CAS ``version``."""

    __tablename__ = "subscription_sync_policies"
    __table_args__ = (
        CheckConstraint("version >= 1", name="version"),
        CheckConstraint("scope IN ('namespace', 'topic')", name="scope"),
        CheckConstraint("subscriptions IN ('all', 'flagged')", name="subscriptions"),
    )

    scope: Mapped[str] = mapped_column(String(16), primary_key=True)
    name: Mapped[str] = mapped_column(String(name_chars_max), primary_key=True)
    subscriptions: Mapped[str] = mapped_column(String(16))
    pattern: Mapped[str | None] = mapped_column(String(pattern_chars_max))
    updated_at: Mapped[float] = mapped_column(Double)
    version: Mapped[int] = mapped_column(Integer)


class GatewayMemberRow(Base):
    """A live gateway instance of a cluster (``gateway/ownership.py``): its lease, renewed
    every heartbeat, and ``view``, the sorted instance names whose shares of the topic
    partitions it has stopped down to (it runs only partitions that view gives it).
    """

    __tablename__ = "gateway_members"
    __table_args__ = (CheckConstraint("version >= 1", name="version"),)

    cluster: Mapped[str] = mapped_column(String(name_chars_max), primary_key=True)
    instance: Mapped[str] = mapped_column(String(name_chars_max), primary_key=True)
    view: Mapped[list[Any]] = mapped_column(JSON)
    joined_at: Mapped[float] = mapped_column(Double)
    expires_at: Mapped[float] = mapped_column(Double)
    version: Mapped[int] = mapped_column(Integer)
