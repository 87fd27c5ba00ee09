"""The ``avro-evolving`` scenario's messages: Avro records whose schema gains a field
half-way through production, and the check a consumer makes of each one by its version.

Two versions of one record schema, as the producers on A register them on the new topic:

- v1 ``DrillRecord {id: string, index: long, key: string}``: messages ``0 .. N//2 - 1``;
- v2 adds ``note: string`` with default ``""``: messages ``N//2 .. N - 1``, each with the
  note ``"v2 <id>"``. Compatible under ``FULL`` (georep's and Pulsar's default strategy):
  v1 reads v2's data by skipping the note, v2 reads v1's with the note defaulted.

A consumer decodes as ``AUTO_CONSUME`` does: it reads the message's schema version, asks
its cluster for that version (``GET_SCHEMA``, memoised per version by
:class:`SchemaLookup`) and decodes the payload with that writer schema alone. A message
is **undecodable** (:func:`decode_problem` names why) when its cluster holds no schema
under its version, the schema is not Avro, the payload does not decode with it, leaves
bytes over, or decodes to another record than the one produced (its drill id, index and
key travel in the properties too). Worked example: a copy of v2 message 700 stamped with
the version of v1 decodes id, index and key and leaves the note's 11 bytes over:
undecodable, although a lenient reader would have shown a plausible record.

Pure but for the lookup's one callable: no client here (traffic.py holds it).
"""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import fastavro

AVRO = "AVRO"

_FIELDS_V1: list[dict[str, Any]] = [
    {"name": "id", "type": "string"},
    {"name": "index", "type": "long"},
    {"name": "key", "type": "string"},
]
SCHEMA_V1: dict[str, Any] = {
    "type": "record",
    "name": "DrillRecord",
    "namespace": "georep.drill",
    "fields": _FIELDS_V1,
}
SCHEMA_V2: dict[str, Any] = {
    **SCHEMA_V1,
    "fields": [*_FIELDS_V1, {"name": "note", "type": "string", "default": ""}],
}


def evolves_at(messages: int) -> int:
    """The index of the first message produced under v2.

    >>> evolves_at(300), evolves_at(1)
    (150, 0)
    """
    return messages // 2


def schema_of(index: int, messages: int) -> dict[str, Any]:
    return SCHEMA_V1 if index < evolves_at(messages) else SCHEMA_V2


def record_of(index: int, drill_id: str, key: str, messages: int) -> dict[str, Any]:
    """The record message ``index`` carries, under :func:`schema_of` its schema."""
    record = expected_fields(index, drill_id, key)
    if schema_of(index, messages) is SCHEMA_V1:
        del record["note"]
    return record


def expected_fields(index: int, drill_id: str, key: str) -> dict[str, Any]:
    """Every field a record of message ``index`` may carry, as :func:`decode_problem`
    expects them: its writer schema decides whether it carries the note."""
    return {"id": drill_id, "index": index, "key": key, "note": f"v2 {drill_id}"}


@dataclass(frozen=True, slots=True)
class WriterSchema:
    """A version's schema as its cluster answered: the type name and the definition."""

    type_name: str
    definition: str


class SchemaLookup:
    """A cluster's schemas of one topic by version, asked once each (``fetch`` raises for
    a version the cluster does not hold). Thread-safe: every consumer thread asks it.
    A failed lookup is not remembered, so a passing error is asked again next time."""

    def __init__(self, fetch: Callable[[int], WriterSchema]) -> None:
        self._fetch = fetch
        self._lock = threading.Lock()
        self._known: dict[int, WriterSchema] = {}

    def writer(self, version: int) -> WriterSchema:
        with self._lock:
            known = self._known.get(version)
        if known is None:
            known = self._fetch(version)
            with self._lock:
                self._known[version] = known
        return known


def decode_problem(
    data: bytes, version: int | None, lookup: SchemaLookup, expected: dict[str, Any]
) -> str | None:
    """Why ``data``, stamped ``version``, is undecodable by its version; None when it
    decodes to exactly the fields of ``expected`` (:func:`expected_fields`) that the
    writer schema has: the note only under v2."""
    if version is None:
        return "no schema version"
    try:
        writer = lookup.writer(version)
    except Exception as error:  # the client's own error types: no schema under the version
        return f"version {version} not found: {error}"
    if writer.type_name != AVRO:
        return f"version {version} is {writer.type_name}, not {AVRO}"
    try:
        parsed = fastavro.parse_schema(json.loads(writer.definition))
        buffer = io.BytesIO(data)
        decoded = fastavro.schemaless_reader(buffer, parsed, None)
    except Exception as error:  # fastavro's and json's errors alike: the data is not that
        return f"does not decode with version {version}: {error}"
    left = len(data) - buffer.tell()
    if left:
        return f"version {version} leaves {left} bytes undecoded"
    if not isinstance(decoded, dict):
        return f"version {version} decodes to a {type(decoded).__name__}, not a record"
    wanted = {name: value for name, value in expected.items() if name in decoded}
    if decoded != wanted or len(wanted) < len(_FIELDS_V1):
        return f"version {version} decodes to {decoded!r}, not the record produced"
    return None
