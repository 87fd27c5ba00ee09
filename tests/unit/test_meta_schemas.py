"""MetadataStore topic schemas (revision 0007), on SQLite and, with
GEOREP_TEST_POSTGRES_URL, PostgreSQL: versions, equal schemas, deletions as versions,
concurrent registrations, the limit, and checks on the way in."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from georep import limits
from georep.broker.meta.schemas import SchemaRecord, SchemaVersionsFull
from georep.broker.meta.store import BrokerRepositories
from georep.storage.errors import InvalidArgument

TOPIC = "persistent://public/default/t"


def accept(_history: Sequence[SchemaRecord]) -> None:
    pass


class Refused(Exception):
    pass


def refuse(_history: Sequence[SchemaRecord]) -> None:
    raise Refused


async def test_versions_equal_schemas_and_deletion(broker_meta: BrokerRepositories) -> None:
    schemas = broker_meta.schemas
    assert await schemas.history(TOPIC) == [] and await schemas.get(TOPIC) is None
    v0, created = await schemas.register(TOPIC, "AVRO", b"a", {"k": "v"}, accept)
    assert (v0.version, created, dict(v0.properties)) == (0, True, {"k": "v"})
    v1, _ = await schemas.register(TOPIC, "AVRO", b"b", {}, accept)
    again, created = await schemas.register(TOPIC, "AVRO", b"a", {}, refuse)  # no check
    assert (v1.version, again.version, created) == (1, 0, False)
    assert [r.version for r in await schemas.history(TOPIC)] == [0, 1]
    with pytest.raises(Refused):  # the check refuses: nothing stored
        await schemas.register(TOPIC, "AVRO", b"c", {}, refuse)
    assert (await schemas.get(TOPIC)) == v1
    assert await schemas.delete(TOPIC) == 2
    assert await schemas.delete(TOPIC) is None
    assert await schemas.get(TOPIC) is None and await schemas.get(TOPIC, 0) is None
    seen: list[Sequence[SchemaRecord]] = []
    v3, _ = await schemas.register(TOPIC, "JSON", b"a", {}, seen.append)
    assert v3.version == 3 and seen == [[]]  # a new history, checked against nothing


async def test_concurrent_registrations_take_distinct_versions(
    broker_meta: BrokerRepositories,
) -> None:
    schemas = broker_meta.schemas
    results = await asyncio.gather(
        *(schemas.register(TOPIC, "AVRO", bytes([i]), {}, accept) for i in range(5))
    )
    assert sorted(record.version for record, _ in results) == [0, 1, 2, 3, 4]


async def test_the_version_limit(broker_meta: BrokerRepositories, monkeypatch) -> None:
    monkeypatch.setattr(limits, "schema_versions_per_topic_max", 2)
    schemas = broker_meta.schemas
    await schemas.register(TOPIC, "AVRO", b"a", {}, accept)
    await schemas.register(TOPIC, "AVRO", b"b", {}, accept)
    with pytest.raises(SchemaVersionsFull):
        await schemas.register(TOPIC, "AVRO", b"c", {}, accept)
    assert (await schemas.register(TOPIC, "AVRO", b"a", {}, accept))[0].version == 0


async def test_bad_input_touches_nothing(broker_meta: BrokerRepositories) -> None:
    schemas = broker_meta.schemas
    too_big = bytes(limits.schema_data_bytes_max + 1)
    cases: list[tuple[bytes, Any]] = [(too_big, {}), (b"a", {"k": 1}), (b"a", {"k" * 5000: "v"})]
    for data, properties in cases:
        with pytest.raises(InvalidArgument):
            await schemas.register(TOPIC, "AVRO", data, properties, accept)
    assert await schemas.history(TOPIC) == []


async def test_strategies(broker_meta: BrokerRepositories) -> None:
    schemas = broker_meta.schemas
    assert await schemas.strategy("public/default") is None
    await schemas.set_strategy("public/default", "BACKWARD")
    await schemas.set_strategy("public/default", "FULL_TRANSITIVE")
    assert await schemas.strategy("public/default") == "FULL_TRANSITIVE"
    assert await schemas.strategy("public/other") is None
