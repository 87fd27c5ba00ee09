"""The broker's schema registry, as Pulsar serves it: a topic's schemas, versioned under
its base name (the partitions of a partitioned topic share them), held in the metadata
store (``broker/meta/schemas.py``), checked by the namespace's compatibility strategy
(``schema_compatibility.py``). The binary protocol (PRODUCER, SUBSCRIBE:
``connection.py``; GET_SCHEMA, GET_OR_CREATE_SCHEMA: ``queries.py``) and the admin REST
(``admin/schema_admin.py``) both use it, and it keeps nothing in memory: every broker and
admin process reads the same rows.

On the wire a version is 8 bytes, a big-endian signed long (Pulsar's LongSchemaVersion);
the client stamps the version its producer was given on every message it sends
(``schema_version`` in the message's metadata), and the broker stores it as sent.

What a producer's schema does, as on Pulsar:

- no schema (a bytes producer): accepted, no version; messages carry none;
- a schema equal (type and data) to a version in the history: that version, no check;
- any other: checked against the history by the namespace's strategy; stored as the next
  version, or the producer is refused with ``IncompatibleSchema``.

A consumer's schema: ``AUTO_CONSUME`` (and none) are accepted as they are; the consumer
resolves each message's schema by its version (GET_SCHEMA). Another schema on a topic
with a history is checked as a new one would be, and not stored; on a topic without one
it is registered. (Pulsar registers it only while the topic is idle, with no producer,
consumer or entry, and refuses the consumer otherwise; georep registers it either way.)

Example: a topic whose namespace is BACKWARD holds v0 ``{a: int}``; a producer with
``{a: int, b: string = ""}`` gets v1 (it reads v0's data); one with ``{a: string}`` is
refused.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence

from georep.broker.meta.schemas import SchemaRecord, SchemaRepository, SchemaVersionsFull
from georep.broker.schema_compatibility import (
    AVRO_BASED,
    DEFAULT_STRATEGY,
    IncompatibleSchema,
    Strategy,
    avro_schema,
    check_compatible,
    parse_strategy,
)
from georep.domain.topic_name import TopicName
from georep.storage.errors import InvalidArgument
from georep.wire import pulsar_wire_pb2 as pb

__all__ = [
    "IncompatibleSchema",
    "SchemaRegistry",
    "decode_version",
    "encode_version",
    "record_of",
    "wire_schema",
]

_VERSION = struct.Struct(">q")
#: Types a consumer may name without a schema of its own to check.
_CONSUMER_ANY = frozenset({"NONE", "AUTO_CONSUME"})


def encode_version(version: int) -> bytes:
    return _VERSION.pack(version)


def decode_version(data: bytes) -> int | None:
    """The version 8 bytes name; None for anything else (absent, or not a version)."""
    if len(data) != _VERSION.size:
        return None
    version: int = _VERSION.unpack(data)[0]
    return version if version >= 0 else None


def type_name(schema: pb.Schema) -> str:
    return pb.Schema.Type.Name(schema.type)


def wire_schema(topic: TopicName, record: SchemaRecord) -> pb.Schema:
    """A stored version as the protocol's Schema (GET_SCHEMA's answer)."""
    schema = pb.Schema(name=str(topic.base), data=record.data, type=record.schema_type)
    for key, value in sorted(record.properties.items()):
        schema.properties.add(key=key, value=value)
    return schema


def record_of(schema: pb.Schema) -> tuple[str, bytes, dict[str, str]]:
    """(type, data, properties) of a protocol Schema."""
    return type_name(schema), schema.data, {kv.key: kv.value for kv in schema.properties}


class SchemaRegistry:
    """Topics' schemas and namespaces' strategies over the metadata store."""

    def __init__(self, repository: SchemaRepository) -> None:
        self._repository = repository

    async def strategy(self, namespace: str) -> Strategy:
        stored = await self._repository.strategy(namespace)
        return DEFAULT_STRATEGY if stored is None else Strategy(stored)

    async def strategy_name(self, namespace: str) -> str:
        """The name Pulsar answers: ``UNDEFINED`` while unset."""
        stored = await self._repository.strategy(namespace)
        return "UNDEFINED" if stored is None else stored

    async def set_strategy(self, namespace: str, name: str) -> None:
        """ValueError for a name Pulsar does not know."""
        strategy = parse_strategy(name)
        await self._repository.set_strategy(namespace, "UNDEFINED" if strategy is None else name)

    async def history(self, topic: TopicName) -> list[SchemaRecord]:
        return await self._repository.history(str(topic.base))

    async def get(self, topic: TopicName, version: int | None = None) -> SchemaRecord | None:
        return await self._repository.get(str(topic.base), version)

    async def register(
        self, topic: TopicName, schema_type: str, data: bytes, properties: Mapping[str, str]
    ) -> SchemaRecord:
        """The version of this schema on ``topic``, stored if new and compatible;
        IncompatibleSchema otherwise."""
        strategy = await self.strategy(topic.namespace)

        def check(history: Sequence[SchemaRecord]) -> None:
            check_compatible(strategy, history, schema_type, data)

        if schema_type in AVRO_BASED:
            avro_schema(data)  # refused before any transaction if not a schema at all
        try:
            record, _created = await self._repository.register(
                str(topic.base), schema_type, data, properties, check
            )
        except (InvalidArgument, SchemaVersionsFull) as error:
            raise IncompatibleSchema(str(error)) from error
        return record

    async def compatible(self, topic: TopicName, schema_type: str, data: bytes) -> Strategy:
        """The strategy, if the schema could join the topic's history (equal to a
        version or compatible); IncompatibleSchema otherwise. Stores nothing."""
        strategy = await self.strategy(topic.namespace)
        history = await self.history(topic)
        if not any(record.same_schema(schema_type, data) for record in history):
            check_compatible(strategy, history, schema_type, data)
        return strategy

    async def for_consumer(self, topic: TopicName, schema: pb.Schema) -> None:
        """Accept a subscriber's schema (see the module's docstring) or raise."""
        schema_type, data, properties = record_of(schema)
        if schema_type in _CONSUMER_ANY:
            return
        if await self.history(topic):
            await self.compatible(topic, schema_type, data)
        else:
            await self.register(topic, schema_type, data, properties)

    async def delete(self, topic: TopicName) -> int | None:
        """The deletion's version, None when the topic had no schema."""
        return await self._repository.delete(str(topic.base))
