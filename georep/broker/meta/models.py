"""The broker's tables in the metadata store: tenants, namespaces and partitioned topics
(``catalog.py``), topic schemas and namespaces' compatibility strategies
(``schemas.py``).

They are declared on storage's one SQLAlchemy ``MetaData``
(``georep.storage.meta.models.Base``), so that the one chain of Alembic migrations
(``georep/migrations``) owns every layer's tables; ``georep/migrations/tables.py``
gathers them. Conventions (the ``version`` CAS token, times as seconds) are storage's
models' docstring.
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
    Integer,
    LargeBinary,
    String,
)
from sqlalchemy.orm import Mapped, mapped_column

from georep.storage.meta.models import Base, name_chars_max


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
    """One version of a topic's schema (``broker/meta/schemas.py``): per base topic name
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
