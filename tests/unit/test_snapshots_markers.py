"""Marker payloads: golden bytes, round trips, validation, and fuzzing the decoder."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from georep import limits
from georep.snapshots import markers_pb2 as pb
from georep.snapshots.errors import MarkerError
from georep.snapshots.markers import (
    MarkerKind,
    batch_indexes,
    batch_words,
    decode,
    encode,
    position,
)


def test_golden_snapshot_request_matches_the_docstring():
    data = encode(
        MarkerKind.SNAPSHOT_REQUEST, pb.SnapshotRequest(snapshot_id="s1", source_cluster="a")
    )
    assert data.hex(" ") == "0a 02 73 31 12 01 61"


names = st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=20)
positions = st.builds(position, st.integers(0, 2**40), st.integers(0, 2**24))
cluster_positions = st.builds(
    lambda c, p: pb.ClusterPosition(cluster=c, position=p), names, positions
)


@st.composite
def distinct_clusters(draw, max_size=5):
    chosen = draw(st.lists(names, max_size=max_size, unique=True))
    return [pb.ClusterPosition(cluster=c, position=draw(positions)) for c in chosen]


@st.composite
def sorted_ranges(draw):
    points = sorted(
        draw(
            st.lists(st.tuples(st.integers(0, 50), st.integers(0, 1000)), max_size=12, unique=True)
        )
    )
    ranges = []
    for first, last in zip(points[::2], points[1::2], strict=False):
        ranges.append(pb.PositionRange(first=position(*first), last=position(*last)))
    return ranges


@st.composite
def partial_batches(draw):
    size = draw(st.integers(1, 200))
    acked = draw(st.sets(st.integers(0, size - 1), max_size=size))
    return pb.PartialBatch(
        position=draw(positions), batch_size=size, acknowledged_words=batch_words(acked, size)
    )


@st.composite
def ack_ranges(draw):
    origins = draw(st.lists(names, max_size=3, unique=True))
    return pb.SubscriptionAckRanges(
        subscription_name=draw(names),
        source_cluster=draw(names),
        sequence=draw(st.integers(0, 2**64 - 1)),
        mark_delete_position=draw(positions),
        origins=[
            pb.OriginAcks(
                origin_cluster=o,
                ranges=draw(sorted_ranges()),
                partial_batches=draw(st.lists(partial_batches(), max_size=3)),
            )
            for o in origins
        ],
    )


payloads = st.one_of(
    st.tuples(
        st.just(MarkerKind.SNAPSHOT_REQUEST),
        st.builds(lambda i, c: pb.SnapshotRequest(snapshot_id=i, source_cluster=c), names, names),
    ),
    st.tuples(
        st.just(MarkerKind.SNAPSHOT_RESPONSE),
        st.builds(
            lambda i, c: pb.SnapshotResponse(snapshot_id=i, cluster=c), names, cluster_positions
        ),
    ),
    st.tuples(
        st.just(MarkerKind.SNAPSHOT),
        st.builds(
            lambda i, p, cs: pb.Snapshot(snapshot_id=i, local_position=p, clusters=cs),
            names,
            positions,
            distinct_clusters(),
        ),
    ),
    st.tuples(
        st.just(MarkerKind.SUBSCRIPTION_UPDATE),
        st.builds(
            lambda s, cs: pb.SubscriptionUpdate(subscription_name=s, clusters=cs),
            names,
            distinct_clusters(),
        ),
    ),
    st.tuples(st.just(MarkerKind.SUBSCRIPTION_ACK_RANGES), ack_ranges()),
)


@given(payloads)
def test_every_kind_round_trips(kind_and_message):
    kind, message = kind_and_message
    decoded_kind, decoded = decode(kind, encode(kind, message))
    assert decoded_kind == kind
    assert decoded == message


@settings(max_examples=300)
@given(st.sampled_from(list(MarkerKind)), st.binary(max_size=300))
def test_random_bytes_raise_only_marker_error(kind, data):
    try:
        decode(kind, data)
    except MarkerError:
        pass


@settings(max_examples=300)
@given(payloads, st.data())
def test_mutated_payloads_raise_only_marker_error(kind_and_message, data):
    kind, message = kind_and_message
    payload = bytearray(encode(kind, message))
    if payload:
        for _ in range(data.draw(st.integers(1, 4))):
            payload[data.draw(st.integers(0, len(payload) - 1))] = data.draw(st.integers(0, 255))
    try:
        decode(kind, bytes(payload))
    except MarkerError:
        pass


def _ranges(*spans, origin="a"):
    return pb.SubscriptionAckRanges(
        subscription_name="s",
        source_cluster="a",
        sequence=1,
        origins=[
            pb.OriginAcks(
                origin_cluster=origin,
                ranges=[pb.PositionRange(first=position(*f), last=position(*t)) for f, t in spans],
            )
        ],
    )


@pytest.mark.parametrize(
    ("kind", "message", "error"),
    [
        (MarkerKind.SNAPSHOT_REQUEST, pb.SnapshotRequest(), "lacks required fields: snapshot_id"),
        (MarkerKind.SNAPSHOT_REQUEST, pb.SnapshotRequest(snapshot_id=""), "empty snapshot id"),
        (MarkerKind.SNAPSHOT_REQUEST, pb.SnapshotRequest(snapshot_id="x" * 257), "exceeds 256"),
        (
            MarkerKind.SUBSCRIPTION_UPDATE,
            pb.SubscriptionUpdate(
                subscription_name="s",
                clusters=[
                    pb.ClusterPosition(cluster="b", position=position(1, 1)),
                    pb.ClusterPosition(cluster="b", position=position(1, 2)),
                ],
            ),
            "listed twice",
        ),
        (MarkerKind.SUBSCRIPTION_ACK_RANGES, _ranges(((3, 5), (3, 4))), "ends before it starts"),
        (
            MarkerKind.SUBSCRIPTION_ACK_RANGES,
            _ranges(((3, 1), (3, 4)), ((3, 4), (3, 9))),
            "overlap or are unsorted",
        ),
        (
            MarkerKind.SUBSCRIPTION_ACK_RANGES,
            _ranges(((4, 1), (4, 4)), ((3, 1), (3, 2))),
            "overlap or are unsorted",
        ),
        (
            MarkerKind.SUBSCRIPTION_ACK_RANGES,
            pb.SubscriptionAckRanges(
                subscription_name="s",
                source_cluster="a",
                sequence=1,
                origins=[pb.OriginAcks(origin_cluster="a"), pb.OriginAcks(origin_cluster="a")],
            ),
            "listed twice",
        ),
        (
            MarkerKind.SUBSCRIPTION_ACK_RANGES,
            pb.SubscriptionAckRanges(
                subscription_name="s",
                source_cluster="a",
                sequence=1,
                origins=[
                    pb.OriginAcks(
                        origin_cluster="a",
                        partial_batches=[
                            pb.PartialBatch(
                                position=position(1, 1), batch_size=3, acknowledged_words=[0b1000]
                            )
                        ],
                    )
                ],
            ),
            "beyond batch size",
        ),
        (
            MarkerKind.SUBSCRIPTION_ACK_RANGES,
            pb.SubscriptionAckRanges(
                subscription_name="s",
                source_cluster="a",
                sequence=1,
                origins=[
                    pb.OriginAcks(
                        origin_cluster="a",
                        partial_batches=[
                            pb.PartialBatch(
                                position=position(1, 1), batch_size=65, acknowledged_words=[1]
                            )
                        ],
                    )
                ],
            ),
            "1 words for a batch of 65",
        ),
    ],
)
def test_invalid_markers_are_refused_both_ways(kind, message, error):
    with pytest.raises(MarkerError, match=error):
        encode(kind, message)
    with pytest.raises(MarkerError, match=error):
        decode(kind, message.SerializePartialToString())


def test_too_many_ranges_are_refused():
    spans = [((1, 2 * i), (1, 2 * i)) for i in range(limits.marker_ranges_count_max + 1)]
    with pytest.raises(MarkerError, match="ranges exceed"):
        encode(MarkerKind.SUBSCRIPTION_ACK_RANGES, _ranges(*spans))


def test_oversized_payload_is_refused_before_parsing():
    with pytest.raises(MarkerError, match="exceeds"):
        decode(MarkerKind.SNAPSHOT, b"\0" * (limits.marker_bytes_max + 1))


def test_unknown_marker_type():
    with pytest.raises(MarkerError, match="unknown marker type 20"):
        decode(20, b"")


def test_payload_of_the_wrong_type_is_refused():
    with pytest.raises(MarkerError, match="carries SnapshotRequest"):
        encode(MarkerKind.SNAPSHOT_REQUEST, pb.Snapshot(snapshot_id="x"))


@given(st.integers(1, 300).flatmap(lambda n: st.tuples(st.just(n), st.sets(st.integers(0, n - 1)))))
def test_batch_words_round_trip(size_and_indexes):
    size, indexes = size_and_indexes
    assert batch_indexes(batch_words(indexes, size)) == sorted(indexes)
