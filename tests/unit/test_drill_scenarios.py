"""The scenarios' acknowledgement policies: what each guarantees at the failure point,
and the delivery log's acknowledgement marks (individual and cumulative)."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from georep.drill.delivery_log import BEFORE, Delivery, DeliveryLog, read_jsonl, write_jsonl
from georep.drill.scenarios import (
    ACK,
    ACK_CUMULATIVE,
    NACK,
    SCENARIOS,
    AckEach,
    AckPolicy,
    CumulativeAcks,
    HoldingAcks,
    NackThenAck,
    Received,
)
from georep.drill.traffic import _TYPES
from georep.spark_reconcile.schema import DELIVERY_COLUMNS


def feed(policy, indexes, redelivery_count=0):
    """Acked and nacked indexes after the policy saw ``indexes`` in order."""
    acked: list[int] = []
    nacked: list[int] = []
    cumulative: list[int] = []
    for index in indexes:
        for action in policy.on_message(Received(index, redelivery_count, index)):
            {ACK: acked, NACK: nacked, ACK_CUMULATIVE: cumulative}[action.kind].append(
                action.message.index
            )
    return acked, nacked, cumulative


def test_every_scenario_is_complete():
    assert set(SCENARIOS) == {
        "shared-out-of-order",
        "key-shared",
        "exclusive-cumulative",
        "failover",
        "with-nacks",
        "avro-evolving",
    }
    assert [name for name, s in SCENARIOS.items() if s.avro] == ["avro-evolving"]
    for scenario in SCENARIOS.values():
        policies = [scenario.policy_on_a(i, 1, 100) for i in range(scenario.consumers)]
        assert len(policies) == scenario.consumers >= 1
        # one policy object per consumer: a policy keeps state (windows, holds, counts)
        assert all(isinstance(policy, AckPolicy) for policy in policies)
        assert len({id(policy) for policy in policies}) == scenario.consumers
        assert scenario.subscription_type in _TYPES


@settings(max_examples=200)
@given(
    st.integers(3, 2_000).flatmap(
        lambda target: st.tuples(
            st.just(target),
            st.lists(st.integers(0, 3 * target), min_size=target, max_size=target, unique=True),
        )
    ),
    st.integers(0, 2**32),
    st.integers(2, 4),
)
def test_shared_out_of_order_leaves_acked_ranges_above_an_unacked_message(
    delivered, seed, consumers
):
    """Whatever messages were delivered (prefetching skips some) and however they were
    split between consumers, the pinned message (target // 2) is never acknowledged and,
    once the target is delivered, a message above it is: so A holds acknowledged ranges
    above its mark-delete position at the failure."""
    target, indexes = delivered
    indexes.sort()  # a consumer receives in position order; interleaving is random
    scenario = SCENARIOS["shared-out-of-order"]
    policies = [scenario.policy_on_a(i, seed, target) for i in range(consumers)]
    rng = random.Random(seed)
    acked = set()
    for index in indexes:
        got, _, _ = feed(policies[rng.randrange(consumers)], [index])
        acked.update(got)
    pinned = target // 2
    assert pinned not in acked
    assert any(index > pinned for index in acked)
    assert {index for index in indexes if index > pinned} <= acked


def test_shared_out_of_order_with_prefetch_gaps_example():
    """Held (i % 50 == 25) and pinned are different messages; above the pinned one
    everything delivered is acknowledged."""
    policy = SCENARIOS["shared-out-of-order"].policy_on_a(0, 1, 3)
    acked, _, _ = feed(policy, [0, 1, 25])
    assert acked == [25]


def test_holding_acks_holds_and_releases():
    policy = HoldingAcks(random.Random(3), window=4, hold_every=10, hold_for=6)
    acked, _, _ = feed(policy, range(30))
    assert 5 in acked and acked.index(5) > acked.index(6)  # 5 held for 6 messages
    assert 25 not in acked  # still held when the feed stops
    assert sorted(acked) != acked  # shuffled windows
    assert len(acked) == len(set(acked))
    pinned = HoldingAcks(random.Random(3), window=4, pinned_index=12)
    acked, _, _ = feed(pinned, range(20))
    assert 12 not in acked and set(range(13, 20)) <= set(acked)


def test_cumulative_every_ten_and_nacks_once():
    _, _, cumulative = feed(CumulativeAcks(), range(35))
    assert cumulative == [9, 19, 29]
    acked, nacked, _ = feed(NackThenAck(), range(15))
    assert nacked == [3, 10] and sorted(acked) == [i for i in range(15) if i not in (3, 10)]
    acked, nacked, _ = feed(NackThenAck(), [3, 10], redelivery_count=1)
    assert acked == [3, 10] and nacked == []
    assert feed(AckEach(), range(3))[0] == [0, 1, 2]


def record(index: int, consumer: str = "c0", cluster: str = "A") -> Delivery:
    return Delivery(
        mode="full",
        cluster=cluster,
        phase=BEFORE,
        consumer=consumer,
        topic="persistent://public/default/t",
        subscription="s",
        drill_id=f"m{index:06d}",
        index=index,
        key="k",
        message_id=f"3:{index}",
        origin_cluster="A",
        origin_position=f"3:{index}",
        batch_index=-1,
        delivered_at=1_000,
    )


def test_cumulative_ack_marks_that_consumers_deliveries_up_to_it():
    log = DeliveryLog()
    mine = [log.append(record(i)) for i in range(5)]
    other = log.append(record(1, consumer="c1"))
    log.mark_cumulative(mine[2])
    assert [d.acked for d in mine] == [True, True, True, False, False]
    assert not other.acked
    log.mark(mine[4], nacked=True)
    log.mark_cumulative(mine[4])
    assert all(d.acked for d in mine) and mine[4].nacked


@pytest.mark.parametrize("acked", [True, False])
def test_jsonl_round_trip_carries_the_reconciliation_columns(tmp_path, acked):
    rows = [record(i) for i in range(3)]
    rows[1].acked = acked
    path = tmp_path / "deliveries.jsonl"
    assert write_jsonl(path, rows) == 3
    first = json.loads(path.read_text().splitlines()[0])
    assert set(DELIVERY_COLUMNS) <= set(first)
    assert (first["origin_ledger_id"], first["origin_entry_id"], first["phase"]) == (3, 0, BEFORE)
    assert read_jsonl(path) == rows
