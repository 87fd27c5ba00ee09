"""The gateway's subscription-sync policies in its metadata store (``gateway/``): which
subscriptions a namespace or topic syncs beside those a consumer flagged, CAS'd on their
versions, stored and versioned exactly as ``replication_policies.py`` stores its own.

A policy is ``all`` (every subscription) or ``flagged`` with an optional ``pattern``
(the flagged ones, and those whose whole name matches the regular expression:
``names.check_subscription_pattern``). ``flagged`` without a pattern is a policy too: on
a topic it takes the topic back to the flag alone under a namespace's ``all``. Example:
``put_policy("namespace", "shop/eu", "flagged", "orders-.*")`` syncs ``orders-eu`` and
every flagged subscription of ``shop/eu``'s topics, unless a topic has its own policy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.engine import Connection, Row
from sqlalchemy.exc import IntegrityError

from georep import limits
from georep.domain.names import InvalidName, check_subscription_pattern
from georep.gateway.meta.models import SubscriptionSyncPolicyRow, pattern_chars_max
from georep.gateway.meta.replication_policies import POLICY_SCOPES
from georep.invariant import invariant
from georep.storage.errors import BadVersion, InvalidArgument
from georep.storage.meta.checks import check_int, check_name
from georep.storage.meta.engine import Conflict, MetadataEngine, count_rows, table_of

#: What a policy syncs: every subscription, or the flagged ones (and the pattern's).
SUBSCRIPTION_CHOICES = ("all", "flagged")

invariant(limits.sync_subscription_pattern_chars_max <= pattern_chars_max)


@dataclass(frozen=True)
class SubscriptionSyncPolicyRecord:
    """Which subscriptions a namespace or topic syncs (the module's docstring)."""

    scope: str
    name: str
    subscriptions: str
    pattern: str | None
    updated_at: float
    version: int


_policies = table_of(SubscriptionSyncPolicyRow)


def check_choice(subscriptions: object, pattern: object) -> tuple[str, str | None]:
    """``(subscriptions, pattern)`` if they make a policy; InvalidArgument says why not."""
    if not isinstance(subscriptions, str) or subscriptions not in SUBSCRIPTION_CHOICES:
        raise InvalidArgument(
            f"subscriptions must be one of {SUBSCRIPTION_CHOICES}, got {subscriptions!r}"
        )
    if pattern is None:
        return subscriptions, None
    if subscriptions == "all":
        raise InvalidArgument(
            'a pattern beside subscriptions "all": all takes every subscription;'
            ' use "flagged" (the flag or the pattern) or drop the pattern'
        )
    try:
        return subscriptions, check_subscription_pattern(pattern).pattern
    except InvalidName as error:
        raise InvalidArgument(str(error)) from None


def _check_scope(scope: object) -> str:
    if not isinstance(scope, str) or scope not in POLICY_SCOPES:
        raise InvalidArgument(f"policy scope must be one of {POLICY_SCOPES}, got {scope!r}")
    return scope


def _select(connection: Connection, scope: str, name: str) -> Row[Any] | None:
    table = _policies
    query = select(table).where(table.c.scope == scope, table.c.name == name)
    return connection.execute(query).one_or_none()


def _from_row(row: Row[Any]) -> SubscriptionSyncPolicyRecord:
    return SubscriptionSyncPolicyRecord(
        scope=row.scope,
        name=row.name,
        subscriptions=row.subscriptions,
        pattern=row.pattern,
        updated_at=row.updated_at,
        version=row.version,
    )


class SubscriptionSyncPolicyRepository:
    """The gateway's subscription-sync policies."""

    def __init__(self, engine: MetadataEngine) -> None:
        self._engine = engine

    async def get_policy(self, scope: str, name: str) -> SubscriptionSyncPolicyRecord | None:
        _check_scope(scope)
        check_name("policy name", name)
        return await self._engine.call(self._get_policy, scope, name)

    async def list_policies(self, scope: str | None = None) -> list[SubscriptionSyncPolicyRecord]:
        """Every policy (of ``scope`` when given), sorted by scope and name: one read,
        whatever the number of topics they cover."""
        if scope is not None:
            _check_scope(scope)
        return await self._engine.call(self._list_policies, scope)

    async def put_policy(
        self,
        scope: str,
        name: str,
        subscriptions: str,
        pattern: str | None = None,
        *,
        expected_version: int | None = None,
    ) -> SubscriptionSyncPolicyRecord:
        """Create or replace a policy; returns it as stored. ``expected_version`` as in
        ``ReplicationPolicyRepository.put_replication_policy``: None replaces whatever is
        there, 0 creates only, n >= 1 replaces only version n (BadVersion otherwise).
        InvalidArgument for a bad choice or pattern, and past
        ``limits.sync_policies_count_max`` policies."""
        _check_scope(scope)
        check_name("policy name", name)
        subscriptions, pattern = check_choice(subscriptions, pattern)
        if expected_version is not None:
            check_int("expected version", expected_version, 0)
        return await self._engine.call(
            self._engine.retrying,
            self._put_policy,
            scope,
            name,
            subscriptions,
            pattern,
            expected_version,
            self._engine.clock(),
        )

    async def delete_policy(
        self, scope: str, name: str, *, expected_version: int | None = None
    ) -> bool:
        """Delete a policy; False when there was none. With ``expected_version`` only
        that version is deleted (BadVersion otherwise)."""
        _check_scope(scope)
        check_name("policy name", name)
        if expected_version is not None:
            check_int("expected version", expected_version, 1)
        return await self._engine.call(self._delete_policy, scope, name, expected_version)

    # --- in a worker thread -------------------------------------------------------------
    def _get_policy(self, scope: str, name: str) -> SubscriptionSyncPolicyRecord | None:
        with self._engine.reading() as connection:
            row = _select(connection, scope, name)
        return None if row is None else _from_row(row)

    def _list_policies(self, scope: str | None) -> list[SubscriptionSyncPolicyRecord]:
        table = _policies
        query = select(table).order_by(table.c.scope, table.c.name)
        if scope is not None:
            query = query.where(table.c.scope == scope)
        with self._engine.reading() as connection:
            rows = connection.execute(query).all()
        return [_from_row(row) for row in rows]

    def _put_policy(
        self,
        scope: str,
        name: str,
        subscriptions: str,
        pattern: str | None,
        expected_version: int | None,
        now: float,
    ) -> SubscriptionSyncPolicyRecord:
        table = _policies
        values = {"subscriptions": subscriptions, "pattern": pattern, "updated_at": now}
        with self._engine.writing() as connection:
            row = _select(connection, scope, name)
            if row is None:
                if expected_version not in (None, 0):
                    raise BadVersion(f"{scope} sync policy {name}: no version {expected_version}")
                if count_rows(connection, table) >= limits.sync_policies_count_max:
                    raise InvalidArgument(
                        f"at most {limits.sync_policies_count_max} subscription-sync policies"
                    )
                try:
                    connection.execute(
                        table.insert().values(scope=scope, name=name, version=1, **values)
                    )
                except IntegrityError as error:
                    if expected_version == 0:
                        raise BadVersion(f"{scope} sync policy {name} exists") from error
                    raise Conflict from error
                return SubscriptionSyncPolicyRecord(scope, name, subscriptions, pattern, now, 1)
            if expected_version is not None and expected_version != row.version:
                raise BadVersion(
                    f"{scope} sync policy {name} is at version {row.version},"
                    f" not {expected_version}"
                )
            result = connection.execute(
                update(table)
                .where(table.c.scope == scope, table.c.name == name, table.c.version == row.version)
                .values(version=row.version + 1, **values)
            )
            if result.rowcount != 1:
                if expected_version is not None:
                    raise BadVersion(f"{scope} sync policy {name} changed meanwhile")
                raise Conflict
        return SubscriptionSyncPolicyRecord(
            scope, name, subscriptions, pattern, now, row.version + 1
        )

    def _delete_policy(self, scope: str, name: str, expected_version: int | None) -> bool:
        table = _policies
        conditions = [table.c.scope == scope, table.c.name == name]
        with self._engine.writing() as connection:
            row = _select(connection, scope, name)
            if row is None:
                if expected_version is not None:
                    raise BadVersion(f"{scope} sync policy {name}: no version {expected_version}")
                return False
            if expected_version is not None:
                if row.version != expected_version:
                    raise BadVersion(
                        f"{scope} sync policy {name} is at version {row.version},"
                        f" not {expected_version}"
                    )
                conditions.append(table.c.version == expected_version)
            result = connection.execute(delete(table).where(*conditions))
        return result.rowcount == 1
