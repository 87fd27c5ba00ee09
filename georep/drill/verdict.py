"""A target's verdict in words: what a failover cost it and why, from its report block
alone (no I/O), for the top of report.html and the terminal summary.

**Pass** means nothing was consumed twice and nothing lost: no duplicate (acknowledged on
A, delivered again on B) and no loss (replicated, never acknowledged on A, never
delivered on B); and, when the messages carry a schema (``avro-evolving``), no message
undecodable on B by its schema version. Redeliveries of messages A never saw
acknowledged are expected and do not fail a target.

**Shares**: duplicates as a share of the messages acknowledged on A (the ones a perfect
sync would have kept from coming again), losses as a share of the messages replicated
before the failure.

**Why**: A's cursor at the failure (mark-delete position and acknowledged ranges above
it) against what B's gateway had applied from A. Worked example, pulsar-compatible:
A at ``1:150`` plus 5 ranges, B had applied ``1:68`` and no range (sync lag 900 ms),
225 of 288 acknowledged messages came again: "A's cursor at the failure: mark-delete
1:150 and 5 acknowledged ranges above it. B had applied from A: mark-delete 1:68 and 0
ranges (sync lag 900 ms). 225 of the 288 messages acknowledged on A came again on B:
B's subscription lacked those acknowledgements." A target without gateways (real Pulsar)
has no applied block, and its why rests on the figures: when every acknowledged message
came again, none of A's acknowledgements had reached B.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from georep.domain.shares import percent, share


@dataclass(frozen=True)
class Verdict:
    target: str
    passed: bool
    duplicates: int
    acked_on_a: int
    lost: int
    replicated: int
    redelivered: int
    why: list[str] = field(default_factory=list)
    #: Messages on B undecodable by their schema version; None: the scenario carries none.
    undecodable: int | None = None

    @property
    def duplicates_share(self) -> float | None:
        return share(self.duplicates, self.acked_on_a)

    @property
    def lost_share(self) -> float | None:
        return share(self.lost, self.replicated)

    def headline(self) -> str:
        """``fail: 225 duplicates (78% of 288 acknowledged on A), 0 lost (0% of 600
        replicated)``."""
        word = "pass" if self.passed else "fail"
        return (
            f"{word}: {self.duplicates} duplicates ({percent(self.duplicates_share)} of"
            f" {self.acked_on_a} acknowledged on A), {self.lost} lost"
            f" ({percent(self.lost_share)} of {self.replicated} replicated)"
            + ("" if self.undecodable is None else f", {self.undecodable} undecodable on B")
        )


def _count(block: Mapping[str, Any], key: str) -> int:
    value = block.get(key)
    if isinstance(value, Mapping):
        value = value.get("count")
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def _ranges(n: int) -> str:
    return f"{n} acknowledged range{'' if n == 1 else 's'}"


def verdict(target: str, block: Mapping[str, Any]) -> Verdict:
    duplicates = _count(block, "duplicates")
    acked = _count(block, "acked_on_A")
    lost = _count(block, "lost")
    undecodable = (
        None if block.get("undecodable_on_B") is None else _count(block, "undecodable_on_B")
    )
    result = Verdict(
        target=target,
        passed=duplicates == 0 and lost == 0 and not undecodable,
        undecodable=undecodable,
        duplicates=duplicates,
        acked_on_a=acked,
        lost=lost,
        replicated=_count(block, "replicated_before_failure"),
        redelivered=_count(block, "redelivered"),
    )
    why = result.why
    cursor = block.get("a_cursor_at_failure")
    if isinstance(cursor, Mapping):
        why.append(
            f"A's cursor at the failure: mark-delete {cursor.get('markDeletePosition')} and"
            f" {_ranges(int(cursor.get('ranges') or 0))} above it."
        )
    applied = _applied_from_a(block)
    if applied is not None:
        lag = applied.get("syncLagMs")
        lag_text = "" if not isinstance(lag, int | float) else f" (sync lag {lag:.0f} ms)"
        why.append(
            f"B had applied from A: mark-delete {applied.get('lastMarkDelete') or 'none'} and"
            f" {_ranges(int(applied.get('ranges') or 0))}{lag_text}."
        )
    elif block.get("sync_stats_at_failure"):
        why.append("B's gateway had applied nothing from A.")
    if acked and duplicates == acked:
        why.append(
            "Every message acknowledged on A came again on B: none of A's acknowledgements"
            " had reached B's subscription."
        )
    elif duplicates:
        why.append(
            f"{duplicates} of the {acked} messages acknowledged on A came again on B: B's"
            " subscription lacked those acknowledgements."
        )
    elif acked:
        why.append("Every acknowledgement made on A was in place on B.")
    unconfirmed = (block.get("duplicates") or {}).get("ack_not_on_A_cursor")
    if isinstance(unconfirmed, int) and unconfirmed:
        why.append(
            f"{unconfirmed} of the duplicates were acknowledged by the consumer but not yet on"
            " A's cursor when it failed: no sync could have carried them."
        )
    if lost:
        why.append(f"{lost} replicated messages were neither acknowledged on A nor delivered on B.")
    if undecodable:
        by_version = (block.get("undecodable_on_B") or {}).get("by_version") or {}
        versions = ", ".join(f"{n} of version {v}" for v, n in by_version.items())
        why.append(
            f"{undecodable} messages delivered on B could not be decoded by their schema"
            f" version there ({versions})."
        )
    elif undecodable == 0:
        why.append("Every message delivered on B decoded by its schema version there.")
    if result.redelivered:
        why.append(
            f"{result.redelivered} delivered on A but never acknowledged came again on B"
            " (expected)."
        )
    not_replicated = _count(block, "not_replicated")
    if not_replicated:
        why.append(f"{not_replicated} had not reached B when A failed (not counted as lost).")
    return result


def _applied_from_a(block: Mapping[str, Any]) -> Mapping[str, Any] | None:
    stats = block.get("sync_stats_at_failure")
    if not isinstance(stats, Mapping):
        return None
    on_b = stats.get("B")
    if not isinstance(on_b, Mapping):
        return None
    applied = (on_b.get("applied") or {}).get("A")
    return applied if isinstance(applied, Mapping) else None
