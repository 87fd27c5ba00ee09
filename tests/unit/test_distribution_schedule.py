"""Write sets, ack sets and coverage sets: tables from the design plus properties."""

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from georep.storage.client.distribution_schedule import Quorums
from georep.storage.errors import InvalidArgument


@pytest.mark.parametrize(
    ("quorums", "entry_id", "expected"),
    [
        (Quorums(3, 2, 2), 0, (0, 1)),
        (Quorums(3, 2, 2), 1, (1, 2)),
        (Quorums(3, 2, 2), 2, (2, 0)),
        (Quorums(3, 2, 2), 3, (0, 1)),
        (Quorums(3, 3, 2), 5, (2, 0, 1)),
        (Quorums(5, 3, 2), 4, (4, 0, 1)),
        (Quorums(1, 1, 1), 9, (0,)),
    ],
)
def test_write_set_table(quorums, entry_id, expected):
    assert quorums.write_set(entry_id) == expected


@pytest.mark.parametrize(
    ("e", "qw", "qa"), [(2, 3, 1), (3, 2, 3), (3, 0, 0), (0, 0, 0), (65, 2, 2)]
)
def test_bad_quorums_are_refused(e, qw, qa):
    with pytest.raises(InvalidArgument):
        Quorums(e, qw, qa)


quorum_triples = st.integers(1, 8).flatmap(
    lambda e: st.integers(1, e).flatmap(
        lambda qw: st.integers(1, qw).map(lambda qa: Quorums(e, qw, qa))
    )
)


@given(quorum_triples, st.integers(0, 10**12))
def test_write_set_is_qw_distinct_consecutive_indices(quorums, entry_id):
    ws = quorums.write_set(entry_id)
    assert len(ws) == quorums.write_quorum == len(set(ws))
    assert all(0 <= i < quorums.ensemble_size for i in ws)
    assert ws[0] == entry_id % quorums.ensemble_size
    assert all((b - a) % quorums.ensemble_size == 1 for a, b in itertools.pairwise(ws))


@given(quorum_triples)
def test_striping_is_even(quorums):
    """Over E consecutive entries each bookie is in exactly Qw write sets."""
    counts = [0] * quorums.ensemble_size
    for entry_id in range(quorums.ensemble_size):
        for index in quorums.write_set(entry_id):
            counts[index] += 1
    assert counts == [quorums.write_quorum] * quorums.ensemble_size


@given(quorum_triples, st.lists(st.integers(0, 7)))
def test_ack_set_met_at_qa_distinct(quorums, indices):
    acks = quorums.ack_set()
    for index in indices:
        acks.add(index)
    assert acks.met == (len(set(indices)) >= quorums.ack_quorum)


def test_ack_set_forgets_replaced_bookie():
    acks = Quorums(3, 3, 2).ack_set()
    assert not acks.add(0)
    assert acks.add(1)
    acks.remove(1)
    assert not acks.met
    assert acks.add(2)


@pytest.mark.parametrize(
    ("quorums", "answered", "covered"),
    [
        (Quorums(3, 2, 2), {0, 1}, True),
        (Quorums(3, 2, 2), {1}, False),
        (Quorums(3, 3, 2), {0, 1}, True),  # Qw-Qa+1 = 2 of the single quorum {0,1,2}
        (Quorums(3, 3, 2), {2}, False),
        (Quorums(3, 3, 3), {0}, True),
        (Quorums(3, 3, 1), {0, 1}, False),  # Qa=1 needs every bookie
        (Quorums(5, 3, 2), {0, 2, 4}, False),  # quorum {4,0,1}: 2 ok; {1,2,3}: only 2
        (Quorums(5, 3, 2), {0, 1, 3, 4}, True),
    ],
)
def test_coverage_table(quorums, answered, covered):
    coverage = quorums.coverage_set()
    for index in answered:
        coverage.add(index)
    assert coverage.covered == covered


@given(quorum_triples, st.sets(st.integers(0, 7)))
def test_coverage_means_no_write_quorum_can_reach_qa_unfenced(quorums, answered):
    """The point of coverage: once covered, every write quorum has fewer than Qa
    unfenced bookies, so no new entry can be confirmed by an old writer."""
    answered = {i for i in answered if i < quorums.ensemble_size}
    coverage = quorums.coverage_set()
    for index in answered:
        coverage.add(index)
    worst_unfenced = max(
        sum(1 for i in quorums.write_set(start) if i not in answered)
        for start in range(quorums.ensemble_size)
    )
    assert coverage.covered == (worst_unfenced < quorums.ack_quorum)
