"""The tables ``georep export`` writes and ``georep reconcile`` reads, version 2.

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
"""

from __future__ import annotations

import pyarrow as pa

from georep.decimal_text import parse_decimal

SCHEMA_VERSION = 2
#: Versions this georep reads: 1 is version 2 without ``batch_acks``.
READABLE_VERSIONS = (1, 2)
#: Columns a table gained after version 1, which a version 1 file may lack.
ADDED_IN_VERSION_2 = {"subscriptions": ("batch_acks",)}
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
