"""The tables ``georep export`` writes and ``georep reconcile`` reads, version 3.

Two tables per cluster, each a Parquet file under the export directory::

    DIR/messages/<cluster>.parquet        one row per data message (markers are not read)
    DIR/subscriptions/<cluster>.parquet   one row per subscription of a topic partition

Every file carries its schema version twice: a ``schema_version`` column and the
key-value metadata ``georep.schema_version`` (with ``georep.table`` naming the table), so
a reader can refuse a file from its footer alone, and a row taken out of its file still
says what it is.

**Message identity.** A message is known everywhere by its *origin identity*: (origin
cluster, origin ledger id, origin entry id, batch index). A message published on cluster A
has origin A and its own position there; its copy on B carries A and A's position in the
properties ``georep.origin.cluster`` / ``georep.origin.position`` (docs/ARCHITECTURE.md,
"Replicator"), and the same batch index because a batch is replicated whole. Example: the
third message of a batch stored at A 7:5 is (A, 7, 5, 2) on A, and (A, 7, 5, 2) again on B
although B stored it at 3:12. ``batch_index`` is -1 for a message that is not part of a
batch, as in Pulsar's MessageId; ``partition`` is -1 for a non-partitioned topic.

**Acknowledged ranges** keep Pulsar's ``individuallyDeletedMessages`` meaning: each range is
open below and closed above, ``(lower, upper]``. Example: ``(3:5..3:7]`` holds 3:6 and 3:7.

**Acknowledged batch indexes** (``batch_acks``, version 2) are the messages acknowledged
inside batch entries that are acknowledged only in part: entry ``3:8``, a batch of 4,
``acked_indexes [0, 2]`` means its first and third messages are acknowledged and the other
two are not. An entry listed there is never at or below the mark-delete position nor in
a range (those hold whole entries). A message is acknowledged when its entry is, or when
its batch index is. Version 1 had no such column: its files still read, with no batch
index acknowledged (entry precision).

**Payload schemas** (version 3). ``payload_schema_version`` is the message's schema
version as stamped on it, in the numbering of the cluster that holds it (null: the
message names none, as a schema-less producer's). ``payload_schema`` says which schema
that version is *there*: ``TYPE:fingerprint``, the first 16 hex digits of the SHA-256 of
the schema's definition (JSON definitions re-serialised with sorted keys and no spaces,
so two registries' spellings of one schema agree), or null when the message names no
version or its cluster holds no schema under it. Versions differ between clusters (each
numbers its own), fingerprints do not: a copy decodes as its origin was written when its
``payload_schema`` equals its origin's. Example: A's v1 is B's v0; the copy of a message A
stamped 1 is stamped 0 on B, and both rows say ``AVRO:3f0c…``. Versions 1 and 2 had no
such columns: their files still read, with both null (no schema compared).
"""

from __future__ import annotations

import hashlib
import json

import pyarrow as pa

from georep.domain.decimal_text import parse_decimal

SCHEMA_VERSION = 3
#: Versions this georep reads: 1 is version 2 without ``batch_acks``, 2 is version 3
#: without the payload schema columns.
READABLE_VERSIONS = (1, 2, 3)
#: Columns each version added, per table: a file of an earlier version may lack them.
ADDED_IN_VERSION: dict[int, dict[str, tuple[str, ...]]] = {
    2: {"subscriptions": ("batch_acks",)},
    3: {"messages": ("payload_schema_version", "payload_schema")},
}
VERSION_KEY = b"georep.schema_version"
TABLE_KEY = b"georep.table"

MESSAGES = "messages"
SUBSCRIPTIONS = "subscriptions"
TABLES = (MESSAGES, SUBSCRIPTIONS)

_TIME = pa.timestamp("ms", tz="UTC")

RANGE_TYPE = pa.struct(
    [
        pa.field("lower_ledger_id", pa.int64(), nullable=False),
        pa.field("lower_entry_id", pa.int64(), nullable=False),
        pa.field("upper_ledger_id", pa.int64(), nullable=False),
        pa.field("upper_entry_id", pa.int64(), nullable=False),
    ]
)


BATCH_ACK_TYPE = pa.struct(
    [
        pa.field("ledger_id", pa.int64(), nullable=False),
        pa.field("entry_id", pa.int64(), nullable=False),
        # messages in the batch (its metadata's num_messages_in_batch)
        pa.field("batch_size", pa.int32(), nullable=False),
        pa.field("acked_indexes", pa.list_(pa.int32()), nullable=False),
    ]
)


def _metadata(table: str) -> dict[bytes, bytes]:
    return {VERSION_KEY: str(SCHEMA_VERSION).encode(), TABLE_KEY: table.encode()}


MESSAGES_SCHEMA = pa.schema(
    [
        pa.field("schema_version", pa.int32(), nullable=False),
        pa.field("cluster", pa.string(), nullable=False),
        pa.field("topic", pa.string(), nullable=False),
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("ledger_id", pa.int64(), nullable=False),
        pa.field("entry_id", pa.int64(), nullable=False),
        pa.field("batch_index", pa.int32(), nullable=False),
        pa.field("origin_cluster", pa.string(), nullable=False),
        # null when a replicated copy does not show its origin position (see export.py)
        pa.field("origin_ledger_id", pa.int64()),
        pa.field("origin_entry_id", pa.int64()),
        pa.field("key", pa.string()),
        pa.field("publish_time", _TIME, nullable=False),
        pa.field("event_time", _TIME),
        pa.field("size", pa.int32(), nullable=False),
        # version 3: the message's schema version on this cluster and which schema that is
        pa.field("payload_schema_version", pa.int64()),
        pa.field("payload_schema", pa.string()),
    ],
    metadata=_metadata(MESSAGES),
)

SUBSCRIPTIONS_SCHEMA = pa.schema(
    [
        pa.field("schema_version", pa.int32(), nullable=False),
        pa.field("cluster", pa.string(), nullable=False),
        pa.field("topic", pa.string(), nullable=False),
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("subscription", pa.string(), nullable=False),
        pa.field("mark_delete_ledger_id", pa.int64(), nullable=False),
        pa.field("mark_delete_entry_id", pa.int64(), nullable=False),
        pa.field("individually_deleted", pa.list_(RANGE_TYPE), nullable=False),
        pa.field("batch_acks", pa.list_(BATCH_ACK_TYPE), nullable=False),
        pa.field("captured_at", _TIME, nullable=False),
    ],
    metadata=_metadata(SUBSCRIPTIONS),
)

SCHEMAS = {MESSAGES: MESSAGES_SCHEMA, SUBSCRIPTIONS: SUBSCRIPTIONS_SCHEMA}


def added_after(version: int, table: str) -> tuple[str, ...]:
    """The columns of ``table`` that versions after ``version`` added.

    >>> added_after(1, SUBSCRIPTIONS), added_after(2, MESSAGES), added_after(3, MESSAGES)
    (('batch_acks',), ('payload_schema_version', 'payload_schema'), ())
    """
    return tuple(
        name
        for added, tables in sorted(ADDED_IN_VERSION.items())
        if added > version
        for name in tables.get(table, ())
    )


def schema_fingerprint(type_name: str, definition: str) -> str:
    """``TYPE:fingerprint`` of a registered schema (see the module docstring): equal for
    equal schemas however each registry spells their JSON.

    >>> schema_fingerprint("AVRO", '{"type": "string"}') == schema_fingerprint(
    ...     "AVRO", '{"type":"string"}')
    True
    """
    try:
        canonical = json.dumps(json.loads(definition), sort_keys=True, separators=(",", ":"))
    except ValueError:  # not JSON (a Protobuf descriptor's text, say): as registered
        canonical = definition
    return f"{type_name}:{hashlib.sha256(canonical.encode()).hexdigest()[:16]}"


#: The delivery log a failover drill writes (JSON lines or Parquet): one row per message
#: delivered to a consumer. ``delivered_at`` is epoch milliseconds or ISO-8601 in JSON;
#: ``phase`` is ``before`` or ``after`` the failover. Optional: ``partition`` (else taken
#: from a ``-partition-N`` topic name, else -1), ``schema_version`` (must be
#: :data:`DELIVERY_SCHEMA_VERSION`) and ``acked`` (:data:`DELIVERY_ACKED`).
DELIVERY_COLUMNS = (
    "cluster",
    "topic",
    "subscription",
    "origin_cluster",
    "origin_ledger_id",
    "origin_entry_id",
    "batch_index",
    "delivered_at",
    "phase",
)
PHASES = ("before", "after")
#: The delivery log has its own version; it has not changed since version 1.
DELIVERY_SCHEMA_VERSION = 1
#: Optional boolean column of the delivery log: an acknowledgement covering this delivery
#: was sent. Absent or null, the delivery counts as acknowledged (a consumer processes
#: what it receives), which makes every repeated delivery a duplicate.
DELIVERY_ACKED = "acked"

#: Subscriptions that are machinery, not consumers: replication cursors and the broker's
#: own. They are exported (they are state) but never paired across clusters.
SYSTEM_SUBSCRIPTION_PREFIXES = ("georep.repl.", "pulsar.")

PARTITION_SUFFIX = "-partition-"


def split_partition(topic: str) -> tuple[str, int]:
    """``(base name, partition)`` of a topic name; -1 when it names no partition.

    >>> split_partition("persistent://t/ns/orders-partition-3")
    ('persistent://t/ns/orders', 3)
    >>> split_partition("persistent://t/ns/orders")
    ('persistent://t/ns/orders', -1)
    """
    base, suffix, index_text = topic.rpartition(PARTITION_SUFFIX)
    index = parse_decimal(index_text)
    if suffix and index is not None and (index_text == "0" or not index_text.startswith("0")):
        return base, index
    return topic, -1
