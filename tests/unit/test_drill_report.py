"""The drill's arithmetic on hand-built delivery logs: duplicates, redelivered, lost,
not replicated; A's cursor; the report's fields."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from georep import limits
from georep.domain.position import Position
from georep.drill.delivery_log import AFTER, BEFORE, Delivery
from georep.drill.report import (
    CursorState,
    ModeFacts,
    Produced,
    classify,
    mode_report,
)
from georep.pulsar_text.cursor import parse_ranges


def position(index: int) -> str:
    return f"3:{index}"


def produced_messages(count: int) -> dict[str, Produced]:
    return {
        position(i): Produced(f"m{i:06d}", i, f"key-{i % 3}", position(i)) for i in range(count)
    }


def delivery(index: int, phase: str, *, acked: bool = False, origin: str | None = None) -> Delivery:
    on_a = phase != AFTER  # before the failure, or back on A after a failback
    return Delivery(
        mode="full",
        cluster="A" if on_a else "B",
        phase=phase,
        consumer="c0",
        topic="persistent://public/default/t",
        subscription="s",
        drill_id=f"m{index:06d}",
        index=index,
        key=f"key-{index % 3}",
        message_id=position(index) if on_a else f"9:{index}",
        origin_cluster="A",
        origin_position=position(index) if origin is None else origin,
        batch_index=-1,
        delivered_at=1_000 + index,
        acked=acked,
    )


def on_a(indexes, acked=()):
    return [delivery(i, BEFORE, acked=i in set(acked)) for i in indexes]


def on_b(indexes):
    return [delivery(i, AFTER) for i in indexes]


def drill_ids(identities):
    return sorted(int(p.split(":")[1]) for p in identities)


def test_the_docstring_example():
    """0..9 produced, 0..7 replicated; A delivered 0..5 and acked 0..3; B delivered 2..7."""
    produced = produced_messages(10)
    log = on_a(range(6), acked=range(4)) + on_b(range(2, 8))
    c = classify(produced, [position(i) for i in range(8)], log)
    assert drill_ids(c.duplicates) == [2, 3]
    assert drill_ids(c.redelivered) == [4, 5]
    assert drill_ids(c.lost) == []
    assert drill_ids(c.not_replicated) == [8, 9]
    assert drill_ids(c.not_replicated_unconsumed) == [8, 9]
    assert (len(c.delivered_a), len(c.acked_a), len(c.delivered_b)) == (6, 4, 6)


@pytest.mark.parametrize(
    ("case", "delivered_a", "acked_a", "delivered_b", "replicated", "expect"),
    [
        # perfect sync: B delivers exactly what A did not acknowledge
        ("perfect", range(5), range(5), range(5, 10), range(10),
         {"duplicates": [], "redelivered": [], "lost": []}),
        # MDP-only sync after out-of-order acks: acked 3, 4 come again
        ("mdp only", range(5), [0, 1, 3, 4], range(2, 10), range(10),
         {"duplicates": [3, 4], "redelivered": [2], "lost": []}),
        # B skipped an unacknowledged message: lost
        ("skipped", range(5), [0, 1, 3, 4], range(5, 10), range(10),
         {"duplicates": [], "redelivered": [], "lost": [2]}),
        # never delivered anywhere and never reached B: not replicated, not lost
        ("link lost", range(3), range(3), [3], range(4),
         {"duplicates": [], "redelivered": [], "lost": [], "not_replicated": [4, 5, 6, 7, 8, 9]}),
        # acked on A but never replicated: consumed, neither lost nor duplicate
        ("acked, not replicated", range(6), range(6), [4, 5], range(3),
         {"duplicates": [4, 5], "lost": [], "not_replicated": [3, 6, 7, 8, 9]}),
    ],
)  # fmt: skip
def test_classification_table(case, delivered_a, acked_a, delivered_b, replicated, expect):
    produced = produced_messages(10)
    log = on_a(delivered_a, acked=acked_a) + on_b(delivered_b)
    c = classify(produced, [position(i) for i in replicated], log)
    for name, indexes in expect.items():
        assert drill_ids(getattr(c, name)) == indexes, f"{case}: {name}"


def test_a_delivery_on_b_counts_as_replicated_even_if_the_reader_missed_it():
    c = classify(produced_messages(3), [], on_b([1]))
    assert drill_ids(c.replicated) == [1]
    assert drill_ids(c.not_replicated) == [0, 2]


def test_redelivery_on_a_and_on_b_count_once_per_identity():
    produced = produced_messages(4)
    log = [*on_a([0, 1]), delivery(1, BEFORE, acked=True), *on_b([2, 2, 3])]
    c = classify(produced, [position(i) for i in range(4)], log)
    assert (c.deliveries_a, len(c.delivered_a), len(c.acked_a)) == (3, 2, 1)
    assert (c.deliveries_b, len(c.delivered_b)) == (3, 2)
    assert drill_ids(c.delivered_twice_b) == [2]
    assert drill_ids(c.redelivered) == [] and drill_ids(c.lost) == [0]


def test_identity_is_the_origin_position_checked_against_the_drill_id():
    produced = produced_messages(4)
    wrong = delivery(1, AFTER, origin=position(2))  # a copy claiming another origin
    missing = delivery(3, AFTER, origin="")  # a copy without origin properties
    stranger = delivery(99, AFTER, origin="")  # nothing produced matches
    c = classify(produced, [], [wrong, missing, stranger])
    assert c.origin_mismatches == 1 and c.origin_missing == 2 and c.unknown_deliveries == 1
    # the mismatched copy counts as what its origin says; the missing one by its drill id
    assert drill_ids(c.delivered_b) == [2, 3]


def test_parse_ranges_and_cursor_coverage():
    assert parse_ranges("[]") == []
    assert parse_ranges("[(3:5..3:7], (3:9..4:1]]") == [((3, 5), (3, 7)), ((3, 9), (4, 1))]
    cursor = CursorState.from_internal_stats(
        {"markDeletePosition": "3:4", "individuallyDeletedMessages": "[(3:5..3:7], (3:9..4:1]]"}
    )
    covered = [
        p
        for p in [Position(3, e) for e in range(12)] + [Position(4, e) for e in (0, 1, 2)]
        if cursor.covers(p)
    ]
    assert covered == [(3, e) for e in (0, 1, 2, 3, 4, 6, 7, 10, 11)] + [(4, 0), (4, 1)]


def test_report_fields_and_duplicates_whose_ack_a_had_not_recorded():
    produced = produced_messages(10)
    log = on_a(range(6), acked=[0, 1, 2, 4, 5]) + on_b(range(1, 10))
    c = classify(produced, [position(i) for i in range(10)], log)
    facts = ModeFacts(
        "pulsar-compatible",
        "persistent://public/default/t",
        "s",
        "kill",
        failed_at_ms=10_000,
        first_delivery_on_b_ms=11_250,
        sync_lag_ms=120.0,
        # A recorded 0..2 and 4, not 5 (its ack was still in the client's buffer)
        a_cursor={"markDeletePosition": "3:2", "individuallyDeletedMessages": "[(3:3..3:4]]"},
    )
    report = mode_report(c, produced, facts)
    assert report["duplicates"] == {
        "count": 4,
        "sample": ["m000001", "m000002", "m000004", "m000005"],
        "ack_not_on_A_cursor": 1,
    }
    assert report["redelivered"] == {"count": 1, "sample": ["m000003"]}
    assert report["lost"] == {"count": 0, "sample": []}
    assert report["a_cursor_at_failure"]["acked_on_A_confirmed"] == 4
    assert report["time_to_resume_on_B_s"] == 1.25
    assert report["sync_lag_at_failure_ms"] == 120.0
    assert (report["produced"], report["replicated_before_failure"]) == (10, 10)
    assert (report["delivered_on_A"], report["acked_on_A"], report["unacked_on_A"]) == (6, 5, 1)


def test_samples_are_bounded_and_in_production_order():
    count = limits.drill_sample_ids_max + 5
    produced = produced_messages(count)
    log = on_a(range(count), acked=range(count)) + on_b(reversed(range(count)))
    report = mode_report(
        classify(produced, list(produced), log), produced, ModeFacts("full", "t", "s", "kill")
    )
    assert report["duplicates"]["count"] == count
    assert report["duplicates"]["sample"] == [
        f"m{i:06d}" for i in range(limits.drill_sample_ids_max)
    ]
    assert report["duplicates"]["ack_not_on_A_cursor"] is None
    assert report["time_to_resume_on_B_s"] is None


@st.composite
def drills(draw):
    count = draw(st.integers(1, 40))
    indexes = st.lists(st.integers(0, count - 1), max_size=3 * count)
    return (
        count,
        draw(st.sets(st.integers(0, count - 1))),  # replicated (per the reader)
        draw(indexes),  # deliveries on A
        draw(st.sets(st.integers(0, count - 1))),  # acked on A (of those delivered)
        draw(indexes),  # deliveries on B
    )


@settings(max_examples=300)
@given(drills())
def test_categories_partition_what_was_replicated(drill):
    count, replicated, delivered_a, acked, delivered_b = drill
    produced = produced_messages(count)
    log = [delivery(i, BEFORE, acked=i in acked) for i in delivered_a] + on_b(delivered_b)
    c = classify(produced, [position(i) for i in replicated], log)
    everything = set(produced)
    assert c.acked_a <= c.delivered_a <= everything and c.delivered_b <= c.replicated
    # duplicates and redelivered are the deliveries on B of what A delivered, split by ack
    assert c.duplicates | c.redelivered == c.delivered_a & c.delivered_b
    assert not c.duplicates & c.redelivered
    assert c.duplicates <= c.acked_a and not c.redelivered & c.acked_a
    # every replicated message was acked on A, delivered on B, or lost — lost exactly
    # when neither
    assert c.lost | (c.replicated & c.acked_a) | c.delivered_b == c.replicated
    assert not c.lost & (c.acked_a | c.delivered_b)
    # replicated and not replicated split what was produced
    assert c.replicated | c.not_replicated == everything
    assert not c.replicated & c.not_replicated
    assert c.not_replicated_unconsumed == c.not_replicated - c.acked_a
    assert c.deliveries_a == len(delivered_a) and c.deliveries_b == len(delivered_b)
