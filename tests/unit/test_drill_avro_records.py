"""The avro-evolving scenario's records and the check of each message by its schema
version: a copy naming the right version decodes; one naming no version, a version its
cluster lacks, or another schema's version (either way round) is undecodable, and the
report counts it by that version."""

from __future__ import annotations

import io
import json

import fastavro
import pytest

from georep.drill.avro_records import (
    SCHEMA_V1,
    SCHEMA_V2,
    SchemaLookup,
    WriterSchema,
    decode_problem,
    evolves_at,
    expected_fields,
    record_of,
    schema_of,
)
from georep.drill.delivery_log import AFTER, BEFORE, Delivery
from georep.drill.report import Produced, schemas_on_b
from georep.drill.verdict import verdict

MESSAGES = 10


class Registry:
    """A cluster's schemas by version, counting the lookups it answers."""

    def __init__(self, schemas: dict[int, WriterSchema]) -> None:
        self.schemas = schemas
        self.asked: list[int] = []

    def fetch(self, version: int) -> WriterSchema:
        self.asked.append(version)
        if version not in self.schemas:
            raise LookupError(f"no schema {version}")
        return self.schemas[version]


def avro(schema: dict) -> WriterSchema:
    return WriterSchema("AVRO", json.dumps(schema))


def encoded(index: int) -> bytes:
    buffer = io.BytesIO()
    drill_id = f"m{index:06d}"
    record = record_of(index, drill_id, "key-1", MESSAGES)
    fastavro.schemaless_writer(buffer, fastavro.parse_schema(schema_of(index, MESSAGES)), record)
    return buffer.getvalue()


def problem(index: int, version: int | None, registry: Registry) -> str | None:
    expected = expected_fields(index, f"m{index:06d}", "key-1")
    return decode_problem(encoded(index), version, SchemaLookup(registry.fetch), expected)


# B registered v2 first: its version 0 is v2, its version 1 is v1.
B = {0: avro(SCHEMA_V2), 1: avro(SCHEMA_V1)}


def test_the_schema_evolves_half_way():
    assert evolves_at(MESSAGES) == 5
    assert [schema_of(i, MESSAGES) is SCHEMA_V2 for i in range(MESSAGES)] == [False] * 5 + [
        True
    ] * 5
    assert record_of(7, "m000007", "k", MESSAGES) == {
        "id": "m000007",
        "index": 7,
        "key": "k",
        "note": "v2 m000007",
    }
    assert "note" not in record_of(2, "m000002", "k", MESSAGES)


@pytest.mark.parametrize(
    ("index", "version", "expect"),
    [
        (2, 1, None),  # v1 data under B's v1
        (7, 0, None),  # v2 data under B's v2
        (7, 1, "leaves 11 bytes undecoded"),  # v2 data labelled v1: the note is left over
        (2, 0, "does not decode with version 0"),  # v1 data labelled v2: runs out of bytes
        (2, 5, "version 5 not found"),
        (2, None, "no schema version"),
    ],
)
def test_decoded_by_its_version_or_said_why_not(index, version, expect):
    found = problem(index, version, Registry(B))
    if expect is None:
        assert found is None
    else:
        assert found is not None and expect in found


def test_another_record_under_the_right_schema_is_undecodable():
    registry = Registry(B)
    expected = expected_fields(3, "m000003", "key-2")  # the payload says key-1
    found = decode_problem(encoded(3), 1, SchemaLookup(registry.fetch), expected)
    assert found is not None and "not the record produced" in found


def test_a_schema_of_another_type_is_undecodable():
    registry = Registry({0: WriterSchema("JSON", json.dumps(SCHEMA_V1))})
    assert problem(1, 0, registry) == "version 0 is JSON, not AVRO"


def test_each_version_is_asked_once_and_a_missing_one_again():
    registry = Registry(B)
    lookup = SchemaLookup(registry.fetch)
    for index, version in ((1, 1), (2, 1), (7, 0), (8, 0), (1, 9), (2, 9)):
        expected = expected_fields(index, f"m{index:06d}", "key-1")
        decode_problem(encoded(index), version, lookup, expected)
    assert registry.asked == [1, 0, 9, 9]


def delivery(index: int, phase: str, version: int | None, undecodable: str | None) -> Delivery:
    return Delivery(
        mode="full",
        cluster="B" if phase == AFTER else "A",
        phase=phase,
        consumer="c0",
        topic="t",
        subscription="s",
        drill_id=f"m{index:06d}",
        index=index,
        key="k",
        message_id=f"9:{index}",
        origin_cluster="A",
        origin_position=f"3:{index}",
        batch_index=-1,
        delivered_at=index,
        payload_schema_version=version,
        undecodable=undecodable,
    )


def test_the_report_counts_undecodable_messages_by_their_version():
    produced = {f"3:{i}": Produced(f"m{i:06d}", i, "k", f"3:{i}") for i in range(6)}
    log = [
        delivery(0, BEFORE, None, "not counted: on A"),
        delivery(0, AFTER, 1, None),
        delivery(1, AFTER, 1, None),
        delivery(2, AFTER, 1, "leaves 11 bytes undecoded"),  # v2 data labelled v1
        delivery(2, AFTER, 1, "leaves 11 bytes undecoded"),  # delivered twice: one message
        delivery(3, AFTER, 0, None),
        delivery(4, AFTER, None, "no schema version"),
    ]
    versions, undecodable = schemas_on_b(produced, log)
    assert versions == {"0": 1, "1": 3, "none": 1}
    assert undecodable == {
        "count": 2,
        "sample": ["m000002", "m000004"],
        "by_version": {"1": 1, "none": 1},
        "reasons": ["1: leaves 11 bytes undecoded", "none: no schema version"],
    }
    block = {"duplicates": {"count": 0}, "lost": {"count": 0}, "undecodable_on_B": undecodable}
    judged = verdict("full", block)
    assert not judged.passed and judged.undecodable == 2
    assert judged.headline().endswith(", 2 undecodable on B")
    assert "(1 of version 1, 1 of version none)" in " ".join(judged.why)
    clean = verdict("full", {**block, "undecodable_on_B": {"count": 0}})
    assert clean.passed and "decoded by its schema version" in " ".join(clean.why)
    assert verdict("full", {**block, "undecodable_on_B": None}).headline().endswith("replicated)")
