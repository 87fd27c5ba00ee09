"""The failback's arithmetic: what the consumers saw on A after they moved home (no I/O).

A failback drill goes on after the failover: the consumers on B acknowledge part of what
they drain (scenarios.PartialAcks), A comes back with its data, B's subscription state
is synced to A, and the consumers move home to A and drain there (phase ``return``).

**Identity** is the origin MessageId, as in report.py: on A (before the failure and on
the return) a delivery's own id, on B the origin position its copy carries.

**Acknowledged before the return** means an acknowledgement covering a delivery was
*sent* by a consumer on A before the failure or by a consumer on B after it. Whether
either cluster recorded it does not matter: the consumer did its part.

**Sets** (of identities):

=====================  ===============================================================
twice                  acknowledged before the return *and* delivered on A on the
                       return: consumed twice (split by where it was acknowledged:
                       ``acked_on_A``, ``acked_on_B``; a message acknowledged on both
                       counts in both)
redelivered            delivered before the return (on A or B), acknowledged nowhere,
                       delivered on the return: expected
first_delivered        delivered on the return and never before
lost                   produced, acknowledged nowhere, not delivered on the return
=====================  ===============================================================

Every produced message is on A (it was produced there), so ``lost`` needs no
"replicated" caveat: each message not acknowledged before the return should come on it.

Worked example: messages 0..9; A delivered 0..5 and acknowledged 0..3; B delivered
2..7 and acknowledged 4 and 6; on the return A delivered 3, 5, 7, 8 and 9. Then
acknowledged before = {0, 1, 2, 3, 4, 6}; twice = {3} (acknowledged on A);
redelivered = {5, 7}; first_delivered = {8, 9}; lost = {} (0..4 and 6 acknowledged, the
rest delivered).

**Pass**: nothing twice and nothing lost.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from georep import limits
from georep.domain.shares import percent, share
from georep.drill.delivery_log import AFTER, BEFORE, RETURN, Delivery
from georep.drill.report import Produced


@dataclass(frozen=True)
class FailbackClassification:
    produced: int
    acked_on_a: frozenset[str]
    acked_on_b: frozenset[str]
    delivered_on_return: frozenset[str]
    deliveries_on_return: int
    twice: frozenset[str]
    redelivered: frozenset[str]
    first_delivered: frozenset[str]
    lost: frozenset[str]
    delivered_twice_on_return: frozenset[str]
    unknown_deliveries: int = 0

    @property
    def acked_before(self) -> frozenset[str]:
        return self.acked_on_a | self.acked_on_b


def classify_failback(
    produced: Mapping[str, Produced], deliveries: Iterable[Delivery]
) -> FailbackClassification:
    """``produced``: by origin position; ``deliveries``: one mode's log, all phases."""
    by_drill_id = {message.drill_id: position for position, message in produced.items()}
    acked_a: set[str] = set()
    acked_b: set[str] = set()
    delivered_before: set[str] = set()
    on_return: Counter[str] = Counter()
    unknown = 0
    for delivery in deliveries:
        identity = delivery.origin_position
        if identity not in produced:
            identity = by_drill_id.get(delivery.drill_id, "")
            if not identity:
                unknown += delivery.phase == RETURN
                continue
        if delivery.phase == RETURN:
            on_return[identity] += 1
            continue
        if delivery.phase in (BEFORE, AFTER):
            delivered_before.add(identity)
            if delivery.acked:
                (acked_a if delivery.phase == BEFORE else acked_b).add(identity)
    acked = acked_a | acked_b
    returned = set(on_return)
    return FailbackClassification(
        produced=len(produced),
        acked_on_a=frozenset(acked_a),
        acked_on_b=frozenset(acked_b),
        delivered_on_return=frozenset(returned),
        deliveries_on_return=sum(on_return.values()),
        twice=frozenset(acked & returned),
        redelivered=frozenset((delivered_before - acked) & returned),
        first_delivered=frozenset(returned - delivered_before),
        lost=frozenset(produced.keys() - acked - returned),
        delivered_twice_on_return=frozenset(i for i, n in on_return.items() if n > 1),
        unknown_deliveries=unknown,
    )


def _category(identities: Iterable[str], produced: Mapping[str, Produced]) -> dict[str, Any]:
    ordered = sorted(identities, key=lambda identity: produced[identity].index)
    return {
        "count": len(ordered),
        "sample": [produced[i].drill_id for i in ordered[: limits.drill_sample_ids_max]],
    }


@dataclass
class FailbackFacts:
    """What the return measured besides the delivery log."""

    #: Epoch ms when A was back (its processes serving, or the link restored).
    restored_at_ms: int | None = None
    #: Seconds from A's return until the sync B→A was judged settled (or gave up).
    settle_s: float | None = None
    settled: bool = False
    #: A's cursor when the consumers moved home, and A's gateway's block for the
    #: subscription (what it applied from B); None when unknown or without gateways.
    a_cursor: Mapping[str, Any] | None = None
    sync_stats: Mapping[str, Any] | None = None
    first_delivery_on_return_ms: int | None = None


def failback_report(
    c: FailbackClassification, produced: Mapping[str, Produced], facts: FailbackFacts
) -> dict[str, Any]:
    """A target's ``failback`` block."""
    twice = _category(c.twice, produced)
    twice["acked_on_A"] = len(c.twice & c.acked_on_a)
    twice["acked_on_B"] = len(c.twice & c.acked_on_b)
    resume = None
    if facts.restored_at_ms is not None and facts.first_delivery_on_return_ms is not None:
        resume = round((facts.first_delivery_on_return_ms - facts.restored_at_ms) / 1000.0, 3)
    return {
        "acked_on_A": len(c.acked_on_a),
        "acked_on_B": len(c.acked_on_b),
        "acked_before_return": len(c.acked_before),
        "expected_on_return": c.produced - len(c.acked_before),
        "delivered_on_return": len(c.delivered_on_return),
        "deliveries_on_return": c.deliveries_on_return,
        "delivered_twice_on_return": len(c.delivered_twice_on_return),
        "twice": twice,
        "redelivered": _category(c.redelivered, produced),
        "first_delivered": _category(c.first_delivered, produced),
        "lost": _category(c.lost, produced),
        "unknown_deliveries": c.unknown_deliveries,
        "sync_settled": facts.settled,
        "sync_settle_s": None if facts.settle_s is None else round(facts.settle_s, 3),
        "a_cursor_at_return": None if facts.a_cursor is None else dict(facts.a_cursor),
        "sync_stats_at_return": None if facts.sync_stats is None else dict(facts.sync_stats),
        "restored_at": facts.restored_at_ms,
        "time_to_resume_on_A_s": resume,
    }


@dataclass(frozen=True)
class FailbackVerdict:
    target: str
    passed: bool
    twice: int
    acked_before: int
    lost: int
    redelivered: int

    @property
    def twice_share(self) -> float | None:
        return share(self.twice, self.acked_before)

    def headline(self) -> str:
        """``pass: 0 twice on A (0% of 212 acknowledged before), 0 lost``."""
        word = "pass" if self.passed else "fail"
        return (
            f"failback {word}: {self.twice} twice on A ({percent(self.twice_share)} of"
            f" {self.acked_before} acknowledged on A or B), {self.lost} lost,"
            f" {self.redelivered} redelivered"
        )


def failback_verdict(target: str, block: Mapping[str, Any]) -> FailbackVerdict:
    """From a target's ``failback`` block (as in report.json)."""
    twice = int((block.get("twice") or {}).get("count") or 0)
    lost = int((block.get("lost") or {}).get("count") or 0)
    return FailbackVerdict(
        target=target,
        passed=twice == 0 and lost == 0,
        twice=twice,
        acked_before=int(block.get("acked_before_return") or 0),
        lost=lost,
        redelivered=int((block.get("redelivered") or {}).get("count") or 0),
    )
