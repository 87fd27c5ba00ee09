"""Marker payloads: encode, decode and check the control entries replication carries.

A marker is an entry of the topic whose MessageMetadata.marker_type names its kind
and whose payload is one of the messages of ``markers.proto``:

    kind                     payload              travels
    SNAPSHOT_REQUEST (10)    SnapshotRequest      to every replicated cluster
    SNAPSHOT_RESPONSE (11)   SnapshotResponse     only back to the cluster that asked
    SNAPSHOT (12)            Snapshot             nowhere: a completed snapshot, local
    SUBSCRIPTION_UPDATE (13) SubscriptionUpdate   to every replicated cluster
    SUBSCRIPTION_ACK_RANGES  SubscriptionAckRanges  to every replicated cluster
      (100, georep)

Kinds 10-13 are byte-compatible with Pulsar's replicated-subscription markers.

:func:`decode` is the one way in: it refuses payloads above ``marker_bytes_max``
before parsing, requires every required field (the protobuf runtime does not), and
checks what the schema cannot (ranges ordered, batch bits within the batch, counts
and names within their limits). Every failure is a :class:`MarkerError`.

Example: a SnapshotRequest with id "s1" from cluster "a" is the 7 bytes
``0a 02 73 31 12 01 61`` (field 1, length 2, "s1"; field 2, length 1, "a").
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

from google.protobuf.message import DecodeError, Message

from georep import limits
from georep.domain.position import Position
from georep.invariant import InvariantViolation
from georep.snapshots import markers_pb2 as pb
from georep.snapshots.errors import MarkerError
from georep.wire.frames import missing_fields


class MarkerKind(enum.IntEnum):
    SNAPSHOT_REQUEST = pb.SNAPSHOT_REQUEST
    SNAPSHOT_RESPONSE = pb.SNAPSHOT_RESPONSE
    SNAPSHOT = pb.SNAPSHOT
    SUBSCRIPTION_UPDATE = pb.SUBSCRIPTION_UPDATE
    SUBSCRIPTION_ACK_RANGES = pb.SUBSCRIPTION_ACK_RANGES


PAYLOADS: dict[MarkerKind, type[Message]] = {
    MarkerKind.SNAPSHOT_REQUEST: pb.SnapshotRequest,
    MarkerKind.SNAPSHOT_RESPONSE: pb.SnapshotResponse,
    MarkerKind.SNAPSHOT: pb.Snapshot,
    MarkerKind.SUBSCRIPTION_UPDATE: pb.SubscriptionUpdate,
    MarkerKind.SUBSCRIPTION_ACK_RANGES: pb.SubscriptionAckRanges,
}

#: Kinds a replicator forwards to every remote; the others have narrower routes.
BROADCAST_KINDS = frozenset(
    {
        MarkerKind.SNAPSHOT_REQUEST,
        MarkerKind.SUBSCRIPTION_UPDATE,
        MarkerKind.SUBSCRIPTION_ACK_RANGES,
    }
)


def kind_of(marker_type: int) -> MarkerKind:
    try:
        return MarkerKind(marker_type)
    except ValueError:
        raise MarkerError(f"unknown marker type {marker_type}") from None


def encode(kind: MarkerKind, message: Message) -> bytes:
    """The payload bytes of a marker; checked as :func:`decode` would check them."""
    expected = PAYLOADS[kind]
    if not isinstance(message, expected):
        raise MarkerError(f"{kind.name} carries {expected.__name__}, not {type(message).__name__}")
    _check(kind, message)
    data = message.SerializeToString()
    if len(data) > limits.marker_bytes_max:
        raise MarkerError(f"{kind.name} of {len(data)} bytes exceeds {limits.marker_bytes_max}")
    return data


def decode(marker_type: int, payload: bytes | memoryview) -> tuple[MarkerKind, Message]:
    """Parse and check a marker payload; raises only :class:`MarkerError`."""
    kind = kind_of(marker_type)
    if len(payload) > limits.marker_bytes_max:
        raise MarkerError(f"{kind.name} of {len(payload)} bytes exceeds {limits.marker_bytes_max}")
    message = PAYLOADS[kind]()
    try:
        message.ParseFromString(bytes(payload))
    except (DecodeError, ValueError, RecursionError) as error:
        raise MarkerError(f"{kind.name} payload does not parse: {error}") from None
    _check(kind, message)
    return kind, message


# --- checks ----------------------------------------------------------------------------


def _check(kind: MarkerKind, message: Message) -> None:
    """``message`` is ``PAYLOADS[kind]()`` parsed: its class says its kind."""
    if not message.IsInitialized():
        missing = ", ".join(missing_fields(message))
        raise MarkerError(f"{kind.name} lacks required fields: {missing}")
    if isinstance(message, pb.SnapshotRequest):
        _name(message.snapshot_id, "snapshot id")
        if message.HasField("source_cluster"):
            _name(message.source_cluster, "source cluster")
    elif isinstance(message, pb.SnapshotResponse):
        _name(message.snapshot_id, "snapshot id")
        if message.HasField("cluster"):
            _name(message.cluster.cluster, "cluster")
    elif isinstance(message, pb.Snapshot):
        _name(message.snapshot_id, "snapshot id")
        _clusters(message.clusters)
    elif isinstance(message, pb.SubscriptionUpdate):
        _name(message.subscription_name, "subscription name")
        _clusters(message.clusters)
    elif isinstance(message, pb.SubscriptionAckRanges):
        _check_ack_ranges(message)
    else:
        raise InvariantViolation(f"{kind.name}: no check for {type(message).__name__}")


def _check_ack_ranges(message: pb.SubscriptionAckRanges) -> None:
    _name(message.subscription_name, "subscription name")
    _name(message.source_cluster, "source cluster")
    origins = set()
    ranges = batches = 0
    for origin in message.origins:
        _name(origin.origin_cluster, "origin cluster")
        if origin.origin_cluster in origins:
            raise MarkerError(f"origin cluster {origin.origin_cluster!r} listed twice")
        origins.add(origin.origin_cluster)
        previous_last = None
        for span in origin.ranges:
            first, last = key(span.first), key(span.last)
            if first > last:
                raise MarkerError(f"range {first}..{last} ends before it starts")
            if previous_last is not None and first <= previous_last:
                raise MarkerError(f"ranges of {origin.origin_cluster!r} overlap or are unsorted")
            previous_last = last
        ranges += len(origin.ranges)
        for batch in origin.partial_batches:
            _check_batch(batch)
        batches += len(origin.partial_batches)
    if len(origins) > limits.marker_clusters_count_max:
        raise MarkerError(f"{len(origins)} origins exceed {limits.marker_clusters_count_max}")
    if ranges > limits.marker_ranges_count_max:
        raise MarkerError(f"{ranges} ranges exceed {limits.marker_ranges_count_max}")
    if batches > limits.marker_partial_batches_count_max:
        raise MarkerError(
            f"{batches} partial batches exceed {limits.marker_partial_batches_count_max}"
        )


def _check_batch(batch: pb.PartialBatch) -> None:
    size = batch.batch_size
    if not 1 <= size <= limits.pulsar_batch_messages_count_max:
        raise MarkerError(f"batch size {size} outside 1..{limits.pulsar_batch_messages_count_max}")
    words = list(batch.acknowledged_words)
    if len(words) != (size + 63) // 64:
        raise MarkerError(f"{len(words)} words for a batch of {size}")
    spare = len(words) * 64 - size
    if spare and words[-1] >> (64 - spare):
        raise MarkerError(f"acknowledged bits beyond batch size {size}")


def _clusters(clusters: Iterable[pb.ClusterPosition]) -> None:
    names = [c.cluster for c in clusters]
    if len(names) > limits.marker_clusters_count_max:
        raise MarkerError(f"{len(names)} clusters exceed {limits.marker_clusters_count_max}")
    for name in names:
        _name(name, "cluster")
    if len(set(names)) != len(names):
        raise MarkerError(f"a cluster is listed twice: {names}")


def _name(value: str, what: str) -> None:
    if not value:
        raise MarkerError(f"empty {what}")
    if len(value) > limits.marker_name_chars_max:
        raise MarkerError(
            f"{what} of {len(value)} characters exceeds {limits.marker_name_chars_max}"
        )


# --- helpers ---------------------------------------------------------------------------


def key(position: pb.Position) -> Position:
    """A marker position as the position it names."""
    return Position(position.ledger_id, position.entry_id)


def position(ledger_id: int, entry_id: int) -> pb.Position:
    return pb.Position(ledger_id=ledger_id, entry_id=entry_id)


def batch_words(acknowledged: Iterable[int], batch_size: int) -> list[int]:
    """Pack acknowledged batch indexes into 64-bit words (bit i of word i // 64)."""
    words = [0] * ((batch_size + 63) // 64)
    for index in acknowledged:
        if not 0 <= index < batch_size:
            raise MarkerError(f"batch index {index} outside a batch of {batch_size}")
        words[index // 64] |= 1 << (index % 64)
    return words


def batch_indexes(words: Iterable[int]) -> list[int]:
    """The acknowledged batch indexes packed by :func:`batch_words`."""
    return [w * 64 + bit for w, word in enumerate(words) for bit in range(64) if word >> bit & 1]
