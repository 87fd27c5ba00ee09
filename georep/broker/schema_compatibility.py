"""Schema compatibility, as Pulsar decides it: a namespace's strategy and the Avro rules
of schema resolution. No I/O.

Pulsar's strategies say which way data must stay readable when a new schema joins a
topic's history:

- ``BACKWARD``: the new schema reads data written with the latest one (consumers upgrade
  first); ``FORWARD``: the latest reads data written with the new one (producers upgrade
  first); ``FULL`` (Pulsar's default): both. The ``_TRANSITIVE`` forms hold the same
  against every version of the history, not only the latest.
- ``ALWAYS_COMPATIBLE``: anything goes; ``ALWAYS_INCOMPATIBLE``: only a schema equal to
  one already stored (which never reaches this check: the registry answers its version).

AVRO and JSON schemas are both Avro record definitions (Pulsar's JSON schema is one),
parsed by ``fastavro`` (which refuses what is not valid Avro) and compared by the Avro
specification's resolution rules: a reader reads a writer when their types match or
promote (int to long, float or double; long to float or double; float to double; string
and bytes both ways), records and enums and fixed types match by unqualified name or the
reader's aliases, every field the reader has and the writer lacks has a default, every
enum symbol the writer may write is the reader's or the reader has a default, and every
branch of a writer's union is readable. Example, under BACKWARD: v0 ``{a: int}``; a new
schema ``{a: long, b: string = ""}`` reads v0's data (a promotes, b has a default) and is
accepted; ``{a: int, c: string}`` is refused (c has no default). Schemas of another type
than the latest are refused unless ALWAYS_COMPATIBLE; two schemas of the same other type
(STRING, PROTOBUF, ...) are compatible.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Sequence
from typing import Any

import fastavro

from georep.broker.errors import BrokerError
from georep.broker.meta.schemas import SchemaRecord
from georep.wire import pulsar_wire_pb2 as pb


class IncompatibleSchema(BrokerError):
    """Pulsar's ``IncompatibleSchema``: the schema breaks the namespace's strategy, or is
    not a schema of its type at all."""

    server_error = pb.INCOMPATIBLE_SCHEMA


class Strategy(enum.Enum):
    ALWAYS_INCOMPATIBLE = "ALWAYS_INCOMPATIBLE"
    ALWAYS_COMPATIBLE = "ALWAYS_COMPATIBLE"
    BACKWARD = "BACKWARD"
    FORWARD = "FORWARD"
    FULL = "FULL"
    BACKWARD_TRANSITIVE = "BACKWARD_TRANSITIVE"
    FORWARD_TRANSITIVE = "FORWARD_TRANSITIVE"
    FULL_TRANSITIVE = "FULL_TRANSITIVE"

    @property
    def transitive(self) -> bool:
        return self.value.endswith("_TRANSITIVE")

    @property
    def backward(self) -> bool:
        """The new schema must read the old ones' data."""
        return self.value.startswith(("BACKWARD", "FULL"))

    @property
    def forward(self) -> bool:
        """The old schemas must read the new one's data."""
        return self.value.startswith(("FORWARD", "FULL"))


#: Pulsar's default when a namespace sets none (``UNDEFINED``).
DEFAULT_STRATEGY = Strategy.FULL
#: Types whose data is an Avro record definition.
AVRO_BASED = frozenset({"AVRO", "JSON"})


def parse_strategy(text: object) -> Strategy | None:
    """A strategy from its Pulsar name; None for ``UNDEFINED`` (the default applies)."""
    if text == "UNDEFINED":
        return None
    try:
        return Strategy(text)
    except ValueError:
        names = ", ".join(["UNDEFINED", *(strategy.value for strategy in Strategy)])
        raise ValueError(
            f"unknown schema compatibility strategy {text!r}: one of {names}"
        ) from None


def avro_schema(data: bytes) -> Any:
    """The parsed Avro definition of an AVRO or JSON schema's data; IncompatibleSchema
    when it is not one."""
    try:
        definition = json.loads(data)
        fastavro.parse_schema(definition, _write_hint=False)
    except (ValueError, TypeError, KeyError, fastavro.schema.SchemaParseException) as error:
        raise IncompatibleSchema(f"not a valid Avro schema: {error}") from error
    return definition


def check_compatible(
    strategy: Strategy, history: Sequence[SchemaRecord], schema_type: str, data: bytes
) -> None:
    """Raise IncompatibleSchema unless a new schema may join ``history`` (oldest first)."""
    new = avro_schema(data) if schema_type in AVRO_BASED else None
    if not history or strategy is Strategy.ALWAYS_COMPATIBLE:
        return
    if strategy is Strategy.ALWAYS_INCOMPATIBLE:
        raise IncompatibleSchema(
            "the namespace's strategy ALWAYS_INCOMPATIBLE refuses a new schema"
        )
    against = history if strategy.transitive else history[-1:]
    for old in against:
        if old.schema_type != schema_type:
            raise IncompatibleSchema(
                f"a {schema_type} schema cannot follow the {old.schema_type} schema of version"
                f" {old.version} under {strategy.value}"
            )
        if new is None:
            continue
        old_schema = avro_schema(old.data)
        if strategy.backward and not can_read(new, old_schema):
            raise IncompatibleSchema(
                f"the new schema cannot read data written with version {old.version}"
                f" ({strategy.value})"
            )
        if strategy.forward and not can_read(old_schema, new):
            raise IncompatibleSchema(
                f"version {old.version} cannot read data written with the new schema"
                f" ({strategy.value})"
            )


_PROMOTIONS = {
    ("int", "long"),
    ("int", "float"),
    ("int", "double"),
    ("long", "float"),
    ("long", "double"),
    ("float", "double"),
    ("string", "bytes"),
    ("bytes", "string"),
}
_NAMED = frozenset({"record", "error", "enum", "fixed"})


def can_read(reader: Any, writer: Any) -> bool:
    """Whether data written with ``writer`` resolves against ``reader`` (both parsed JSON
    Avro definitions), by the specification's rules."""
    return _Resolver().readable(reader, writer)


class _Resolver:
    def __init__(self) -> None:
        self.reader_names: dict[str, Any] = {}
        self.writer_names: dict[str, Any] = {}
        #: (reader name, writer name) pairs assumed readable while checked: a recursive
        #: type is readable unless some other part of it is not.
        self.assumed: set[tuple[str, str]] = set()

    def readable(self, reader: Any, writer: Any) -> bool:
        reader = self._resolve(reader, self.reader_names)
        writer = self._resolve(writer, self.writer_names)
        if isinstance(writer, list):
            return all(self.readable(reader, branch) for branch in writer)
        if isinstance(reader, list):
            return any(self.readable(branch, writer) for branch in reader)
        reader_type, writer_type = _type_of(reader), _type_of(writer)
        if reader_type in _NAMED or writer_type in _NAMED:
            return reader_type == writer_type and self._named(reader, writer, reader_type)
        if reader_type == writer_type == "array":
            return self.readable(reader["items"], writer["items"])
        if reader_type == writer_type == "map":
            return self.readable(reader["values"], writer["values"])
        return reader_type == writer_type or (writer_type, reader_type) in _PROMOTIONS

    def _resolve(self, schema: Any, names: dict[str, Any]) -> Any:
        while isinstance(schema, dict) and not isinstance(schema.get("type"), str):
            schema = schema["type"]  # {"type": {"type": "array", ...}} or {"type": [...]}
        if isinstance(schema, str):
            found = names.get(schema) or names.get(schema.rsplit(".", 1)[-1])
            return found if found is not None else schema
        if isinstance(schema, dict) and schema.get("type") in _NAMED:
            names[schema["name"]] = schema
            names[schema["name"].rsplit(".", 1)[-1]] = schema
        return schema

    def _named(self, reader: dict[str, Any], writer: dict[str, Any], kind: str) -> bool:
        reader_name = reader["name"].rsplit(".", 1)[-1]
        writer_name = writer["name"].rsplit(".", 1)[-1]
        aliases = {alias.rsplit(".", 1)[-1] for alias in reader.get("aliases", ())}
        if writer_name != reader_name and writer_name not in aliases:
            return False
        if kind == "fixed":
            return bool(reader["size"] == writer["size"])
        if kind == "enum":
            return "default" in reader or set(writer["symbols"]) <= set(reader["symbols"])
        key = (reader["name"], writer["name"])
        if key in self.assumed:
            return True
        self.assumed.add(key)
        writer_fields = {field["name"]: field for field in writer["fields"]}
        for field in reader["fields"]:
            names = [field["name"], *field.get("aliases", ())]
            written = next((writer_fields[name] for name in names if name in writer_fields), None)
            if written is None:
                if "default" not in field:
                    return False
            elif not self.readable(field["type"], written["type"]):
                return False
        return True


def _type_of(schema: Any) -> str:
    if isinstance(schema, dict):
        kind = schema["type"]
        return kind if isinstance(kind, str) else "union"
    return str(schema)
