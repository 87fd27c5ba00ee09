"""The persisted cursor state: round trips, the worked example, and refusal of anything
malformed; plus Position and ManagedLedgerConfig checks."""

from __future__ import annotations

import math
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from georep import limits
from georep.domain.position import InvalidPosition, Position
from georep.storage.errors import CorruptEntry, InvalidArgument
from georep.storage.managed_ledger import cursor_state
from georep.storage.managed_ledger.config import ManagedLedgerConfig
from georep.storage.managed_ledger.cursor_state import CursorState

P = Position


def test_worked_example() -> None:
    state = CursorState(P(7, 41), ((P(7, 43), P(7, 45)),), {}, ((P(7, 42), 0b101),))
    data = cursor_state.encode(state)
    assert len(data) == 91
    assert cursor_state.decode(data) == state


def test_version_1_states_are_still_read() -> None:
    head = struct.pack(">BqqI", 1, 7, 41, 1) + struct.pack(">qqqq", 7, 43, 7, 45)
    data = head + struct.pack(">I", 9) + b'{"a":"b"}'
    assert cursor_state.decode(data) == CursorState(P(7, 41), ((P(7, 43), P(7, 45)),), {"a": "b"})
    with pytest.raises(CorruptEntry):
        cursor_state.decode(data + struct.pack(">I", 0))  # version 1 ends after properties


@st.composite
def states(draw) -> CursorState:
    mark_delete = P(draw(st.integers(0, 2**40)), draw(st.integers(-1, 2**40)))
    ends = sorted(set(draw(st.lists(st.integers(1, 10_000), max_size=40, unique=True))))
    if len(ends) % 2:
        ends.pop()
    ranges = tuple(
        (P(mark_delete.ledger_id + 1, low), P(mark_delete.ledger_id + 1, high))
        for low, high in zip(ends[::2], ends[1::2], strict=True)
    )
    properties = draw(st.dictionaries(st.text(max_size=20), st.text(max_size=40), max_size=5))
    entries = sorted(draw(st.lists(st.integers(0, 10_000), max_size=20, unique=True)))
    batches = tuple(
        (P(mark_delete.ledger_id + 2, entry), draw(st.integers(1, 2**300))) for entry in entries
    )
    return CursorState(mark_delete, ranges, properties, batches)


@given(states())
def test_round_trip(state: CursorState) -> None:
    assert cursor_state.decode(cursor_state.encode(state)) == state


def test_largest_state_fits_an_entry() -> None:
    ranges = tuple((P(2, 2 * i), P(2, 2 * i)) for i in range(limits.cursor_ranges_persisted_max))
    count = limits.cursor_batch_entries_persisted_max
    words = (limits.cursor_batch_bytes_persisted_max // count - 20) // 8
    bits = 1 << (64 * words - 1)
    batches = tuple((P(3, i), bits) for i in range(count))
    assert sum(cursor_state.batch_bytes(b) for _, b in batches) <= (
        limits.cursor_batch_bytes_persisted_max
    )
    properties = {"k": "v" * (limits.cursor_properties_bytes_max - 20)}
    state = CursorState(P(1, 5), ranges, properties, batches)
    data = cursor_state.encode(state)
    assert len(data) <= limits.cursor_state_bytes_max <= limits.entry_payload_bytes_max
    assert cursor_state.decode(data) == state


def test_encode_refuses_what_it_could_not_store() -> None:
    with pytest.raises(InvalidArgument):
        cursor_state.encode(
            CursorState(P(1, 1), ((P(1, 3), P(1, 3)),) * (limits.cursor_ranges_persisted_max + 1))
        )
    with pytest.raises(InvalidArgument):
        cursor_state.encode_properties({"k": "v" * limits.cursor_properties_bytes_max})
    with pytest.raises(InvalidArgument):
        cursor_state.encode_properties({"k": 1})  # type: ignore[dict-item]
    too_many = tuple((P(2, i), 1) for i in range(limits.cursor_batch_entries_persisted_max + 1))
    with pytest.raises(InvalidArgument):
        cursor_state.encode(CursorState(P(1, 1), batches=too_many))
    too_big = ((P(2, 0), 1 << (8 * limits.cursor_batch_bytes_persisted_max)),)
    with pytest.raises(InvalidArgument):
        cursor_state.encode(CursorState(P(1, 1), batches=too_big))
    with pytest.raises(InvalidArgument):
        cursor_state.encode(CursorState(P(1, 1), batches=((P(2, 0), 0),)))


GOOD = cursor_state.encode(
    CursorState(P(3, 1), ((P(3, 3), P(3, 4)), (P(4, 0), P(4, 0))), {"a": "b"})
)
NO_BATCHES = struct.pack(">I", 0)
BEFORE_BATCHES = GOOD[: -len(NO_BATCHES)]
assert GOOD.endswith(b'{"a":"b"}' + NO_BATCHES)


def batch(ledger_id: int, entry_id: int, *words: int) -> bytes:
    return struct.pack(f">qqI{len(words)}Q", ledger_id, entry_id, len(words), *words)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        GOOD[:-1],  # truncated batch count
        BEFORE_BATCHES[:-1],  # truncated properties
        GOOD + b" ",  # trailing byte
        b"\x03" + GOOD[1:],  # unknown format version
        GOOD[:17] + struct.pack(">I", 3) + GOOD[21:],  # claims a third range
        # second range below the first
        GOOD[:53] + struct.pack(">qqqq", 3, 0, 3, 0) + GOOD[85:],
        # first range not above the MDP
        GOOD[:21] + struct.pack(">qqqq", 3, 1, 3, 2) + GOOD[53:],
        GOOD[:-17] + struct.pack(">I", 5) + b"[1,2]" + NO_BATCHES,  # properties not an object
        GOOD[:-17] + struct.pack(">I", 5) + b"\xff\xfe{}}" + NO_BATCHES,  # not UTF-8
        GOOD[:-17] + struct.pack(">I", 7) + b'{"a":1}' + NO_BATCHES,  # not strings
        BEFORE_BATCHES + struct.pack(">I", 2) + batch(3, 2, 1),  # claims a second entry
        BEFORE_BATCHES + struct.pack(">I", 1) + batch(3, 1, 1),  # at the MDP
        BEFORE_BATCHES + struct.pack(">I", 1) + batch(3, 4, 1),  # in a range
        BEFORE_BATCHES + struct.pack(">I", 2) + batch(3, 5, 1) + batch(3, 2, 1),  # order
        BEFORE_BATCHES + struct.pack(">I", 1) + batch(3, 2, 0),  # nothing unacknowledged
        BEFORE_BATCHES + struct.pack(">I", 1) + batch(3, 2, 1, 0),  # last word zero
        BEFORE_BATCHES + struct.pack(">I", 1) + batch(3, 2, 1)[:-1],  # truncated word
        BEFORE_BATCHES + struct.pack(">I", 1) + struct.pack(">qqI", 3, 2, 2**31),  # huge
        BEFORE_BATCHES + struct.pack(">I", limits.cursor_batch_entries_persisted_max + 1),
    ],
)
def test_decode_refuses_malformed_states(data: bytes) -> None:
    with pytest.raises(CorruptEntry):
        cursor_state.decode(data)


def test_decode_reads_a_good_batch_section() -> None:
    data = BEFORE_BATCHES + struct.pack(">I", 2) + batch(3, 2, 5) + batch(4, 1, 0, 1)
    assert cursor_state.decode(data).batches == ((P(3, 2), 5), (P(4, 1), 1 << 64))


# --- Position -----------------------------------------------------------------------
def test_position_order_and_helpers() -> None:
    assert P.EARLIEST < P(0, 0) < P(7, 12) < P(9, -1) < P(9, 0) < P.LATEST
    assert P(9, 0).predecessor() == P(9, -1) and P(9, 0).next_in_ledger() == P(9, 1)
    assert str(P(12, 5)) == "12:5" and P.parse("12:5") == P(12, 5)
    assert not P(3, -1).is_entry_id and P(3, 0).is_entry_id


@pytest.mark.parametrize("text", ["", "12", "a:b", "1:2:3", "-2:0", "1:99999999999999999999"])
def test_position_parse_refuses(text: str) -> None:
    with pytest.raises(InvalidPosition):
        P.parse(text)


# --- config -------------------------------------------------------------------------
@pytest.mark.parametrize(
    "changes",
    [
        {"ensemble_size": 2, "write_quorum": 3},
        {"ack_quorum": 0},
        {"ensemble_size": limits.ensemble_size_max + 1},
        {"rollover_entries_max": 0},
        {"rollover_bytes_max": -1},
        {"rollover_age_s_max": math.nan},
        {"retention_s": -1},
        {"retention_bytes": True},
        {"cursor_persist_interval_ms": -1},
        {"cursor_ranges_persisted_max": limits.cursor_ranges_persisted_max + 1},
        {"cursor_ranges_persisted_max": 0},
        {"cursor_rollover_entries_max": 0},
    ],
)
def test_config_refuses(changes) -> None:
    with pytest.raises(InvalidArgument):
        ManagedLedgerConfig(**changes)


def test_config_defaults() -> None:
    config = ManagedLedgerConfig()
    assert (config.ensemble_size, config.write_quorum, config.ack_quorum) == (3, 2, 2)
    assert config.rollover_entries_max == 50_000 and config.rollover_bytes_max == 256 * 2**20
    assert config.rollover_age_s_max == 4 * 3600 and not config.has_retention
    assert ManagedLedgerConfig(retention_s=math.inf).has_retention
