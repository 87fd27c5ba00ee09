"""Origin positions, sequence ids and the replication rules (replicator/origin.py)."""

from __future__ import annotations

import pytest

from georep import limits
from georep.domain.position import Position
from georep.replicator.errors import ReplicationStalled
from georep.replicator.origin import (
    Origin,
    Verdict,
    origin_of,
    position_of_sequence_id,
    replicated_metadata,
    replication_name,
    sequence_id_of,
    verdict,
)
from georep.wire import pulsar_wire_pb2 as pb

ENTRY_MAX = 2**limits.replication_entry_id_bits - 1


@pytest.mark.parametrize(
    ("position", "sequence_id"),
    [
        ((0, 0), 0),
        ((7, 5), 117_440_517),
        ((7, ENTRY_MAX), (8 << 24) - 1),
        ((8, 0), 8 << 24),
        ((2**limits.replication_ledger_id_bits - 1, ENTRY_MAX), 2**63 - 1),
    ],
)
def test_sequence_ids_round_trip(position, sequence_id) -> None:
    assert sequence_id_of(*position) == sequence_id
    assert position_of_sequence_id(sequence_id) == position


def test_sequence_ids_grow_with_positions() -> None:
    positions = [(3, 0), (3, 1), (3, 49_999), (5, 0), (5, 1), (900, 0)]
    ids = [sequence_id_of(*p) for p in positions]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)


@pytest.mark.parametrize(
    "position", [(3, ENTRY_MAX + 1), (3, -1), (-1, 0), (2**limits.replication_ledger_id_bits, 0)]
)
def test_positions_that_do_not_fit_stall(position) -> None:
    with pytest.raises(ReplicationStalled):
        sequence_id_of(*position)


def meta(**fields) -> pb.MessageMetadata:
    fields.setdefault("producer_name", "app")
    return pb.MessageMetadata(sequence_id=3, publish_time=1000, **fields)


def with_origin(metadata: pb.MessageMetadata, cluster: str) -> pb.MessageMetadata:
    metadata.properties.add(key="georep.origin.cluster", value=cluster)
    metadata.properties.add(key="georep.origin.position", value="4:2")
    return metadata


@pytest.mark.parametrize(
    ("metadata", "remote", "expected"),
    [
        (meta(), "B", Verdict.REPLICATE),
        (meta(replicated_from="B"), "B", Verdict.NOT_LOCAL),  # back to its origin: no
        (meta(replicated_from="C"), "B", Verdict.NOT_LOCAL),  # chains: only local messages
        (with_origin(meta(producer_name="georep.repl.C"), "C"), "B", Verdict.NOT_LOCAL),
        (with_origin(meta(producer_name="georep.repl.A"), "A"), "B", Verdict.REPLICATE),
        # An origin an application wrote is no origin: a local message, replicated.
        (with_origin(meta(), "C"), "B", Verdict.REPLICATE),
        (with_origin(meta(producer_name="georep.repl.A"), "C"), "B", Verdict.REPLICATE),
        (meta(replicate_to=["C"]), "B", Verdict.NOT_ADDRESSED),
        (meta(replicate_to=["B", "C"]), "B", Verdict.REPLICATE),
        (meta(marker_type=10), "B", Verdict.REPLICATE),  # a request goes everywhere
        (meta(marker_type=13), "B", Verdict.REPLICATE),  # so do updates
        (meta(marker_type=100), "B", Verdict.REPLICATE),  # and acknowledged ranges
        (meta(marker_type=11, replicate_to=["C"]), "B", Verdict.MARKER),  # C asked
        (meta(marker_type=11, replicate_to=["B"]), "B", Verdict.REPLICATE),
        (meta(marker_type=12), "B", Verdict.MARKER),  # a completed snapshot stays
        (meta(marker_type=10, replicated_from="B"), "C", Verdict.NOT_LOCAL),  # never on
    ],
)
def test_verdicts(metadata, remote, expected) -> None:
    assert verdict(metadata, local_cluster="A", remote_cluster=remote) is expected


def test_replicated_metadata_keeps_the_message_and_adds_its_origin() -> None:
    original = meta(
        partition_key="k",
        ordering_key=b"o",
        event_time=1234,
        num_messages_in_batch=5,
        compression=pb.COMPRESSION_LZ4,
        uncompressed_size=99,
    )
    original.properties.add(key="app", value="v")
    original.properties.add(key="georep.origin.position", value="stale")
    out = replicated_metadata(
        original, local_cluster="A", position=Position(7, 5), producer_name=replication_name("A")
    )
    for field in (
        "partition_key",
        "ordering_key",
        "event_time",
        "publish_time",
        "num_messages_in_batch",
        "compression",
        "uncompressed_size",
    ):
        assert getattr(out, field) == getattr(original, field), field
    assert out.replicated_from == "A"
    assert out.producer_name == "georep.repl.A"
    assert out.sequence_id == out.highest_sequence_id == sequence_id_of(7, 5)
    properties = [(kv.key, kv.value) for kv in out.properties]
    assert properties == [
        ("app", "v"),
        ("georep.origin.cluster", "A"),
        ("georep.origin.position", "7:5"),
        ("georep.origin.producer", "app"),
    ]
    assert origin_of(out) == Origin("A", 7, 5)
    assert original.producer_name == "app"  # the input is not changed


@pytest.mark.parametrize(
    "position",
    ["", "7", "7:", ":5", "x:5", "7:5:1", "-1:2", "\u00b2:1", "7:\u0663", " 7:5", "+7:5",
     "7_0:5", "1" * 5000 + ":1", f"{2**64}:1", f"1:{2**63}"],
)  # fmt: skip
def test_malformed_origin_is_no_origin(position) -> None:
    metadata = meta(producer_name="georep.repl.A")
    metadata.properties.add(key="georep.origin.cluster", value="A")
    metadata.properties.add(key="georep.origin.position", value=position)
    assert origin_of(metadata) is None


def test_a_well_formed_origin_from_a_replicator_is_read() -> None:
    metadata = with_origin(meta(producer_name="georep.repl.C"), "C")
    assert origin_of(metadata) == Origin("C", 4, 2)
    assert origin_of(with_origin(meta(), "C")) is None  # an application's claim
