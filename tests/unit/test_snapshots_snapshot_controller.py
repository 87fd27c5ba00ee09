"""The snapshot protocol's decisions, driven with an explicit clock."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypedDict

from hypothesis import given
from hypothesis import strategies as st

from georep.domain.position import Position
from georep.snapshots import markers_pb2 as pb
from georep.snapshots.markers import MarkerKind, decode, encode
from georep.snapshots.snapshot_controller import (
    CompletedSnapshot,
    SnapshotController,
    respond,
)


class Ready(TypedDict):
    published_since_last: bool
    replicated_subscriptions: int


READY: Ready = {"published_since_last": True, "replicated_subscriptions": 1}


def start(
    controller: SnapshotController, now: float, remotes: Iterable[str]
) -> pb.SnapshotRequest | None:
    return controller.maybe_start(now, remotes_connected=dict.fromkeys(remotes, True), **READY)


def test_one_remote_needs_one_round():
    controller = SnapshotController("a")
    request = start(controller, 0.0, ["b"])
    assert request is not None and request.source_cluster == "a"
    done = controller.on_response(0.2, respond(request, "b", Position(7, 41)), Position(3, 10))
    assert done == CompletedSnapshot(request.snapshot_id, Position(3, 10), {"b": Position(7, 41)})
    assert isinstance(done, CompletedSnapshot)
    assert controller.stats.completed == 1 and not controller.pending
    assert done.marker().clusters[0].cluster == "b"


def test_two_remotes_need_two_rounds_and_use_the_second():
    controller = SnapshotController("a")
    request = start(controller, 0.0, ["b", "c"])
    assert request is not None
    assert (
        controller.on_response(0.1, respond(request, "b", Position(7, 1)), Position(3, 10)) is None
    )
    again = controller.on_response(0.2, respond(request, "c", Position(8, 1)), Position(3, 11))
    assert isinstance(again, pb.SnapshotRequest) and again.snapshot_id == request.snapshot_id
    assert controller.on_response(0.3, respond(again, "c", Position(8, 5)), Position(3, 12)) is None
    done = controller.on_response(0.4, respond(again, "b", Position(7, 9)), Position(3, 13))
    assert isinstance(done, CompletedSnapshot)
    assert done.remote_positions == {"b": (7, 9), "c": (8, 5)}
    assert done.local_position == (3, 13)


def test_no_start_without_reason_or_while_disconnected_or_in_flight():
    controller = SnapshotController("a", interval_s=1.0)
    ready = dict.fromkeys(["b"], True)
    assert controller.maybe_start(0, remotes_connected={"b": False}, **READY) is None
    assert controller.maybe_start(0, remotes_connected={}, **READY) is None
    assert (
        controller.maybe_start(
            0, remotes_connected=ready, published_since_last=False, replicated_subscriptions=1
        )
        is None
    )
    assert (
        controller.maybe_start(
            0, remotes_connected=ready, published_since_last=True, replicated_subscriptions=0
        )
        is None
    )
    request = start(controller, 0.0, ["b"])
    assert request is not None
    assert start(controller, 5.0, ["b"]) is None  # one in flight
    controller.on_response(5.0, respond(request, "b", Position(1, 1)), Position(2, 2))
    assert start(controller, 0.5, ["b"]) is None  # within the interval
    assert start(controller, 5.1, ["b"]) is not None


def test_timeout_abandons_and_late_answers_are_ignored():
    controller = SnapshotController("a", timeout_s=30)
    request = start(controller, 0.0, ["b", "c"])
    assert request is not None
    controller.on_response(1.0, respond(request, "b", Position(7, 1)), Position(3, 10))
    assert controller.expire(31.0)
    assert controller.stats.timed_out == 1 and not controller.pending
    assert (
        controller.on_response(32.0, respond(request, "c", Position(8, 1)), Position(3, 11)) is None
    )
    assert controller.stats.ignored_responses == 1 and controller.stats.completed == 0


def test_foreign_answers_are_ignored():
    controller = SnapshotController("a")
    request = start(controller, 0.0, ["b"])
    assert request is not None
    stranger = pb.SnapshotResponse(
        snapshot_id=request.snapshot_id,
        cluster=pb.ClusterPosition(cluster="z", position=pb.Position(ledger_id=1, entry_id=1)),
    )
    assert controller.on_response(0.1, stranger, Position(3, 1)) is None
    other = pb.SnapshotResponse(snapshot_id="nope", cluster=stranger.cluster)
    assert controller.on_response(0.1, other, Position(3, 1)) is None
    assert controller.stats.ignored_responses == 2 and controller.pending


def test_markers_round_trip_through_the_codec():
    controller = SnapshotController("a")
    request = start(controller, 0.0, ["b"])
    assert request is not None
    _, decoded = decode(MarkerKind.SNAPSHOT_REQUEST, encode(MarkerKind.SNAPSHOT_REQUEST, request))
    assert isinstance(decoded, pb.SnapshotRequest)
    response = respond(decoded, "b", Position(7, 2))
    _, read_back = decode(
        MarkerKind.SNAPSHOT_RESPONSE, encode(MarkerKind.SNAPSHOT_RESPONSE, response)
    )
    assert isinstance(read_back, pb.SnapshotResponse)
    done = controller.on_response(0.1, read_back, Position(3, 4))
    assert isinstance(done, CompletedSnapshot)
    encode(MarkerKind.SNAPSHOT, done.marker())


@given(
    st.lists(st.sampled_from(["b", "c", "d"]), min_size=1, max_size=3, unique=True),
    st.lists(st.tuples(st.sampled_from(["b", "c", "d", "z"]), st.floats(0, 50)), max_size=30),
)
def test_completed_snapshots_are_never_partial(remotes, answers):
    controller = SnapshotController("a", timeout_s=30)
    request = start(controller, 0.0, remotes)
    assert request is not None
    now, local = 0.0, 0
    answered_in_round: set[str] = set()
    rounds_done = 0
    for cluster, step in answers:
        now += step / 10
        local += 1
        outcome = controller.on_response(
            now, respond(request, cluster, Position(9, local)), Position(1, local)
        )
        if isinstance(outcome, CompletedSnapshot):
            assert set(outcome.remote_positions) == set(remotes)
            assert rounds_done + 1 == (1 if len(remotes) == 1 else 2)
            assert now < 30
            return
        if isinstance(outcome, pb.SnapshotRequest):
            rounds_done += 1
            answered_in_round = set()
        elif cluster in remotes and now < 30:
            answered_in_round.add(cluster)
    assert not (answered_in_round == set(remotes) and now < 30)
