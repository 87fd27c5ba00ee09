"""The gateway's remote clusters and replication policies in its metadata store
(``gateway/``): policies per namespace or topic, CAS'd on their versions."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.engine import Connection, Row
from sqlalchemy.exc import IntegrityError

from georep import limits
from georep.gateway.meta.models import (
    RemoteClusterRow,
    ReplicationPolicyRow,
    url_chars_max,
)
from georep.storage.errors import (
    BadVersion,
    InvalidArgument,
)
from georep.storage.meta.checks import check_int, check_name, check_names
from georep.storage.meta.engine import Conflict, MetadataEngine, count_rows, table_of

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


_remote_clusters = table_of(RemoteClusterRow)
_replication_policies = table_of(ReplicationPolicyRow)


def _check_scope(scope: object) -> str:
    if not isinstance(scope, str) or scope not in POLICY_SCOPES:
        raise InvalidArgument(f"policy scope must be one of {POLICY_SCOPES}, got {scope!r}")
    return scope


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
        clusters=tuple(sorted(check_names("cluster", row.clusters))),
        updated_at=row.updated_at,
        version=row.version,
    )


class ReplicationPolicyRepository:
    """The gateway's remote clusters and replication policies."""

    def __init__(self, engine: MetadataEngine) -> None:
        self._engine = engine

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
            check_name("cluster", name)
            if not isinstance(urls, tuple) or len(urls) != 2:
                raise InvalidArgument(f"cluster {name}: need (service URL, admin URL)")
            checked[name] = (_check_url("service URL", urls[0]), _check_url("admin URL", urls[1]))
        return await self._engine.call(self._sync_remote_clusters, checked, self._engine.clock())

    async def list_remote_clusters(self) -> list[RemoteClusterRecord]:
        return await self._engine.call(self._list_remote_clusters)

    async def get_replication_policy(self, scope: str, name: str) -> ReplicationPolicyRecord | None:
        _check_scope(scope)
        check_name("policy name", name)
        return await self._engine.call(self._get_replication_policy, scope, name)

    async def list_replication_policies(
        self, scope: str | None = None
    ) -> list[ReplicationPolicyRecord]:
        """Every policy (of ``scope`` when given), sorted by scope and name."""
        if scope is not None:
            _check_scope(scope)
        return await self._engine.call(self._list_replication_policies, scope)

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
        check_name("policy name", name)
        names = sorted(check_names("cluster", clusters))
        if len(names) > limits.remote_clusters_count_max:
            raise InvalidArgument(f"a policy names at most {limits.remote_clusters_count_max}")
        if expected_version is not None:
            check_int("expected version", expected_version, 0)
        return await self._engine.call(
            self._engine.retrying,
            self._put_replication_policy,
            scope,
            name,
            names,
            expected_version,
            self._engine.clock(),
        )

    async def delete_replication_policy(
        self, scope: str, name: str, *, expected_version: int | None = None
    ) -> bool:
        """Delete a policy; False when there was none. With ``expected_version`` only
        that version is deleted (BadVersion otherwise)."""
        _check_scope(scope)
        check_name("policy name", name)
        if expected_version is not None:
            check_int("expected version", expected_version, 1)
        return await self._engine.call(
            self._delete_replication_policy, scope, name, expected_version
        )

    # --- gateway, in a worker thread --------------------------------------------------
    def _sync_remote_clusters(
        self, clusters: dict[str, tuple[str, str]], now: float
    ) -> list[RemoteClusterRecord]:
        table = _remote_clusters
        with self._engine.writing() as connection:
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
        with self._engine.reading() as connection:
            rows = connection.execute(select(table).order_by(table.c.name)).all()
        return [_remote_cluster_from_row(row) for row in rows]

    def _get_replication_policy(self, scope: str, name: str) -> ReplicationPolicyRecord | None:
        with self._engine.reading() as connection:
            row = _select_policy(connection, scope, name)
        return None if row is None else _policy_from_row(row)

    def _list_replication_policies(self, scope: str | None) -> list[ReplicationPolicyRecord]:
        table = _replication_policies
        query = select(table).order_by(table.c.scope, table.c.name)
        if scope is not None:
            query = query.where(table.c.scope == scope)
        with self._engine.reading() as connection:
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
        with self._engine.writing() as connection:
            row = _select_policy(connection, scope, name)
            if row is None:
                if expected_version not in (None, 0):
                    raise BadVersion(f"{scope} policy {name}: no version {expected_version}")
                if count_rows(connection, table) >= limits.replication_policies_count_max:
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
                    raise Conflict from error
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
                raise Conflict
        return ReplicationPolicyRecord(scope, name, tuple(clusters), now, row.version + 1)

    def _delete_replication_policy(
        self, scope: str, name: str, expected_version: int | None
    ) -> bool:
        table = _replication_policies
        conditions = [table.c.scope == scope, table.c.name == name]
        with self._engine.writing() as connection:
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
