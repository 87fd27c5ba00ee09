import pytest
from hypothesis import given
from hypothesis import strategies as st

from georep import limits
from georep.storage import entry
from georep.storage.errors import CorruptEntry, EntryTooLarge


def test_worked_example_from_the_docstring():
    data = entry.encode(7, 2, 1, 13, b"abc")
    assert len(data) == entry.HEADER_BYTES + 3
    assert entry.decode(data, 7, 2) == entry.Entry(7, 2, 1, 13, b"abc")


@given(
    st.integers(0, 2**64 - 1),
    st.integers(0, 2**63 - 1),
    st.integers(-1, 2**63 - 1),
    st.integers(0, 2**64 - 1),
    st.binary(max_size=2048),
)
def test_round_trip(ledger_id, entry_id, lac, length, payload):
    decoded = entry.decode(
        entry.encode(ledger_id, entry_id, lac, length, payload), ledger_id, entry_id
    )
    assert (
        decoded.ledger_id,
        decoded.entry_id,
        decoded.last_add_confirmed,
        decoded.length,
        decoded.payload,
    ) == (ledger_id, entry_id, lac, length, payload)


@given(st.binary(min_size=1, max_size=256), st.data())
def test_any_single_bit_flip_is_caught(payload, data):
    good = bytearray(entry.encode(1, 5, 4, 100, payload))
    position = data.draw(st.integers(0, len(good) * 8 - 1))
    good[position // 8] ^= 1 << (position % 8)
    with pytest.raises(CorruptEntry):
        entry.decode(bytes(good), 1, 5)


def test_wrong_ids_are_caught():
    data = entry.encode(1, 5, 4, 100, b"x")
    with pytest.raises(CorruptEntry, match="expected ledger 2"):
        entry.decode(data, 2, 5)
    with pytest.raises(CorruptEntry, match="expected entry 6"):
        entry.decode(data, 1, 6)


@given(st.binary(max_size=entry.HEADER_BYTES - 1))
def test_short_input_is_corrupt_not_a_crash(data):
    with pytest.raises(CorruptEntry):
        entry.decode(data)


def test_oversized_payload_is_refused():
    with pytest.raises(EntryTooLarge):
        entry.encode(1, 0, -1, 0, b"\0" * (limits.entry_payload_bytes_max + 1))
