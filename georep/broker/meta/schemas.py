"""Topic schemas and each namespace's compatibility strategy (the broker's schema
registry, ``broker/schema_registry.py``, and the admin REST).

A topic's schemas are versions 0, 1, 2, ... under its base name. Deleting the schema
writes a version of its own (a tombstone), as Pulsar does: the versions before it no
longer count (not listed, not checked against), and the next schema registered starts a
new history at the next number, so a version number never names two schemas. Example:
AVRO v0, AVRO v1, delete (v2), JSON v3: the history is [v3]; ``get(topic, 1)`` is None.

Registering is one write transaction: read the history, answer the version of an equal
schema (same type and data) if there is one, else run the caller's compatibility check on
the history and insert the next version. Two brokers registering at once both insert
the same number; the loser's primary key conflicts and it runs again (``retrying``),
finding the winner's schema (equal: its version) or checking against it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from georep import limits
from georep.broker.meta.models import SchemaCompatibilityRow, TopicSchemaRow
from georep.storage.errors import InvalidArgument
from georep.storage.meta.checks import check_int, check_name
from georep.storage.meta.engine import Conflict, MetadataEngine, table_of

_schemas = table_of(TopicSchemaRow)
_strategies = table_of(SchemaCompatibilityRow)


@dataclass(frozen=True)
class SchemaRecord:
    """One stored schema version. ``schema_type`` is the protocol's type name (``AVRO``,
    ``JSON``, ``STRING``, ...)."""

    version: int
    schema_type: str
    data: bytes
    properties: Mapping[str, str] = field(default_factory=dict)
    created_at: float = 0.0

    def same_schema(self, schema_type: str, data: bytes) -> bool:
        return self.schema_type == schema_type and self.data == data


class SchemaVersionsFull(Exception):
    """The topic reached ``limits.schema_versions_per_topic_max`` versions."""


#: Called with the live history (oldest first) before a new version is stored; raises to
#: refuse it (the broker's compatibility check).
CompatibilityCheck = Callable[[Sequence[SchemaRecord]], None]


class SchemaRepository:
    """Topics' schema versions and namespaces' compatibility strategies."""

    def __init__(self, engine: MetadataEngine) -> None:
        self._engine = engine

    async def history(self, topic: str) -> list[SchemaRecord]:
        """The versions since the last deletion, oldest first (empty: no schema)."""
        check_name("topic", topic)
        return await self._engine.call(self._history, topic)

    async def get(self, topic: str, version: int | None = None) -> SchemaRecord | None:
        """Version ``version`` if it is live (None: the latest), else None."""
        check_name("topic", topic)
        if version is not None:
            check_int("schema version", version, 0)
        history = await self.history(topic)
        if version is None:
            return history[-1] if history else None
        return next((record for record in history if record.version == version), None)

    async def register(
        self,
        topic: str,
        schema_type: str,
        data: bytes,
        properties: Mapping[str, str],
        check: CompatibilityCheck,
    ) -> tuple[SchemaRecord, bool]:
        """The version of an equal schema in the history (and False), or a new version
        after ``check`` accepted the history (and True). SchemaVersionsFull at
        ``limits.schema_versions_per_topic_max``; whatever ``check`` raises passes."""
        check_name("topic", topic)
        check_name("schema type", schema_type)
        _check_schema(data, properties)
        return await self._engine.call(
            self._engine.retrying,
            self._register,
            topic,
            schema_type,
            bytes(data),
            dict(properties),
            check,
            self._engine.clock(),
        )

    async def delete(self, topic: str) -> int | None:
        """Write a deletion if the topic has a schema; its version, or None if it had none."""
        check_name("topic", topic)
        return await self._engine.call(
            self._engine.retrying, self._delete, topic, self._engine.clock()
        )

    async def strategy(self, namespace: str) -> str | None:
        """The namespace's strategy name, None when unset."""
        check_name("namespace", namespace)
        return await self._engine.call(self._strategy, namespace)

    async def set_strategy(self, namespace: str, strategy: str) -> None:
        check_name("namespace", namespace)
        check_name("strategy", strategy)
        await self._engine.call(self._engine.retrying, self._set_strategy, namespace, strategy)

    # --- in a worker thread ---------------------------------------------------------
    def _history(self, topic: str) -> list[SchemaRecord]:
        with self._engine.reading() as connection:
            return _live(connection, topic)[0]

    def _register(
        self,
        topic: str,
        schema_type: str,
        data: bytes,
        properties: dict[str, str],
        check: CompatibilityCheck,
        now: float,
    ) -> tuple[SchemaRecord, bool]:
        with self._engine.writing() as connection:
            history, next_version = _live(connection, topic)
            for record in history:
                if record.same_schema(schema_type, data):
                    return record, False
            check(history)
            if next_version >= limits.schema_versions_per_topic_max:
                raise SchemaVersionsFull(
                    f"{topic} has {limits.schema_versions_per_topic_max} schema versions,"
                    " the maximum"
                )
            record = SchemaRecord(next_version, schema_type, data, properties, now)
            _insert(connection, topic, record, deleted=False)
        return record, True

    def _delete(self, topic: str, now: float) -> int | None:
        with self._engine.writing() as connection:
            history, next_version = _live(connection, topic)
            if not history:
                return None
            _insert(connection, topic, SchemaRecord(next_version, "NONE", b"", {}, now), True)
        return next_version

    def _strategy(self, namespace: str) -> str | None:
        with self._engine.reading() as connection:
            return connection.execute(
                select(_strategies.c.strategy).where(_strategies.c.namespace == namespace)
            ).scalar_one_or_none()

    def _set_strategy(self, namespace: str, strategy: str) -> None:
        columns = _strategies.c
        with self._engine.writing() as connection:
            row = connection.execute(
                select(columns.version).where(columns.namespace == namespace)
            ).scalar_one_or_none()
            try:
                if row is None:
                    values = {"namespace": namespace, "strategy": strategy, "version": 1}
                    connection.execute(_strategies.insert().values(**values))
                    return
                changed = connection.execute(
                    update(_strategies)
                    .where(columns.namespace == namespace, columns.version == row)
                    .values(strategy=strategy, version=row + 1)
                )
            except IntegrityError as error:
                raise Conflict from error
            if changed.rowcount != 1:
                raise Conflict


def _live(connection: Connection, topic: str) -> tuple[list[SchemaRecord], int]:
    """The versions after the last deletion, and the next version number."""
    rows = connection.execute(
        select(_schemas).where(_schemas.c.topic == topic).order_by(_schemas.c.version)
    ).all()
    history: list[SchemaRecord] = []
    for row in rows:
        if row.deleted:
            history = []
        else:
            history.append(
                SchemaRecord(
                    row.version, row.schema_type, row.data, dict(row.properties), row.created_at
                )
            )
    return history, (rows[-1].version + 1 if rows else 0)


def _insert(connection: Connection, topic: str, record: SchemaRecord, deleted: bool) -> None:
    try:
        connection.execute(
            _schemas.insert().values(
                topic=topic,
                version=record.version,
                schema_type=record.schema_type,
                data=record.data,
                properties=dict(record.properties),
                deleted=deleted,
                created_at=record.created_at,
            )
        )
    except IntegrityError as error:  # another broker took this version number meanwhile
        raise Conflict from error


def _check_schema(data: Any, properties: Any) -> None:
    if not isinstance(data, bytes | bytearray) or len(data) > limits.schema_data_bytes_max:
        raise InvalidArgument(f"schema data must be at most {limits.schema_data_bytes_max} bytes")
    if not isinstance(properties, Mapping) or len(properties) > limits.schema_properties_count_max:
        raise InvalidArgument(
            f"schema properties must be a mapping of at most {limits.schema_properties_count_max}"
        )
    for key, value in properties.items():
        if not (
            isinstance(key, str)
            and isinstance(value, str)
            and len(key) <= limits.schema_property_chars_max
            and len(value) <= limits.schema_property_chars_max
        ):
            raise InvalidArgument(
                "schema properties must map strings of at most"
                f" {limits.schema_property_chars_max} characters to such strings"
            )
