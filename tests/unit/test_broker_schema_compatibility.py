"""Avro schema resolution and Pulsar's strategies (broker/schema_compatibility.py)."""

from __future__ import annotations

import json

import pytest

from georep.broker.meta.schemas import SchemaRecord
from georep.broker.schema_compatibility import (
    IncompatibleSchema,
    Strategy,
    can_read,
    check_compatible,
    parse_strategy,
)


def record(*fields: dict, name: str = "R") -> dict:
    return {"type": "record", "name": name, "fields": list(fields)}


A_INT = {"name": "a", "type": "int"}
A_LONG = {"name": "a", "type": "long"}
A_STRING = {"name": "a", "type": "string"}
B_DEFAULT = {"name": "b", "type": ["null", "string"], "default": None}
B_REQUIRED = {"name": "b", "type": "string"}

# (reader, writer, readable)
CASES = [
    (record(A_INT), record(A_INT), True),
    (record(A_LONG), record(A_INT), True),  # int promotes to long
    (record(A_INT), record(A_LONG), False),
    (record(A_INT, B_DEFAULT), record(A_INT), True),  # missing field with a default
    (record(A_INT, B_REQUIRED), record(A_INT), False),
    (record(A_INT), record(A_INT, B_REQUIRED), True),  # the writer's extra field is skipped
    (record(A_STRING), record(A_INT), False),
    (record(A_INT, name="Other"), record(A_INT), False),  # records match by name
    (record(A_INT, name="ns.R"), record(A_INT), True),  # ... unqualified
    ({"type": "enum", "name": "E", "symbols": ["X", "Y"]},
     {"type": "enum", "name": "E", "symbols": ["X"]}, True),
    ({"type": "enum", "name": "E", "symbols": ["X"]},
     {"type": "enum", "name": "E", "symbols": ["X", "Y"]}, False),
    (["null", "int"], "int", True),
    ("int", ["null", "int"], False),  # the writer may write null
    ({"type": "array", "items": "long"}, {"type": "array", "items": "int"}, True),
    ({"type": "map", "values": "int"}, {"type": "map", "values": "string"}, False),
    ({"type": "fixed", "name": "F", "size": 4}, {"type": "fixed", "name": "F", "size": 8}, False),
]  # fmt: skip


@pytest.mark.parametrize(("reader", "writer", "readable"), CASES)
def test_can_read(reader, writer, readable) -> None:
    assert can_read(reader, writer) is readable


def test_recursive_records_terminate() -> None:
    node = record({"name": "next", "type": ["null", "R"], "default": None}, A_INT)
    assert can_read(node, node)


def history(*schemas: dict, schema_type: str = "AVRO") -> list[SchemaRecord]:
    return [
        SchemaRecord(version, schema_type, json.dumps(schema).encode())
        for version, schema in enumerate(schemas)
    ]


@pytest.mark.parametrize(
    ("strategy", "old", "new", "accepted"),
    [
        (Strategy.BACKWARD, [record(A_INT)], record(A_INT, B_DEFAULT), True),
        (Strategy.BACKWARD, [record(A_INT)], record(A_INT, B_REQUIRED), False),
        (Strategy.FORWARD, [record(A_INT)], record(A_INT, B_REQUIRED), True),
        (Strategy.FORWARD, [record(A_INT, B_REQUIRED)], record(A_INT), False),
        (Strategy.FULL, [record(A_INT)], record(A_INT, B_DEFAULT), True),
        (Strategy.FULL, [record(A_INT)], record(A_LONG), False),  # long does not read as int
        (Strategy.ALWAYS_COMPATIBLE, [record(A_INT)], record(A_STRING), True),
        (Strategy.ALWAYS_INCOMPATIBLE, [record(A_INT)], record(A_INT, B_DEFAULT), False),
        # non-transitive checks the latest only; transitive every version
        (Strategy.BACKWARD, [record(A_STRING), record(A_INT)], record(A_LONG), True),
        (Strategy.BACKWARD_TRANSITIVE, [record(A_STRING), record(A_INT)], record(A_LONG), False),
    ],
)
def test_strategies(strategy, old, new, accepted) -> None:
    def check() -> None:
        check_compatible(strategy, history(*old), "AVRO", json.dumps(new).encode())

    if accepted:
        check()
    else:
        with pytest.raises(IncompatibleSchema):
            check()


def test_another_type_is_refused_unless_always_compatible() -> None:
    with pytest.raises(IncompatibleSchema):
        check_compatible(Strategy.FULL, history(record(A_INT)), "STRING", b"")
    check_compatible(Strategy.ALWAYS_COMPATIBLE, history(record(A_INT)), "STRING", b"")


def test_invalid_avro_is_refused_even_first() -> None:
    with pytest.raises(IncompatibleSchema, match="not a valid Avro schema"):
        check_compatible(Strategy.FULL, [], "JSON", b'{"type": "record"}')


def test_strategy_names() -> None:
    assert parse_strategy("UNDEFINED") is None
    assert parse_strategy("FULL_TRANSITIVE") is Strategy.FULL_TRANSITIVE
    with pytest.raises(ValueError, match="SIDEWAYS"):
        parse_strategy("SIDEWAYS")
