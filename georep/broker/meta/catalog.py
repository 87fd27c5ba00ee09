"""The cluster's catalog in the metadata store: tenants and namespaces (the admin REST,
``broker/namespaces.py``) and partitioned topics (``broker/catalog.py``)."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.engine import Connection, Row
from sqlalchemy.exc import IntegrityError

from georep import limits
from georep.broker.meta.models import (
    NamespaceRow,
    PartitionedTopicRow,
    TenantRow,
)
from georep.storage.errors import (
    BadVersion,
    InvalidArgument,
)
from georep.storage.meta.checks import check_int, check_name
from georep.storage.meta.engine import Conflict, MetadataEngine, count_rows, table_of


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
    #: create: ``limits.tenants_count_max`` / ``namespaces_count_max`` /
    #: ``catalog_records_max`` (partitioned topics) reached.
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


_tenants = table_of(TenantRow)
_namespaces = table_of(NamespaceRow)
_partitioned = table_of(PartitionedTopicRow)


def _select_tenant(connection: Connection, name: str) -> Row[Any] | None:
    return connection.execute(select(_tenants).where(_tenants.c.name == name)).one_or_none()


def _select_namespace(connection: Connection, tenant: str, name: str) -> Row[Any] | None:
    query = select(_namespaces).where(_namespaces.c.tenant == tenant, _namespaces.c.name == name)
    return connection.execute(query).one_or_none()


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
    return list(dict.fromkeys(check_name(what, value) for value in values))


def _check_policies(
    retention: tuple[int, int] | None, message_ttl_s: int | None
) -> dict[str, int | None]:
    minutes = size_mb = None
    if retention is not None:
        if not isinstance(retention, tuple) or len(retention) != 2:
            raise InvalidArgument(f"retention must be (minutes, MB), got {retention!r}")
        minutes = check_int("retention minutes", retention[0], -1)
        size_mb = check_int("retention MB", retention[1], -1)
        if minutes > limits.retention_minutes_max or size_mb > limits.retention_size_mb_max:
            raise InvalidArgument(f"retention {retention} is above the limits")
    if message_ttl_s is not None:
        check_int("message TTL", message_ttl_s, 0)
        if message_ttl_s > limits.message_ttl_s_max:
            raise InvalidArgument(f"message TTL {message_ttl_s} s is above the limit")
    return {
        "retention_time_minutes": minutes,
        "retention_size_mb": size_mb,
        "message_ttl_s": message_ttl_s,
    }


class CatalogRepository:
    """Tenants and namespaces, for the admin REST and the broker."""

    def __init__(self, engine: MetadataEngine) -> None:
        self._engine = engine

    # --- tenants and namespaces ---------------------------------------------------------
    async def create_tenant(
        self, name: str, *, admin_roles: Iterable[str] = (), allowed_clusters: Iterable[str] = ()
    ) -> CatalogOutcome:
        """DONE, EXISTS, or FULL at ``limits.tenants_count_max`` tenants."""
        check_name("tenant", name)
        roles = _check_name_list("admin role", admin_roles)
        clusters = _check_name_list("allowed cluster", allowed_clusters)
        return await self._engine.call(
            self._engine.retrying, self._create_tenant, name, roles, clusters, self._engine.clock()
        )

    async def get_tenant(self, name: str) -> TenantRecord | None:
        check_name("tenant", name)
        return await self._engine.call(self._get_tenant, name)

    async def list_tenants(self) -> list[str]:
        """Tenant names, sorted."""
        return await self._engine.call(
            self._list_names, select(_tenants.c.name).order_by(_tenants.c.name)
        )

    async def update_tenant(self, tenant: TenantRecord) -> TenantRecord:
        """CAS: store ``tenant``'s roles and clusters if the stored version is
        ``tenant.version``; returns it at version + 1. BadVersion when stale or deleted."""
        if not isinstance(tenant, TenantRecord):
            raise InvalidArgument(f"not a TenantRecord: {tenant!r}")
        check_name("tenant", tenant.name)
        roles = _check_name_list("admin role", tenant.admin_roles)
        clusters = _check_name_list("allowed cluster", tenant.allowed_clusters)
        check_int("version", tenant.version, 1)
        return await self._engine.call(self._update_tenant, tenant, roles, clusters)

    async def delete_tenant(self, name: str) -> CatalogOutcome:
        """DONE, MISSING, or NOT_EMPTY while the tenant has namespaces."""
        check_name("tenant", name)
        return await self._engine.call(self._engine.retrying, self._delete_tenant, name)

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
        check_name("tenant", tenant)
        check_name("namespace", name)
        policies = _check_policies(retention, message_ttl_s)
        return await self._engine.call(
            self._engine.retrying,
            self._create_namespace,
            tenant,
            name,
            policies,
            self._engine.clock(),
        )

    async def get_namespace(self, tenant: str, name: str) -> NamespaceRecord | None:
        check_name("tenant", tenant)
        check_name("namespace", name)
        return await self._engine.call(self._get_namespace, tenant, name)

    async def list_namespaces(self, tenant: str) -> list[str]:
        """Names (without the tenant) of the tenant's namespaces, sorted."""
        check_name("tenant", tenant)
        query = (
            select(_namespaces.c.name)
            .where(_namespaces.c.tenant == tenant)
            .order_by(_namespaces.c.name)
        )
        return await self._engine.call(self._list_names, query)

    async def update_namespace(self, namespace: NamespaceRecord) -> NamespaceRecord:
        """CAS: store the namespace's policies if the stored version is
        ``namespace.version``; returns it at version + 1. BadVersion when stale or deleted."""
        if not isinstance(namespace, NamespaceRecord):
            raise InvalidArgument(f"not a NamespaceRecord: {namespace!r}")
        check_name("tenant", namespace.tenant)
        check_name("namespace", namespace.name)
        check_int("version", namespace.version, 1)
        retention = namespace.retention
        _check_policies(retention, namespace.message_ttl_s)
        return await self._engine.call(self._update_namespace, namespace)

    async def delete_namespace(self, tenant: str, name: str) -> CatalogOutcome:
        """DONE or MISSING. Whether it still has topics is the caller's to check."""
        check_name("tenant", tenant)
        check_name("namespace", name)
        return await self._engine.call(self._delete_namespace, tenant, name)

    # --- tenants and namespaces, in a worker thread -------------------------------------
    def _list_names(self, query: Any) -> list[str]:
        with self._engine.reading() as connection:
            return list(connection.execute(query).scalars())

    def _create_tenant(
        self, name: str, roles: list[str], clusters: list[str], now: float
    ) -> CatalogOutcome:
        with self._engine.writing() as connection:
            if _select_tenant(connection, name) is not None:
                return CatalogOutcome.EXISTS
            if count_rows(connection, _tenants) >= limits.tenants_count_max:
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
                raise Conflict from error
        return CatalogOutcome.DONE

    def _get_tenant(self, name: str) -> TenantRecord | None:
        with self._engine.reading() as connection:
            row = _select_tenant(connection, name)
        return None if row is None else _tenant_from_row(row)

    def _update_tenant(
        self, tenant: TenantRecord, roles: list[str], clusters: list[str]
    ) -> TenantRecord:
        tenants = _tenants.c
        with self._engine.writing() as connection:
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
        with self._engine.writing() as connection:
            if _select_tenant(connection, name) is None:
                return CatalogOutcome.MISSING
            if count_rows(connection, _namespaces, _namespaces.c.tenant == name):
                return CatalogOutcome.NOT_EMPTY
            try:
                connection.execute(delete(_tenants).where(_tenants.c.name == name))
            except IntegrityError as error:
                # PostgreSQL: a namespace was created concurrently; the retry says NOT_EMPTY.
                raise Conflict from error
        return CatalogOutcome.DONE

    def _create_namespace(
        self, tenant: str, name: str, policies: dict[str, int | None], now: float
    ) -> CatalogOutcome:
        with self._engine.writing() as connection:
            if _select_tenant(connection, tenant) is None:
                return CatalogOutcome.MISSING
            if _select_namespace(connection, tenant, name) is not None:
                return CatalogOutcome.EXISTS
            if count_rows(connection, _namespaces) >= limits.namespaces_count_max:
                return CatalogOutcome.FULL
            try:
                connection.execute(
                    _namespaces.insert().values(
                        tenant=tenant, name=name, **policies, created_at=now, version=1
                    )
                )
            except IntegrityError as error:
                # PostgreSQL: the namespace was created, or its tenant deleted, concurrently.
                raise Conflict from error
        return CatalogOutcome.DONE

    def _get_namespace(self, tenant: str, name: str) -> NamespaceRecord | None:
        with self._engine.reading() as connection:
            row = _select_namespace(connection, tenant, name)
        return None if row is None else _namespace_from_row(row)

    def _update_namespace(self, namespace: NamespaceRecord) -> NamespaceRecord:
        namespaces = _namespaces.c
        minutes, size_mb = namespace.retention or (None, None)
        with self._engine.writing() as connection:
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
        with self._engine.writing() as connection:
            result = connection.execute(
                delete(_namespaces).where(namespaces.tenant == tenant, namespaces.name == name)
            )
        return CatalogOutcome.DONE if result.rowcount == 1 else CatalogOutcome.MISSING

    # --- partitioned topics -------------------------------------------------------------
    async def create_partitioned_topic(self, name: str, partitions: int) -> CatalogOutcome:
        """DONE, EXISTS, or FULL past ``limits.catalog_records_max``; ``name`` is the full
        topic name, checked by the broker."""
        check_name("partitioned topic", name)
        check_int("partitions", partitions, 1)
        return await self._engine.call(
            self._engine.retrying,
            self._create_partitioned_topic,
            name,
            partitions,
            self._engine.clock(),
        )

    async def delete_partitioned_topic(self, name: str) -> CatalogOutcome:
        """DONE or MISSING."""
        return await self._engine.call(self._delete_partitioned_topic, check_name("topic", name))

    async def list_partitioned_topics(self) -> dict[str, int]:
        """Every partitioned topic -> its number of partitions."""
        return await self._engine.call(self._list_partitioned_topics)

    def _create_partitioned_topic(self, name: str, partitions: int, now: float) -> CatalogOutcome:
        with self._engine.writing() as connection:
            query = select(_partitioned.c.name).where(_partitioned.c.name == name)
            if connection.execute(query).first() is not None:
                return CatalogOutcome.EXISTS
            if count_rows(connection, _partitioned) >= limits.catalog_records_max:
                return CatalogOutcome.FULL
            try:
                connection.execute(
                    _partitioned.insert().values(
                        name=name, partitions=partitions, created_at=now, version=1
                    )
                )
            except IntegrityError as error:
                # PostgreSQL: created by a concurrent transaction; the retry says EXISTS.
                raise Conflict from error
        return CatalogOutcome.DONE

    def _delete_partitioned_topic(self, name: str) -> CatalogOutcome:
        with self._engine.writing() as connection:
            deleted = connection.execute(delete(_partitioned).where(_partitioned.c.name == name))
            return CatalogOutcome.DONE if deleted.rowcount else CatalogOutcome.MISSING

    def _list_partitioned_topics(self) -> dict[str, int]:
        with self._engine.reading() as connection:
            rows = connection.execute(select(_partitioned.c.name, _partitioned.c.partitions))
            return {row.name: row.partitions for row in rows}
