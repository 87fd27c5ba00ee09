"""SyncCore's snapshot participants: a remote that never answers is left out, probed,
and taken back when it answers."""

from __future__ import annotations

from typing import TypeVar

from google.protobuf.message import Message

from georep.domain.position import Position
from georep.snapshots import markers_pb2 as pb
from georep.snapshots.markers import MarkerKind, encode, position
from georep.subsync.core import Apply, SubscriptionState, SyncCore, WriteMarker
from georep.subsync.settings import NamespaceSync, SyncSettings
from georep.wire import pulsar_wire_pb2 as wire

_M = TypeVar("_M", bound=Message)


def message_of(out: WriteMarker | Apply, kind: type[_M]) -> _M:
    """The marker ``out`` writes, which the test expects to be a ``kind``."""
    assert isinstance(out, WriteMarker) and isinstance(out.message, kind)
    return out.message


def core() -> SyncCore:
    a = SyncCore(
        "A",
        namespace_sync=NamespaceSync(),
        settings=SyncSettings(snapshot_interval_s=1.0, snapshot_timeout_s=10.0),
        remotes=frozenset({"B", "C"}),
    )
    a.on_state(
        {"s": SubscriptionState(mark_delete=Position(1, -1), consumers=1, replicated=True)}, 0.0
    )
    own = wire.MessageMetadata(producer_name="p", sequence_id=1, publish_time=0)
    a.on_entry(Position(1, 0), own, b"x", 0.0)  # something new to snapshot
    return a


def response(snapshot_id: str, cluster: str, now: float) -> tuple[wire.MessageMetadata, bytes]:
    metadata = wire.MessageMetadata(
        producer_name="georep.repl." + cluster,
        sequence_id=1,
        publish_time=int(now * 1000),
        marker_type=int(MarkerKind.SNAPSHOT_RESPONSE),
        replicated_from=cluster,
    )
    answer = pb.SnapshotResponse(
        snapshot_id=snapshot_id,
        cluster=pb.ClusterPosition(cluster=cluster, position=position(5, 5)),
    )
    return metadata, encode(MarkerKind.SNAPSHOT_RESPONSE, answer)


def test_a_silent_remote_is_left_out_probed_and_taken_back():
    a = core()
    connected = {"B": True, "C": True}
    (first,) = a.tick(1.0, connected)
    assert first.kind is MarkerKind.SNAPSHOT_REQUEST
    metadata, payload = response(message_of(first, pb.SnapshotRequest).snapshot_id, "B", 1.5)
    assert a.on_entry(Position(1, 1), metadata, payload, 1.5) == []  # C has not answered
    # C never answers: the snapshot times out, C is left out and probed
    written = a.tick(11.5, connected)
    assert a.controller.stats.timed_out == 1 and a.silent == {"C"}
    assert [message_of(w, pb.SnapshotRequest).snapshot_id.split("-")[1] for w in written] == [
        "probe",
        "11500",
    ]
    # the next snapshot involves B only and completes with one answer
    metadata, payload = response(message_of(written[1], pb.SnapshotRequest).snapshot_id, "B", 12.0)
    (done,) = a.on_entry(Position(1, 2), metadata, payload, 12.0)
    assert isinstance(done, WriteMarker) and done.kind is MarkerKind.SNAPSHOT
    assert [c.cluster for c in message_of(done, pb.Snapshot).clusters] == ["B"]
    # C answers the probe: it takes part again
    metadata, payload = response(message_of(written[0], pb.SnapshotRequest).snapshot_id, "C", 13.0)
    a.on_entry(Position(1, 3), metadata, payload, 13.0)
    assert a.silent == set()


def test_requests_are_answered_only_towards_remotes_and_only_while_fresh():
    a = core()
    request = pb.SnapshotRequest(snapshot_id="B-1", source_cluster="B")
    metadata = wire.MessageMetadata(
        producer_name="georep.repl.B",
        sequence_id=1,
        publish_time=100_000,
        marker_type=int(MarkerKind.SNAPSHOT_REQUEST),
        replicated_from="B",
    )
    payload = encode(MarkerKind.SNAPSHOT_REQUEST, request)
    (answer,) = a.on_entry(Position(1, 7), metadata, payload, 101.0)
    assert isinstance(answer, WriteMarker) and answer.replicate_to == ("B",)
    answered = message_of(answer, pb.SnapshotResponse)
    assert (
        answered.cluster.position.ledger_id,
        answered.cluster.position.entry_id,
    ) == (
        1,
        7,
    )
    assert (
        a.on_entry(Position(1, 8), metadata, payload, 100.0 + 11.0) == []
    )  # older than the timeout
    metadata.replicated_from = "D"  # not a cluster this topic replicates to: no route back
    assert a.on_entry(Position(1, 9), metadata, payload, 101.0) == []


def test_a_standby_subscription_writes_nothing():
    a = core()
    state = SubscriptionState(mark_delete=Position(1, 3), consumers=0, replicated=True)
    assert a.on_state({"standby": state}, 1.0) == []
    unflagged = SubscriptionState(mark_delete=Position(1, 3), consumers=1, replicated=False)
    assert a.on_state({"t": unflagged}, 1.0) == []


def test_a_snapshot_read_after_the_mdp_passed_it_still_moves_the_remote():
    a = core()
    moved = SubscriptionState(mark_delete=Position(1, 50), consumers=1, replicated=True)
    a.on_state({"s": moved}, 1.0)  # the MDP is past where the snapshot will sit
    snapshot = pb.Snapshot(
        snapshot_id="A-1",
        local_position=position(1, 20),
        clusters=[pb.ClusterPosition(cluster="B", position=position(9, 9))],
    )
    metadata = wire.MessageMetadata(
        producer_name="georep.sync.A",
        sequence_id=2,
        publish_time=2000,
        marker_type=int(MarkerKind.SNAPSHOT),
    )
    a.on_entry(Position(1, 21), metadata, encode(MarkerKind.SNAPSHOT, snapshot), 2.0)
    written = a.on_state({"s": moved}, 2.5)  # the same MDP as before
    updates = [w for w in written if w.kind is MarkerKind.SUBSCRIPTION_UPDATE]
    assert [
        message_of(u, pb.SubscriptionUpdate).clusters[0].position.entry_id for u in updates
    ] == [9]


def test_the_state_after_the_consumers_left_goes_out_once():
    """States are read when they change: the read after an application's last
    acknowledgement may find its consumers gone. That state is still the source's."""
    a = core()  # "s" had a consumer at its first read
    after = SubscriptionState(mark_delete=Position(1, 0), consumers=0, replicated=True)
    written = a.on_state({"s": after}, 1.0)
    assert [w.kind for w in written] == [MarkerKind.SUBSCRIPTION_ACK_RANGES]
    later = SubscriptionState(mark_delete=Position(1, 5), consumers=0, replicated=True)
    assert a.on_state({"s": later}, 2.0) == []  # a standby from now on


def test_copies_that_name_no_origin_are_counted_said_once_and_cleared_by_one_that_does():
    """Pulsar 3.0's replicator stamps no source position: such a copy cannot be mapped,
    and the gateway must say so rather than sync nothing in silence."""
    told: list[str] = []
    a = SyncCore(
        "B",
        namespace_sync=NamespaceSync(),
        settings=SyncSettings(),
        remotes=frozenset({"A"}),
        on_copy_without_origin=told.append,
    )
    for entry in range(3):
        copy = wire.MessageMetadata(
            producer_name="pulsar.repl.A", sequence_id=entry, publish_time=1, replicated_from="A"
        )
        assert a.on_entry(Position(4, entry), copy, b"x", 0.0) == []
    assert told == ["A"] and a.copies_without_origin == {"A": 3}
    assert a.stats()["copiesWithoutOrigin"] == {"A": 3}
    stamped = wire.MessageMetadata(
        producer_name="pulsar.repl.A", sequence_id=3, publish_time=1, replicated_from="A"
    )
    stamped.properties.add(key="__MSG_PROP_REPL_SOURCE_POSITION", value="7:5")
    a.on_entry(Position(4, 3), stamped, b"x", 0.0)
    assert a.copies_without_origin == {}


def test_exposure_is_reported_only_while_the_subscription_is_a_source_here():
    """A subscription whose consumers left (a standby now: its state comes from
    elsewhere) or that is no longer read has no exposure from this cluster."""
    a = core()  # "s" has a consumer; own entry (1, 0)
    acked = SubscriptionState(mark_delete=Position(1, 0), consumers=1, replicated=True)
    a.on_state({"s": acked}, 1.0)
    stored = {"B": Position(1, 0), "C": Position(1, 0)}
    figures = a.exposure(1.0, stored)["s"]
    assert figures["B"] is not None and figures["B"].messages == 1  # no marker heard yet
    left = SubscriptionState(mark_delete=Position(1, 0), consumers=0, replicated=True)
    a.on_state({"s": left}, 2.0)  # their last state goes out once: still a source
    assert "s" in a.exposure(2.0, stored)
    a.on_state({"s": left}, 3.0)  # a standby from now on
    assert a.exposure(3.0, stored) == {}
    a.on_state({"s": acked}, 4.0)  # consumers back
    assert "s" in a.exposure(4.0, stored)
    a.on_state({}, 5.0)  # deleted
    assert a.exposure(5.0, stored) == {}
