"""Where a replicated message came from, and the rules that follow from it (no I/O).

**Names.** On the gateway of cluster ``A`` the replicator of topic ``T`` towards cluster
``B`` reads ``T`` on ``A`` through the durable subscription ``georep.repl.B`` (its
replication cursor) and publishes to ``T`` on ``B`` as producer ``georep.repl.A``. The
remote broker deduplicates per (topic, producer name), so the topic is implicit in the
producer name; spelling it out as well would exceed the broker's producer name limit for
long topic names (``limits.producer_name_chars_max``).

**Sequence ids.** Every entry of ``T`` on ``A`` is sent to ``B`` under the sequence id
``(ledger_id << 24) | entry_id`` (``limits.replication_entry_id_bits``). Ledger ids of a
managed ledger only grow, and entry ids restart at 0 in each new ledger and stay below
``2**24`` (``limits.managed_ledger_rollover_entries_max``), so the id grows strictly with
the origin position. Worked example: entry (7, 5) → ``7 << 24 | 5 = 117440517``; the next
ledger's first entry (9, 0) → ``150994944``, larger. The remote broker's producer
deduplication therefore drops any entry sent again (a gateway restarted after kill -9
re-reads what it had not acknowledged locally), and PRODUCER_SUCCESS's
``last_sequence_id`` tells a restarted replicator which origin position the remote holds.
A batch travels as one entry under one id: its ``highest_sequence_id`` is set to the same
id so the remote does not count ``n`` ids for it.

**Metadata.** The stored MessageMetadata is kept (key, ordering key, properties, event
time, publish time, batch count, compression, schema version, ...) and the payload is
forwarded byte for byte (a batch stays one entry, compressed or not). Changed: producer
name and sequence ids (the remote's dedup rebuilds from them after a crash), and added:
``replicated_from = A`` and the properties ``georep.origin.cluster = A``,
``georep.origin.position = "ledger:entry"`` and ``georep.origin.producer`` (the original
producer name). A message of a batch maps to its origin as (origin position, its index
in the batch): the batch is not re-cut, so indexes match. The properties sit on the
entry's metadata; a client that splits a batch shows each message the properties of its
own batch header instead, so per-message mapping of batched messages reads the entry
metadata (as the gateway and ``georep export`` do).

**No loops; chains.** Only messages that originated on the local cluster are replicated:
an entry with ``replicated_from`` set, or carrying an origin cluster other than the local
one, is skipped (and acknowledged on the replication cursor). An origin counts only where
a replicator wrote it (:func:`origin_of`): ``georep.origin.*`` properties an application
set, or that do not parse, are ignored, and the entry is replicated as a local message. So
with A↔B a message from B that was replicated into A is never sent back to B, and with
A→B→C a message produced on A reaches C only if A replicates to C itself: replication
policies are per cluster pair, and each gateway forwards what its own cluster produced. A
producer may narrow where a message goes with ``replicate_to`` (Pulsar's
``replication_clusters``): a non-empty list that does not name the remote skips it there.

**Markers** (``marker_type``, docs/ARCHITECTURE.md "Snapshots"; ``snapshots/markers.py``)
written on the local cluster travel like data, by kind: SnapshotRequest, SubscriptionUpdate
and SubscriptionAckRanges to every remote; a SnapshotResponse only to the cluster that
asked (its ``replicate_to``); a Snapshot nowhere (it records a completed snapshot locally).
A marker that came from another cluster is never sent on, like any copy.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from georep import limits
from georep.domain.decimal_text import parse_decimal
from georep.domain.position import Position
from georep.invariant import invariant
from georep.replicator.errors import ReplicationStalled
from georep.snapshots.markers import BROADCAST_KINDS, MarkerKind
from georep.storage.managed_ledger.config import ManagedLedgerConfig
from georep.wire import pulsar_wire_pb2 as pb

REPLICATION_NAME_PREFIX = "georep.repl."
ORIGIN_CLUSTER_PROPERTY = "georep.origin.cluster"
ORIGIN_POSITION_PROPERTY = "georep.origin.position"
ORIGIN_PRODUCER_PROPERTY = "georep.origin.producer"
#: Real Pulsar's replicator (4.0) stamps every copy with its position on the source
#: cluster ("L:E"): the same origin map, for copies no georep gateway made.
PULSAR_SOURCE_POSITION_PROPERTY = "__MSG_PROP_REPL_SOURCE_POSITION"
_ORIGIN_PROPERTIES = frozenset(
    {ORIGIN_CLUSTER_PROPERTY, ORIGIN_POSITION_PROPERTY, ORIGIN_PRODUCER_PROPERTY}
)

_ENTRY_BITS = limits.replication_entry_id_bits
_ENTRY_MASK = (1 << _ENTRY_BITS) - 1
_LEDGER_LIMIT = 1 << limits.replication_ledger_id_bits

_BROADCAST_MARKERS = frozenset(int(kind) for kind in BROADCAST_KINDS)
_RESPONSE_MARKER = int(MarkerKind.SNAPSHOT_RESPONSE)

invariant(len(REPLICATION_NAME_PREFIX) == limits.replication_name_prefix_chars)
# The managed ledger's default rollover keeps entry ids within the sequence id's low bits.
invariant(ManagedLedgerConfig().rollover_entries_max <= limits.managed_ledger_rollover_entries_max)


def replication_name(cluster: str) -> str:
    """``georep.repl.<cluster>``: the replication subscription towards ``cluster`` and the
    producer name of messages replicated from ``cluster``."""
    return f"{REPLICATION_NAME_PREFIX}{cluster}"


def sequence_id_of(ledger_id: int, entry_id: int) -> int:
    """The remote sequence id of origin entry (ledger_id, entry_id).

    >>> sequence_id_of(7, 5)
    117440517
    """
    if not 0 <= entry_id <= _ENTRY_MASK:
        raise ReplicationStalled(
            f"entry id {entry_id} of ledger {ledger_id} does not fit {_ENTRY_BITS} bits:"
            " the ledger grew past the rollover limit"
        )
    if not 0 <= ledger_id < _LEDGER_LIMIT:
        raise ReplicationStalled(f"ledger id {ledger_id} does not fit a sequence id")
    return (ledger_id << _ENTRY_BITS) | entry_id


def position_of_sequence_id(sequence_id: int) -> Position:
    """The origin position a replication sequence id stands for.

    >>> str(position_of_sequence_id(117440517))
    '7:5'
    """
    invariant(sequence_id >= 0, "replication sequence ids are not negative")
    return Position(sequence_id >> _ENTRY_BITS, sequence_id & _ENTRY_MASK)


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a replicated entry was first stored."""

    cluster: str
    ledger_id: int
    entry_id: int

    @property
    def position(self) -> Position:
        return Position(self.ledger_id, self.entry_id)

    @property
    def position_text(self) -> str:
        return str(self.position)


def parse_position_text(text: str) -> Position | None:
    """``"L:E"`` with ASCII decimal ids (a u64 ledger id, a non-negative i64 entry id) as
    a position; None for anything else (``"²:1"``, ``"7"``, ``"-1:2"``, ``" 7:5"``).

    >>> str(parse_position_text("7:5")), parse_position_text("\u00b2:1")
    ('7:5', None)
    """
    ledger_text, colon, entry_text = text.partition(":")
    ledger_id, entry_id = parse_decimal(ledger_text), parse_decimal(entry_text)
    if not colon or ledger_id is None or entry_id is None:
        return None
    if ledger_id >= 1 << 64 or entry_id >= 1 << 63:
        return None
    return Position(ledger_id, entry_id)


def origin_of(metadata: pb.MessageMetadata) -> Origin | None:
    """The origin a replicated entry carries; None for an entry that is not a copy.

    **Trust.** Origin properties are read only where a replicator wrote them: georep's
    ``georep.origin.*`` on an entry whose producer is ``georep.repl.<origin cluster>``
    (the name every copy a gateway makes carries, see :func:`replicated_metadata`), and
    Pulsar's source position on an entry with ``replicated_from`` set (a copy real
    Pulsar's replicator made). Anywhere else the properties are an application's text and
    mean nothing: the entry is a local message, replicated like any other (its stale
    ``georep.origin.*`` replaced on the way). A position that does not parse strictly
    (:func:`parse_position_text`) makes no origin either. So no property a producer sets
    can stop replication or raise here.

    >>> m = pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1)
    >>> m.replicated_from = "A"
    >>> _ = m.properties.add(key=PULSAR_SOURCE_POSITION_PROPERTY, value="7:5")
    >>> origin_of(m)
    Origin(cluster='A', ledger_id=7, entry_id=5)
    """
    found = {kv.key: kv.value for kv in metadata.properties if kv.key in _ORIGIN_PROPERTIES}
    cluster = found.get(ORIGIN_CLUSTER_PROPERTY)
    position = found.get(ORIGIN_POSITION_PROPERTY)
    if not cluster or position is None or metadata.producer_name != replication_name(cluster):
        cluster, position = None, None
    if cluster is None and metadata.replicated_from:
        cluster = metadata.replicated_from
        position = next(
            (kv.value for kv in metadata.properties if kv.key == PULSAR_SOURCE_POSITION_PROPERTY),
            None,
        )
    if not cluster or position is None:
        return None
    parsed = parse_position_text(position)
    if parsed is None:
        return None
    return Origin(cluster, *parsed)


class Verdict(enum.Enum):
    """What the replicator towards one remote does with one local entry."""

    REPLICATE = "replicate"
    #: Replicated into this cluster from elsewhere: only local messages go out.
    NOT_LOCAL = "not-local"
    #: The producer's ``replicate_to`` does not name this remote.
    NOT_ADDRESSED = "not-addressed"
    #: A marker that stays local or is addressed to other clusters.
    MARKER = "marker"


def verdict(metadata: pb.MessageMetadata, *, local_cluster: str, remote_cluster: str) -> Verdict:
    """Whether an entry stored on ``local_cluster`` goes to ``remote_cluster``.

    >>> m = pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1)
    >>> verdict(m, local_cluster="A", remote_cluster="B").value
    'replicate'
    >>> m.replicated_from = "B"
    >>> verdict(m, local_cluster="A", remote_cluster="B").value
    'not-local'
    """
    if metadata.replicated_from:
        return Verdict.NOT_LOCAL
    origin = origin_of(metadata)
    if origin is not None and origin.cluster != local_cluster:
        return Verdict.NOT_LOCAL
    if metadata.HasField("marker_type"):
        kind = metadata.marker_type
        if kind in _BROADCAST_MARKERS:
            return Verdict.REPLICATE
        if kind == _RESPONSE_MARKER and remote_cluster in metadata.replicate_to:
            return Verdict.REPLICATE
        return Verdict.MARKER
    if metadata.replicate_to and remote_cluster not in metadata.replicate_to:
        return Verdict.NOT_ADDRESSED
    return Verdict.REPLICATE


def replicated_metadata(
    metadata: pb.MessageMetadata,
    *,
    local_cluster: str,
    position: Position,
    producer_name: str,
) -> pb.MessageMetadata:
    """The metadata the remote stores for local entry ``position`` (see the module
    docstring): a copy with replication fields set, origin properties added (replacing
    any stale ones), and the sequence ids of the origin position."""
    sequence_id = sequence_id_of(*position)
    out = pb.MessageMetadata()
    out.CopyFrom(metadata)
    original_producer = metadata.producer_name
    if any(kv.key in _ORIGIN_PROPERTIES for kv in metadata.properties):  # rare: stale ones
        kept = [kv for kv in metadata.properties if kv.key not in _ORIGIN_PROPERTIES]
        del out.properties[:]
        out.properties.extend(kept)
    out.properties.add(key=ORIGIN_CLUSTER_PROPERTY, value=local_cluster)
    out.properties.add(key=ORIGIN_POSITION_PROPERTY, value=str(position))
    out.properties.add(key=ORIGIN_PRODUCER_PROPERTY, value=original_producer)
    out.replicated_from = local_cluster
    out.producer_name = producer_name
    out.sequence_id = sequence_id
    out.highest_sequence_id = sequence_id
    return out
