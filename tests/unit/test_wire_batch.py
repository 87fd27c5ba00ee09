"""Batched payloads: wire/batch.py."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from georep import limits
from georep.wire import pulsar_wire_pb2 as pb
from georep.wire.batch import build_batch, split_batch
from georep.wire.errors import BatchTooLarge, MalformedBatch, PulsarProtocolError
from tests.unit.test_wire_commands import messages


def _single(**fields: Any) -> pb.SingleMessageMetadata:
    return pb.SingleMessageMetadata(**{"payload_size": 0, **fields})


def test_worked_example_from_the_docstring() -> None:
    batched, count = build_batch([(_single(), b"ab"), (_single(), b"")])
    assert count == 2
    assert batched == bytes.fromhex("00000002 1802 6162 00000002 1800")
    assert split_batch(batched, 2) == [(_single(payload_size=2), b"ab"), (_single(), b"")]


@given(
    st.lists(
        st.tuples(messages(pb.SingleMessageMetadata), st.binary(max_size=40)),
        min_size=1,
        max_size=20,
    )
)
def test_build_then_split_round_trips(pairs: list[tuple[pb.SingleMessageMetadata, bytes]]) -> None:
    batched, count = build_batch(pairs)
    assert count == len(pairs)
    split = split_batch(batched, count)
    assert [payload for _, payload in split] == [payload for _, payload in pairs]
    for (metadata, payload), (original, _) in zip(split, pairs, strict=True):
        expected = pb.SingleMessageMetadata()
        expected.CopyFrom(original)
        expected.payload_size = len(payload)
        assert metadata == expected


def test_split_preserves_keys_and_properties() -> None:
    single = _single(partition_key="k", ordering_key=b"o", sequence_id=9, event_time=5)
    single.properties.add(key="a", value="b")
    batched, _ = build_batch([(single, b"x")])
    ((metadata, payload),) = split_batch(batched, 1)
    assert (metadata.partition_key, metadata.ordering_key, metadata.sequence_id) == ("k", b"o", 9)
    assert [(kv.key, kv.value) for kv in metadata.properties] == [("a", "b")]
    assert payload == b"x"


def _entry(header: bytes, payload: bytes = b"") -> bytes:
    return struct.pack(">I", len(header)) + header + payload


@pytest.mark.parametrize(
    ("payload", "count", "match"),
    [
        (_entry(b"\x18\x01", b"a"), 0, "allowed"),
        (_entry(b"\x18\x01", b"a"), limits.pulsar_batch_messages_count_max + 1, "allowed"),
        (_entry(b"\x18\x01", b"a"), 2, "no room"),  # fewer messages than announced
        (_entry(b"\x18\x01", b"a") + b"zz", 1, "left after"),  # more bytes than announced
        (b"\x00\x00", 1, "no room"),
        (struct.pack(">I", 99) + b"\x18\x01", 1, "overruns"),
        (_entry(b"\x18\x05", b"ab"), 1, "payload size"),  # payload_size beyond the end
        (_entry(b"\x18\xff\xff\xff\xff\x0f"), 1, "payload size"),  # payload_size -1
        (_entry(b"\xff\xff"), 1, "header"),  # does not parse
        (_entry(b""), 1, "payload_size"),  # lacks the required payload_size
    ],
)
def test_malformed_batches(payload: bytes, count: int, match: str) -> None:
    with pytest.raises(MalformedBatch, match=match):
        split_batch(payload, count)


@given(st.binary(max_size=100), st.integers(-5, 10))
def test_fuzz_split(payload: bytes, count: int) -> None:
    try:
        split_batch(payload, count)
    except PulsarProtocolError:
        pass


def test_build_limits() -> None:
    with pytest.raises(MalformedBatch):
        build_batch([])
    with pytest.raises(BatchTooLarge):
        build_batch([(_single(), b"")] * 3, messages_count_max=2)
    with pytest.raises(BatchTooLarge):
        build_batch([(_single(), b"x" * 60), (_single(), b"y" * 60)], bytes_max=100)
    assert build_batch([(_single(), b"")] * 2, messages_count_max=2)[1] == 2
