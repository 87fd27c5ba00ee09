"""The bookie wire codec: round trips, arbitrary splits, and fuzzing."""

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from georep import limits
from georep.storage import bookie_protocol as p
from georep.storage.errors import ProtocolError

requests = st.one_of(
    st.builds(
        p.AddRequest,
        st.integers(1, 2**63),
        st.integers(0, 2**63),
        st.integers(0, 2**62),
        st.booleans(),
        st.binary(max_size=300),
    ),
    st.builds(
        p.ReadRequest,
        st.integers(1, 2**63),
        st.integers(0, 2**63),
        st.integers(-1, 2**62),
        st.booleans(),
    ),
    st.builds(p.ReadLacRequest, st.integers(1, 2**63), st.integers(0, 2**63), st.booleans()),
    st.builds(p.HealthRequest, st.integers(1, 2**63)),
    st.builds(p.FaultRequest, st.integers(1, 2**63), st.just(b'{"delay_ms": 5}')),
)
responses = st.one_of(
    st.builds(
        p.AddResponse,
        st.integers(1, 2**63),
        st.just(p.Status.OK),
        st.just(""),
        st.integers(0, 2**63),
        st.integers(0, 2**62),
    ),
    st.builds(
        p.ReadResponse,
        st.integers(1, 2**63),
        st.just(p.Status.OK),
        st.just(""),
        st.binary(max_size=300),
    ),
    st.builds(
        p.ReadLacResponse,
        st.integers(1, 2**63),
        st.just(p.Status.OK),
        st.just(""),
        st.integers(-1, 2**62),
        st.integers(-1, 2**62),
    ),
    st.builds(
        p.AddResponse,
        st.integers(1, 2**63),
        st.sampled_from([s for s in p.Status if s != p.Status.OK]),
        st.text(max_size=40),
    ),
)


def feed_in_pieces(decoder, data, cuts):
    out = []
    points = sorted({c % (len(data) + 1) for c in cuts})
    start = 0
    for point in [*points, len(data)]:
        out += decoder.feed(data[start:point])
        start = point
    return out


@given(st.lists(requests, min_size=1, max_size=8), st.lists(st.integers(0, 10**6), max_size=12))
def test_requests_survive_any_split(messages, cuts):
    data = b"".join(p.encode(m) for m in messages)
    decoded = feed_in_pieces(p.FrameDecoder(responses=False), data, cuts)
    assert decoded == messages


@given(st.lists(responses, min_size=1, max_size=8), st.lists(st.integers(0, 10**6), max_size=12))
def test_responses_survive_any_split(messages, cuts):
    data = b"".join(p.encode(m) for m in messages)
    decoded = feed_in_pieces(p.FrameDecoder(responses=True), data, cuts)
    assert [(type(m), m.request_id, m.status) for m in decoded] == [
        (type(m), m.request_id, m.status) for m in messages
    ]


def test_oversized_frame_refused_before_its_body_arrives():
    decoder = p.FrameDecoder(responses=False)
    with pytest.raises(ProtocolError, match="exceeds the maximum"):
        decoder.feed(struct.pack(">I", limits.bookie_frame_bytes_max + 1))


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (struct.pack(">I", 3) + b"abc", "shorter than the header"),
        (struct.pack(">IBBBBQ", 12, 9, 1, 0, 0, 1), "unsupported protocol version"),
        (struct.pack(">IBBBBQ", 12, 1, 99, 0, 0, 1), "unknown op code"),
        (struct.pack(">IBBBBQ", 12, 1, 1, 0, 0, 1), "ADD body"),
        (struct.pack(">IBBBBQ", 12, 1, 2, 0, 5, 1), "carries a status"),
    ],
)
def test_bad_frames_get_named_errors(frame, message):
    with pytest.raises(ProtocolError, match=message):
        p.FrameDecoder(responses=False).feed(frame)


@settings(max_examples=400)
@given(st.binary(max_size=200), st.booleans())
def test_fuzz_random_bytes_only_raise_protocol_error(data, responses):
    decoder = p.FrameDecoder(responses=responses)
    try:
        decoder.feed(data)
    except ProtocolError:
        pass


@settings(max_examples=400)
@given(requests, st.data())
def test_fuzz_mutated_frames_only_raise_protocol_error(message, data):
    frame = bytearray(p.encode(message))
    for _ in range(data.draw(st.integers(1, 4))):
        frame[data.draw(st.integers(0, len(frame) - 1))] = data.draw(st.integers(0, 255))
    try:
        p.FrameDecoder(responses=False).feed(bytes(frame))
    except ProtocolError:
        pass


def test_encoder_refuses_oversized_frame():
    with pytest.raises(ProtocolError):
        p.encode(p.ReadResponse(1, p.Status.OK, "", b"\0" * limits.bookie_frame_bytes_max))
