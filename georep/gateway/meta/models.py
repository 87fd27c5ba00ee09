"""The gateway's tables in the metadata store: remote clusters and replication policies
(``replication_policies.py``), subscription-sync policies
(``subscription_sync_policies.py``) and the gateway instances of a cluster
(``members.py``).

They are declared on storage's one SQLAlchemy ``MetaData``
(``georep.storage.meta.models.Base``), so that the one chain of Alembic migrations
(``georep/migrations``) owns every layer's tables; ``georep/migrations/tables.py``
gathers them. Conventions (the ``version`` CAS token, times as seconds) are storage's
models' docstring.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, CheckConstraint, Double, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from georep.storage.meta.models import Base, name_chars_max

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
