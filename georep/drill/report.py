"""The drill's arithmetic: what the delivery log says about one failover (no I/O).

**Identity.** A message's identity is its *origin MessageId*: its position ``"L:E"`` on
A, where it was produced. A delivery on A carries it as its own message id; a delivery
on B carries it in the copy's ``georep.origin.position`` property. The drill id in the
payload is a cross-check: a copy whose origin position names another message counts in
``origin_mismatches``, one without an origin in ``origin_missing`` (both are then
identified by their drill id); a delivery matching no produced message is
``unknown_deliveries``.

**Sets** (of identities; "acked on A" means an acknowledgement covering a delivery on A
was sent before the failure):

============================  ==========================================================
replicated_before_failure     on B's topic when A failed (read after the failure: nothing
                              crosses after it), plus anything delivered on B
duplicates                    acked on A *and* delivered on B: consumed twice
redelivered                   delivered on A, not acked, delivered on B: expected
lost                          replicated, never acked on A, never delivered on B
not_replicated                produced but not on B: reported, not counted as lost
============================  ==========================================================

Worked example: messages 0..9 produced, 0..7 replicated; A delivered 0..5 and acked
0..3 (4 and 5 in flight); B delivered 2..7. Then duplicates = {2, 3}, redelivered =
{4, 5}, lost = {} (0 and 1 acked on A, 6 and 7 delivered on B), not_replicated = {8, 9}.

**Undecodable on B** (the ``avro-evolving`` scenario only; null otherwise): the distinct
messages delivered on B that B's consumers could not decode by their schema version
(avro_records.py says when), counted by that version, beside every version B's
deliveries carried. Worked example: 300 messages, v1 for 0..149 and v2 for 150..299; B
numbers them 0 and 1 and every copy decodes: ``schema_versions_on_B = {"0": 150, "1":
150}`` and ``undecodable_on_B.count = 0``. Had the copies of 150..299 kept A's version 1
on a B that registered v2 first (its version 0), each would name v1 there:
``by_version = {"1": 150}``.

A's cursor at the failure (``internalStats``: mark-delete position and individually
deleted ranges) tells which acknowledgements A itself had recorded: a duplicate whose
acknowledgement A had not recorded (still in the client's buffer when A died) could not
have been synced; ``duplicates.ack_not_on_A_cursor`` counts those.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from georep import limits
from georep.domain.position import Position
from georep.drill.delivery_log import AFTER, BEFORE, Delivery
from georep.pulsar_text.cursor import acknowledged, parse_cursor, parse_position


@dataclass(frozen=True, slots=True)
class Produced:
    """One message produced on A; ``position`` (``"L:E"``) is its origin MessageId."""

    drill_id: str
    index: int
    key: str
    position: str


@dataclass
class Classification:
    produced: int
    replicated: set[str]
    delivered_a: set[str]
    acked_a: set[str]
    delivered_b: set[str]
    deliveries_a: int
    deliveries_b: int
    duplicates: set[str]
    redelivered: set[str]
    lost: set[str]
    not_replicated: set[str]
    not_replicated_unconsumed: set[str]
    delivered_twice_b: set[str]
    origin_missing: int = 0
    origin_mismatches: int = 0
    unknown_deliveries: int = 0


def classify(
    produced: Mapping[str, Produced],
    on_b_at_failure: Iterable[str],
    deliveries: Iterable[Delivery],
) -> Classification:
    """``produced``: by origin position; ``on_b_at_failure``: origin positions of the
    copies on B's topic; ``deliveries``: one mode's log, phases before (A) and after (B)."""
    by_drill_id = {message.drill_id: position for position, message in produced.items()}
    delivered_a: set[str] = set()
    acked_a: set[str] = set()
    delivered_b: Counter[str] = Counter()
    deliveries_a = deliveries_b = 0
    missing = mismatches = unknown = 0
    for delivery in deliveries:
        identity = delivery.origin_position
        if identity in produced:
            if produced[identity].drill_id != delivery.drill_id:
                mismatches += 1
        else:
            if identity:
                mismatches += 1
            else:
                missing += 1
            identity = by_drill_id.get(delivery.drill_id, "")
            if not identity:
                unknown += 1
                continue
        if delivery.phase == BEFORE:
            deliveries_a += 1
            delivered_a.add(identity)
            if delivery.acked:
                acked_a.add(identity)
        elif delivery.phase == AFTER:
            deliveries_b += 1
            delivered_b[identity] += 1
    on_b = set(delivered_b)
    replicated = (set(on_b_at_failure) & produced.keys()) | on_b
    not_replicated = produced.keys() - replicated
    return Classification(
        produced=len(produced),
        replicated=replicated,
        delivered_a=delivered_a,
        acked_a=acked_a,
        delivered_b=on_b,
        deliveries_a=deliveries_a,
        deliveries_b=deliveries_b,
        duplicates=acked_a & on_b,
        redelivered=(delivered_a - acked_a) & on_b,
        lost=replicated - acked_a - on_b,
        not_replicated=set(not_replicated),
        not_replicated_unconsumed=not_replicated - acked_a,
        delivered_twice_b={identity for identity, n in delivered_b.items() if n > 1},
        origin_missing=missing,
        origin_mismatches=mismatches,
        unknown_deliveries=unknown,
    )


# --- A's cursor -----------------------------------------------------------------------
@dataclass(frozen=True)
class CursorState:
    """A subscription's acknowledged positions: everything at or below the mark-delete
    position, and each ``(lower, upper]`` range above it."""

    mark_delete: Position
    ranges: list[tuple[Position, Position]] = field(default_factory=list)

    @classmethod
    def from_internal_stats(cls, cursor: Mapping[str, Any]) -> CursorState:
        return cls(*parse_cursor(cursor))

    def covers(self, position: Position) -> bool:
        """Whether ``position`` is acknowledged.

        >>> CursorState((3, 4), [((3, 5), (3, 7))]).covers(Position(3, 6))
        True
        """
        return acknowledged(position, self.mark_delete, self.ranges)


# --- the report -------------------------------------------------------------------------
@dataclass
class ModeFacts:
    """What the run measured besides the delivery log."""

    mode: str
    topic: str
    subscription: str
    fail: str
    failed_at_ms: int | None = None
    first_delivery_on_b_ms: int | None = None
    sync_lag_ms: float | None = None
    #: (epoch ms, B's gateway's applied.A.syncLagMs or None) from the gateways' start
    #: to the failure, every ``limits.drill_sync_sample_interval_s`` or so.
    sync_lag_samples: list[tuple[int, float | None]] = field(default_factory=list)
    #: (epoch ms, entries of the topic A had not replicated to B, or None when unknown),
    #: sampled with the sync lag (for real Pulsar too: its own replicator's backlog).
    replication_backlog_samples: list[tuple[int, int | None]] = field(default_factory=list)
    #: Each gateway's block for the subscription under ``subscriptionSync`` ("A": the
    #: source side, "B": what it applied), as the gateways report them.
    sync_stats: dict[str, Any] | None = None
    gateway_sync_mode: str | None = None
    a_cursor: Mapping[str, Any] | None = None
    #: A's gateway's exposure of the subscription towards B, read last before the
    #: failure (``messages``, ``oldestAckAgeS``); None without gateways.
    exposure: Mapping[str, Any] | None = None
    timings_s: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def _category(identities: set[str], produced: Mapping[str, Produced]) -> dict[str, Any]:
    ordered = sorted(identities, key=lambda identity: produced[identity].index)
    return {
        "count": len(identities),
        "sample": [produced[i].drill_id for i in ordered[: limits.drill_sample_ids_max]],
    }


def schemas_on_b(
    produced: Mapping[str, Produced], deliveries: Iterable[Delivery]
) -> tuple[dict[str, int], dict[str, Any]]:
    """(distinct messages delivered on B by schema version, undecodable on B): versions
    as text (``"none"`` for a copy naming none), as JSON keys go; a message delivered
    several times is undecodable when any of its deliveries was."""
    by_drill_id = {message.drill_id: position for position, message in produced.items()}
    versions: dict[str, str] = {}
    problems: dict[str, str] = {}
    for delivery in deliveries:
        if delivery.phase != AFTER:
            continue
        identity = delivery.origin_position
        if identity not in produced:
            identity = by_drill_id.get(delivery.drill_id, "")
            if not identity:
                continue  # an unknown delivery: counted in checks
        version = (
            "none"
            if delivery.payload_schema_version is None
            else str(delivery.payload_schema_version)
        )
        versions[identity] = version
        if delivery.undecodable is not None:
            problems[identity] = f"{version}: {delivery.undecodable}"
    undecodable = _category(set(problems), produced)
    undecodable["by_version"] = dict(
        sorted(Counter(versions[identity] for identity in problems).items())
    )
    reasons = sorted(set(problems.values()))
    undecodable["reasons"] = reasons[: limits.drill_sample_ids_max]
    return dict(sorted(Counter(versions.values()).items())), undecodable


def mode_report(
    classification: Classification,
    produced: Mapping[str, Produced],
    facts: ModeFacts,
    schemas: tuple[dict[str, int], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """One target's block; ``schemas``: :func:`schemas_on_b`'s figures, for a scenario
    whose messages carry a schema (None: ``schema_versions_on_B`` and
    ``undecodable_on_B`` are null)."""
    c = classification
    duplicates = _category(c.duplicates, produced)
    cursor_block = None
    if facts.a_cursor is not None:
        cursor = CursorState.from_internal_stats(facts.a_cursor)
        confirmed = {i for i in c.acked_a if cursor.covers(parse_position(i))}
        duplicates["ack_not_on_A_cursor"] = len(c.duplicates - confirmed)
        cursor_block = {
            "markDeletePosition": facts.a_cursor.get("markDeletePosition"),
            "individuallyDeletedMessages": facts.a_cursor.get("individuallyDeletedMessages"),
            "ranges": len(cursor.ranges),
            "acked_on_A_confirmed": len(confirmed),
        }
    else:
        duplicates["ack_not_on_A_cursor"] = None
    not_replicated = _category(c.not_replicated, produced)
    not_replicated["unconsumed_on_A"] = len(c.not_replicated_unconsumed)
    resume = None
    if facts.failed_at_ms is not None and facts.first_delivery_on_b_ms is not None:
        resume = round((facts.first_delivery_on_b_ms - facts.failed_at_ms) / 1000.0, 3)
    return {
        "mode": facts.mode,
        "topic": facts.topic,
        "subscription": facts.subscription,
        "fail": facts.fail,
        "produced": c.produced,
        "replicated_before_failure": len(c.replicated),
        "not_replicated": not_replicated,
        "delivered_on_A": len(c.delivered_a),
        "deliveries_on_A": c.deliveries_a,
        "acked_on_A": len(c.acked_a),
        "unacked_on_A": len(c.delivered_a - c.acked_a),
        "delivered_on_B": len(c.delivered_b),
        "deliveries_on_B": c.deliveries_b,
        "delivered_twice_on_B": len(c.delivered_twice_b),
        "duplicates": duplicates,
        "redelivered": _category(c.redelivered, produced),
        "lost": _category(c.lost, produced),
        "checks": {
            "origin_missing": c.origin_missing,
            "origin_mismatches": c.origin_mismatches,
            "unknown_deliveries": c.unknown_deliveries,
        },
        "schema_versions_on_B": None if schemas is None else schemas[0],
        "undecodable_on_B": None if schemas is None else schemas[1],
        "sync_lag_at_failure_ms": None
        if facts.sync_lag_ms is None
        else round(facts.sync_lag_ms, 1),
        "sync_lag_samples_ms": [
            [at_ms, None if lag is None else round(lag, 1)] for at_ms, lag in facts.sync_lag_samples
        ],
        "replication_backlog_samples": [
            [at_ms, backlog] for at_ms, backlog in facts.replication_backlog_samples
        ],
        "gateway_sync_mode": facts.gateway_sync_mode,
        "exposure_before_failure": None
        if facts.exposure is None
        else {
            "count": facts.exposure["messages"],
            "oldest_ack_age_s": facts.exposure.get("oldestAckAgeS"),
        },
        "sync_stats_at_failure": facts.sync_stats,
        "a_cursor_at_failure": cursor_block,
        "failed_at": facts.failed_at_ms,
        "time_to_resume_on_B_s": resume,
        "timings_s": {name: round(value, 3) for name, value in facts.timings_s.items()},
        "warnings": list(facts.warnings),
    }


def figure_value(block: Mapping[str, Any], key: str) -> Any:
    """A figure of a report's block as the pages show it: the number itself, or the
    ``count`` of a figure kept with its examples (``{"count": n, ...}``); None if absent."""
    value = block.get(key)
    return value.get("count") if isinstance(value, Mapping) else value
