"""The failback's arithmetic (failback.py) on hand-built delivery logs, its verdict, and
the consumers on B that acknowledge about half (scenarios.PartialAcks)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from georep.drill.delivery_log import AFTER, BEFORE, RETURN, Delivery
from georep.drill.failback import (
    FailbackFacts,
    classify_failback,
    failback_report,
    failback_verdict,
)
from georep.drill.failback_page import failback_section
from georep.drill.main import failback_text
from georep.drill.scenarios import ACK, PartialAcks, Received
from tests.unit.test_drill_report import delivery, produced_messages


def log_of(delivered_a, acked_a, delivered_b, acked_b, returned) -> list[Delivery]:
    return (
        [delivery(i, BEFORE, acked=i in acked_a) for i in delivered_a]
        + [delivery(i, AFTER, acked=i in acked_b) for i in delivered_b]
        + [delivery(i, RETURN, acked=True) for i in returned]
    )


def names(identities) -> set[int]:
    return {int(i.split(":")[1]) for i in identities}


def test_the_docstring_example():
    """0..9; A delivered 0..5, acked 0..3; B delivered 2..7, acked 4 and 6; on the
    return A delivered 3, 5, 7, 8, 9."""
    log = log_of(range(6), {0, 1, 2, 3}, range(2, 8), {4, 6}, [3, 5, 7, 8, 9])
    c = classify_failback(produced_messages(10), log)
    assert names(c.acked_before) == {0, 1, 2, 3, 4, 6}
    assert names(c.twice) == {3}
    assert names(c.redelivered) == {5, 7}
    assert names(c.first_delivered) == {8, 9}
    assert names(c.lost) == set()
    block = failback_report(c, produced_messages(10), FailbackFacts())
    assert block["twice"] == {"count": 1, "sample": ["m000003"], "acked_on_A": 1, "acked_on_B": 0}
    assert block["expected_on_return"] == 4 and block["delivered_on_return"] == 5
    v = failback_verdict("full", block)
    assert not v.passed and v.twice == 1 and v.acked_before == 6
    assert v.headline().startswith("failback fail: 1 twice on A (17% of 6 acknowledged")


@pytest.mark.parametrize(
    "case, returned, twice, lost, redelivered, passed",
    [
        # B acked 4 and 6: A must bring 5, 7, 8, 9 and nothing else
        ("exact", [5, 7, 8, 9], set(), set(), {5, 7}, True),
        ("acked on B came again", [4, 5, 7, 8, 9], {4}, set(), {5, 7}, False),
        ("one never came", [5, 7, 8], set(), {9}, {5, 7}, False),
        ("twice on the return is not twice", [5, 5, 7, 8, 9], set(), set(), {5, 7}, True),
    ],
)
def test_classification_table(case, returned, twice, lost, redelivered, passed):
    log = log_of(range(6), {0, 1, 2, 3}, range(2, 8), {4, 6}, returned)
    c = classify_failback(produced_messages(10), log)
    assert names(c.twice) == twice, case
    assert names(c.lost) == lost, case
    assert names(c.redelivered) == redelivered, case
    block = failback_report(c, produced_messages(10), FailbackFacts())
    assert failback_verdict("full", block).passed is passed


def test_a_message_acked_on_both_counts_once_in_twice_and_under_both_places():
    log = log_of([1], {1}, [1], {1}, [1])
    block = failback_report(
        classify_failback(produced_messages(2), log), produced_messages(2), FailbackFacts()
    )
    assert block["twice"]["count"] == 1
    assert block["twice"]["acked_on_A"] == block["twice"]["acked_on_B"] == 1
    assert block["lost"]["count"] == 1  # message 0: never delivered anywhere


def test_resume_time_and_unknown_deliveries():
    stray = delivery(99, RETURN)
    stray.origin_position, stray.drill_id = "7:7", "m999999"
    c = classify_failback(produced_messages(1), [delivery(0, RETURN), stray])
    facts = FailbackFacts(restored_at_ms=10_000, first_delivery_on_return_ms=12_500)
    block = failback_report(c, produced_messages(1), facts)
    assert block["unknown_deliveries"] == 1 and block["time_to_resume_on_A_s"] == 2.5


@st.composite
def failbacks(draw):
    count = draw(st.integers(1, 40))
    some = st.lists(st.integers(0, count - 1), max_size=60)
    delivered_a, delivered_b = draw(some), draw(some)
    return (
        count,
        delivered_a,
        draw(st.sets(st.sampled_from(delivered_a))) if delivered_a else set(),
        delivered_b,
        draw(st.sets(st.sampled_from(delivered_b))) if delivered_b else set(),
        draw(some),
    )


@settings(max_examples=300)
@given(failbacks())
def test_outcomes_partition_what_was_produced(drill):
    count, delivered_a, acked_a, delivered_b, acked_b, returned = drill
    produced = produced_messages(count)
    c = classify_failback(produced, log_of(delivered_a, acked_a, delivered_b, acked_b, returned))
    everything = set(produced)
    acked = c.acked_before
    # twice, redelivered and first delivered split what came on the return
    assert c.twice | c.redelivered | c.first_delivered == c.delivered_on_return
    assert not c.twice & c.redelivered and not c.twice & c.first_delivered
    assert not c.redelivered & c.first_delivered
    assert c.twice <= acked and not (c.redelivered | c.first_delivered) & acked
    # every message was acknowledged before, came on the return, or is lost: lost exactly
    # when neither
    assert acked | c.delivered_on_return | c.lost == everything
    assert not c.lost & (acked | c.delivered_on_return)
    # pass exactly when the return delivered what was acknowledged nowhere, and only that
    block = failback_report(c, produced, FailbackFacts())
    passed = c.delivered_on_return == everything - acked
    assert failback_verdict("t", block).passed is passed
    assert block["expected_on_return"] == len(everything - acked)
    assert c.deliveries_on_return == len(returned)


def test_partial_acks_acknowledge_even_pairs_out_of_order():
    policy = PartialAcks(random.Random(1))
    acked = []
    for index in range(48):  # 24 to acknowledge: three windows of 8
        for action in policy.on_message(Received(index, 0, index)):
            assert action.kind == ACK
            acked.append(action.message.index)
    assert set(acked) == {i for i in range(48) if (i // 2) % 2 == 0}
    assert acked != sorted(acked)  # shuffled windows: B holds ranges, acked out of order
    # what is left in a window stays unacknowledged
    tail = PartialAcks(random.Random(1))
    assert [a for i in range(8) for a in tail.on_message(Received(i, 0, i))] == []


def test_page_section_and_summary_line():
    log = log_of(range(6), {0, 1, 2, 3}, range(2, 8), {4, 6}, [4, 5, 7, 8, 9])
    facts = FailbackFacts(settle_s=2.5, settled=True)
    block = failback_report(
        classify_failback(produced_messages(10), log), produced_messages(10), facts
    )
    assert failback_section({"full": {"failback": None}}, str) == ""
    page = failback_section({"pulsar": {"failback": block}, "full": {"failback": block}}, str)
    assert page.count('<li class="fail"') == 2
    assert 'data-key="failback.twice">1 twice on A</span>' in page
    assert '<td class="n bad" data-key="failback.twice">1</td>' in page
    assert '<td class="n" data-key="failback.sync_settle_s">2.5</td>' in page
    assert failback_text(block).startswith(
        "failback: twice on A 1 (acked on A 0, on B 1)  lost 0  redelivered 2"
    )
