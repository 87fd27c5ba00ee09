"""The reconciliation job on hand-built exports with known answers (on the session's
local[2] Spark, ``spark`` in tests/conftest.py).

Case T (one topic, A→B, entry ids are the worked example below):

    A ledger 1: entries 0..9, published on A (A0..A9)
    B ledger 5: 5:0..5:6 copies of A0..A6, 5:7 published on B (B7); A7..A9 never arrived
    subscription s on A: MDP 1:2, ranges (1:3..1:4], (1:5..1:6], (1:7..1:8]
                         -> acked A0 A1 A2 A4 A6 A8 (out of order)
    subscription s on B: MDP 5:1, range (5:2..5:3]  (A's ranges were not synced)
                         -> acked copies of A0 A1 A3

    gap: A7 A8 A9 (3), redelivery risk: A2 A4 A6 (3; A8 has no copy), skip risk: A3 (1),
    translated MDP of s: 5:2 (copy of A2), which B's MDP 5:1 does not cover.

Case P (partitioned topic, batches): A stores a batch of 3 at 2:0 and a single message at
2:1 in partition 0, a batch of 2 at 3:0 in partition 1; B holds the batches at 7:0 and 8:0
(same batch indexes) and lacks 2:1. Subscription p acknowledged A 2:0 (MDP) on A only.

Case Q (batch-index acknowledgements, message precision), A→B, q on both sides:

    A ledger 40: 40:0 batch of 4, 40:1 batch of 3, 40:2 one message, 40:3 batch of 2
    B ledger 50: 50:0..50:3 copies of 40:0..40:3 (a batch is replicated whole)
    q on A: MDP 40:-1, range (40:1..40:2], batch_acks 40:0 [0, 2], 40:1 [1]
            -> acked (40:0, 0) (40:0, 2) (40:1, 1) (40:2)           4 messages
    q on B: MDP 50:-1, batch_acks 50:0 [2, 3], 50:3 [0]
            -> acked copies of (40:0, 2) (40:0, 3) (40:3, 0)

    redelivery risk: (40:0, 0) (40:1, 1) (40:2)                     3
    skip risk:       (40:0, 3) (40:3, 0)                            2
    batches acknowledged differently (batch entries, partly acknowledged on a side):
        40:0 -> 50:0  partly on both     origin only [0]  replica only [3]
        40:1 -> 50:1  partly on origin   origin only [1]  replica only []
        40:3 -> 50:3  partly on replica  origin only []   replica only [0]
    At entry precision (the export before batch indexes) the risks were 1 and 0.

Case S (payload schemas), A→B: A's v0 is schema "AVRO:one", its v1 "AVRO:two"; B
registered them the other way round (its v0 is "AVRO:two", its v1 "AVRO:one").

    A 60:0 60:1 stamped 0 (one), 60:2 60:3 60:5 stamped 1 (two), 60:4 no schema
    B copies: 60:0 60:1 stamped 1 (one) and 60:2 stamped 0 (two): sound;
              60:3 stamped 1 (one, not its origin's two): undecodable;
              60:5 stamped 9, which B does not hold: undecodable;
              60:4 no schema, as its origin: not judged
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from georep.spark_reconcile import job, schema
from georep.spark_reconcile.errors import InputError
from georep.spark_reconcile.inputs import check_exports, load_deliveries, spark_schema

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pyspark = pytest.importorskip("pyspark")

T = "persistent://geo/ns/orders"
P = "persistent://geo/ns/payments"
D = "persistent://geo/ns/dups"
BIG = "persistent://geo/ns/big"
BASE_MS = 1_700_000_000_000


# --- building exports -----------------------------------------------------------------
def message(cluster, ledger, entry, *, topic=T, partition=-1, batch=-1, origin=None,
            publish_ms=None, key=None) -> dict:  # fmt: skip
    origin_cluster, origin_ledger, origin_entry = origin or (cluster, ledger, entry)
    publish_ms = BASE_MS + entry * 1000 if publish_ms is None else publish_ms
    return {
        "schema_version": 2, "cluster": cluster, "topic": topic, "partition": partition,
        "ledger_id": ledger, "entry_id": entry, "batch_index": batch,
        "origin_cluster": origin_cluster, "origin_ledger_id": origin_ledger,
        "origin_entry_id": origin_entry, "key": key,
        "publish_time": dt.datetime.fromtimestamp(publish_ms / 1000, tz=dt.UTC),
        "event_time": None, "size": 10,
    }  # fmt: skip


def subscription(cluster, name, mdp, ranges=(), *, topic=T, partition=-1, batches=()) -> dict:
    """``batches``: ((ledger, entry), size, acked indexes) of partly acknowledged entries."""
    return {
        "schema_version": 2, "cluster": cluster, "topic": topic, "partition": partition,
        "subscription": name, "mark_delete_ledger_id": mdp[0], "mark_delete_entry_id": mdp[1],
        "individually_deleted": [
            {"lower_ledger_id": lo[0], "lower_entry_id": lo[1],
             "upper_ledger_id": hi[0], "upper_entry_id": hi[1]}
            for lo, hi in ranges
        ],
        "batch_acks": [
            {"ledger_id": position[0], "entry_id": position[1], "batch_size": size,
             "acked_indexes": list(indexes)}
            for position, size, indexes in batches
        ],
        "captured_at": dt.datetime.fromtimestamp(BASE_MS / 1000 + 60, tz=dt.UTC),
    }  # fmt: skip


def write_export(root: Path, cluster: str, messages: list[dict], subscriptions: list[dict]) -> str:
    for table, rows in ((schema.MESSAGES, messages), (schema.SUBSCRIPTIONS, subscriptions)):
        directory = root / cluster / table
        directory.mkdir(parents=True, exist_ok=True)
        table_schema = schema.SCHEMAS[table]
        data = pa.Table.from_pylist(rows, schema=table_schema)
        pq.write_table(data, directory / f"{cluster}.parquet")
    return str(root / cluster)


def case_t() -> tuple[list[dict], list[dict], list[dict], list[dict]]:
    a_messages = [message("A", 1, e) for e in range(10)]
    b_messages = [message("B", 5, e, origin=("A", 1, e)) for e in range(7)]
    b_messages.append(message("B", 5, 7, publish_ms=BASE_MS + 7500))
    a_subs = [
        subscription("A", "s", (1, 2), [((1, 3), (1, 4)), ((1, 5), (1, 6)), ((1, 7), (1, 8))]),
        subscription("A", "georep.repl.B", (1, 6)),
        subscription("A", "only-a", (1, 9)),
    ]
    b_subs = [
        subscription("B", "s", (5, 1), [((5, 2), (5, 3))]),
        subscription("B", "only-b", (5, 7)),
    ]
    return a_messages, a_subs, b_messages, b_subs


def case_p() -> tuple[list[dict], list[dict], list[dict], list[dict]]:
    a_messages = [message("A", 2, 0, topic=P, partition=0, batch=b) for b in range(3)]
    a_messages.append(message("A", 2, 1, topic=P, partition=0))
    a_messages += [message("A", 3, 0, topic=P, partition=1, batch=b) for b in range(2)]
    b_messages = [
        message("B", 7, 0, topic=P, partition=0, batch=b, origin=("A", 2, 0)) for b in range(3)
    ]
    b_messages += [
        message("B", 8, 0, topic=P, partition=1, batch=b, origin=("A", 3, 0)) for b in range(2)
    ]
    a_subs = [subscription("A", "p", (2, 0), topic=P, partition=0),
              subscription("A", "p", (3, -1), topic=P, partition=1)]  # fmt: skip
    b_subs = [subscription("B", "p", (7, -1), topic=P, partition=0),
              subscription("B", "p", (8, -1), topic=P, partition=1)]  # fmt: skip
    return a_messages, a_subs, b_messages, b_subs


Q = "persistent://geo/ns/batched"
Q_SIZES = {0: 4, 1: 3, 2: -1, 3: 2}  # entry -> batch size (-1: not a batch)


def case_q() -> tuple[list[dict], list[dict], list[dict], list[dict]]:
    def indexes(size):
        return range(size) if size > 0 else [-1]

    a_messages = [message("A", 40, e, topic=Q, batch=b)
                  for e, size in Q_SIZES.items() for b in indexes(size)]  # fmt: skip
    b_messages = [message("B", 50, e, topic=Q, batch=b, origin=("A", 40, e))
                  for e, size in Q_SIZES.items() for b in indexes(size)]  # fmt: skip
    a_subs = [subscription("A", "q", (40, -1), [((40, 1), (40, 2))], topic=Q,
                           batches=[((40, 0), 4, [0, 2]), ((40, 1), 3, [1])])]  # fmt: skip
    b_subs = [subscription("B", "q", (50, -1), topic=Q,
                           batches=[((50, 0), 4, [2, 3]), ((50, 3), 2, [0])])]  # fmt: skip
    return a_messages, a_subs, b_messages, b_subs


def case_duplicates() -> tuple[list[dict], list[dict], list[dict], list[dict]]:
    """A 30:1 stored twice on B; d acknowledged all three on A, nothing on B."""
    a_messages = [message("A", 30, e, topic=D) for e in range(3)]
    b_messages = [message("B", 40, e, topic=D, origin=("A", 30, e)) for e in range(3)]
    b_messages.append(message("B", 40, 3, topic=D, origin=("A", 30, 1)))
    a_subs = [subscription("A", "d", (30, 2), topic=D)]
    b_subs = [subscription("B", "d", (40, -1), topic=D)]
    return a_messages, a_subs, b_messages, b_subs


#: Case BIG: one acknowledged range over 200,000 entry ids spanning three ledgers.
BIG_SPANS = {10: 80_000, 11: 70_000, 12: 50_000}
BIG_RANGE = ((10, 5), (12, 40_000))


def case_big() -> tuple[list[dict], list[dict], list[dict], list[dict]]:
    a_messages = [message("A", ledger, e, topic=BIG, publish_ms=BASE_MS)
                  for ledger, n in BIG_SPANS.items() for e in range(0, n, 997)]  # fmt: skip
    b_messages = [message("B", 20, i, topic=BIG, publish_ms=BASE_MS,
                          origin=("A", m["ledger_id"], m["entry_id"]))
                  for i, m in enumerate(a_messages)]  # fmt: skip
    a_subs = [subscription("A", "big", (10, -1), [BIG_RANGE], topic=BIG)]
    b_subs = [subscription("B", "big", (20, -1), topic=BIG)]
    return a_messages, a_subs, b_messages, b_subs


S = "persistent://geo/ns/readings"
ONE, TWO = "AVRO:one", "AVRO:two"


def case_s() -> tuple[list[dict], list[dict], list[dict], list[dict]]:
    def stamped(row: dict, version: int | None, fingerprint: str | None) -> dict:
        return {**row, "payload_schema_version": version, "payload_schema": fingerprint}

    on_a = {0: (0, ONE), 1: (0, ONE), 2: (1, TWO), 3: (1, TWO), 4: (None, None), 5: (1, TWO)}
    on_b = {0: (1, ONE), 1: (1, ONE), 2: (0, TWO), 3: (1, ONE), 4: (None, None), 5: (9, None)}
    a_messages = [stamped(message("A", 60, e, topic=S), *on_a[e]) for e in on_a]
    b_messages = [stamped(message("B", 70, e, topic=S, origin=("A", 60, e)), *on_b[e])
                  for e in on_b]  # fmt: skip
    return a_messages, [], b_messages, []


def write_cases(root: Path, *cases) -> list[str]:
    a_messages: list[dict] = []
    a_subs: list[dict] = []
    b_messages: list[dict] = []
    b_subs: list[dict] = []
    for case in cases:
        for into, rows in zip((a_messages, a_subs, b_messages, b_subs), case(), strict=True):
            into += rows
    return [
        write_export(root, "A", a_messages, a_subs),
        write_export(root, "B", b_messages, b_subs),
    ]


def deliveries_for_t(path: Path) -> str:
    """s consumed A0..A8 as acked on A (A0 twice), failed over to B and drained it."""
    rows = []

    def delivered(cluster, entry, phase, at):
        rows.append({"cluster": cluster, "topic": T, "subscription": "s", "origin_cluster": "A",
                     "origin_ledger_id": 1, "origin_entry_id": entry, "batch_index": -1,
                     "delivered_at": at, "phase": phase})  # fmt: skip

    for entry in (0, 0, 1, 2, 4, 6, 8):
        delivered("A", entry, "before", BASE_MS + 20_000 + entry)
    for entry in (2, 4, 5, 6):
        delivered("B", entry, "after", BASE_MS + 40_000 + entry)
    rows.append({"cluster": "B", "topic": T, "subscription": "s", "origin_cluster": "B",
                 "origin_ledger_id": 5, "origin_entry_id": 7, "batch_index": -1,
                 "delivered_at": "2023-11-14T22:14:00Z", "phase": "after"})  # fmt: skip
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def reconcile(spark, inputs: list[str], out: Path, deliveries: str | None = None) -> dict:
    return job.reconcile(spark, check_exports(inputs), deliveries, out, quiet=True)


@dataclass
class Result:
    totals: dict
    out: Path
    spark: SparkSession

    def table(self, name: str, topic: str | None = None) -> list[dict]:
        frame = self.spark.read.parquet(str(self.out / name))
        rows = [row.asDict(recursive=True) for row in frame.collect()]
        return [row for row in rows if topic is None or row.get("topic") == topic]


@pytest.fixture(scope="module")
def result(spark, tmp_path_factory) -> Result:
    """Every case in one reconciliation (each case on its own topic), with T's delivery
    log: Spark's cost is per job, not per row, so one run keeps the module fast."""
    root = tmp_path_factory.mktemp("reconcile")
    inputs = write_cases(root / "in", case_t, case_p, case_q, case_duplicates, case_big, case_s)
    deliveries = deliveries_for_t(root / "deliveries.jsonl")
    totals = reconcile(spark, inputs, root / "out", deliveries)
    return Result(totals, root / "out", spark)


# --- the cases ------------------------------------------------------------------------
def test_gap_redelivery_and_skip_risk_are_counted_exactly(result) -> None:
    gap = result.table("replication_gap", T)
    assert sorted(r["origin_entry_id"] for r in gap) == [7, 8, 9]
    assert {(r["origin_cluster"], r["replica_cluster"]) for r in gap} == {("A", "B")}
    (window,) = result.table("replication_gaps", T)
    assert window["gap_messages"] == 3
    assert window["gap_first_publish_time"] == dt.datetime.fromtimestamp(BASE_MS / 1000 + 7)
    assert window["gap_last_publish_time"] == dt.datetime.fromtimestamp(BASE_MS / 1000 + 9)
    assert (window["gap_first_ledger_id"], window["gap_first_entry_id"]) == (1, 7)
    assert (window["gap_last_ledger_id"], window["gap_last_entry_id"]) == (1, 9)

    risk = result.table("redelivery_risk", T)
    assert sorted((r["origin_entry_id"], r["replica_ledger_id"], r["replica_entry_id"])
                  for r in risk) == [(2, 5, 2), (4, 5, 4), (6, 5, 6)]  # fmt: skip
    assert {r["subscription"] for r in risk} == {"s"}, "system cursors are never paired"
    skips = result.table("skip_risk", T)
    assert [(r["origin_entry_id"], r["replica_entry_id"]) for r in skips] == [(3, 3)]


def test_totals_add_up_over_the_cases(result) -> None:
    totals = result.totals
    big = sum(
        1 for m in case_big()[0] if BIG_RANGE[0] < (m["ledger_id"], m["entry_id"]) <= BIG_RANGE[1]
    )
    assert totals["replication_gap"] == 3 + 1
    assert totals["redelivery_risk"] == 3 + 3 + 3 + big + 4
    assert totals["skip_risk"] == 1 + 2
    assert totals["duplicate_copies"] == 1
    assert totals["batch_entries_partly_acked"] == 4 and totals["batch_entries_differing"] == 3
    assert totals["observed_duplicates"] == 4 and totals["observed_losses"] == 3
    assert totals["undecodable_copies"] == 2
    assert totals["clusters"] == 2 and totals["topics"] == 6
    summary = json.loads((result.out / "summary.json").read_text())
    assert summary == totals


def test_copies_whose_schema_is_not_their_origins_are_undecodable(result) -> None:
    rows = sorted(result.table("undecodable_copies", S), key=lambda r: r["origin_entry_id"])
    assert [
        (r["origin_entry_id"], r["replica_schema_version"], r["replica_payload_schema"],
         r["origin_payload_schema"])
        for r in rows
    ] == [(3, 1, ONE, TWO), (5, 9, None, TWO)]  # fmt: skip
    assert all(r["replica_cluster"] == "B" for r in rows)
    (link,) = result.table("link_summary", S)
    assert (link["copies"], link["undecodable_copies"]) == (6, 2)
    assert all(r["undecodable_copies"] == 0 for r in result.table("link_summary", T))


def test_positions_are_translated_per_range(result) -> None:
    subs = {r["subscription"]: r for r in result.table("subscription_summary", T)}
    s = subs["s"]
    assert (s["origin_mdp_ledger_id"], s["origin_mdp_entry_id"]) == (1, 2)
    assert (s["translated_mdp_ledger_id"], s["translated_mdp_entry_id"]) == (5, 2)
    assert (s["replica_mdp_ledger_id"], s["replica_mdp_entry_id"]) == (5, 1)
    assert s["replica_mdp_covers_translated"] is False
    assert s["acked_on_origin"] == 6 and s["copies_acked_on_replica"] == 2
    assert s["redelivery_risk"] == 3 and s["skip_risk"] == 1
    only_a = subs["only-a"]
    assert only_a["replica_subscription_present"] is False
    assert only_a["redelivery_risk"] == 0, "no subscription on B: nothing to compare"
    assert "georep.repl.B" not in subs and "only-b" not in subs

    ranges = {r["range_id"]: r for r in result.table("translated_positions", T)
              if r["subscription"] == "s"}  # fmt: skip
    assert set(ranges) == {-1, 0, 1, 2}
    mdp = ranges[-1]
    assert mdp["origin_messages"] == 3 and mdp["copies"] == 3
    assert (mdp["replica_first_ledger_id"], mdp["replica_first_entry_id"]) == (5, 0)
    assert (mdp["replica_last_ledger_id"], mdp["replica_last_entry_id"]) == (5, 2)
    assert mdp["copies_not_acked_on_replica"] == 1
    first = ranges[0]  # (1:3..1:4] -> copy at 5:4
    assert (first["origin_lower_entry_id"], first["origin_upper_entry_id"]) == (3, 4)
    assert (first["replica_first_entry_id"], first["replica_last_entry_id"]) == (4, 4)
    last = ranges[2]  # (1:7..1:8] -> A8 has no copy
    assert last["origin_messages"] == 1 and last["copies"] == 0
    assert last["replica_first_ledger_id"] is None

    (link,) = result.table("link_summary", T)
    assert (link["origin_messages"], link["copies"], link["gap_messages"]) == (10, 7, 3)


def test_batches_and_partitions(result) -> None:
    gap = result.table("replication_gap", P)
    assert [(r["partition"], r["origin_ledger_id"], r["origin_entry_id"], r["batch_index"])
            for r in gap] == [(0, 2, 1, -1)]  # fmt: skip
    risk = result.table("redelivery_risk", P)
    assert sorted((r["partition"], r["batch_index"], r["replica_ledger_id"]) for r in risk) == [
        (0, 0, 7),
        (0, 1, 7),
        (0, 2, 7),
    ]
    subs = {r["partition"]: r for r in result.table("subscription_summary", P)}
    assert subs[0]["acked_on_origin"] == 3 and subs[1]["acked_on_origin"] == 0
    assert (subs[0]["translated_mdp_ledger_id"], subs[0]["translated_mdp_entry_id"]) == (7, 0)
    assert subs[1]["redelivery_risk"] == 0


def test_batch_index_acknowledgements_count_per_message(result) -> None:
    """Case Q, cell by cell (the module docstring has the worked numbers)."""
    risk = result.table("redelivery_risk", Q)
    found = sorted((r["origin_entry_id"], r["batch_index"], r["replica_entry_id"]) for r in risk)
    assert found == [(0, 0, 0), (1, 1, 1), (2, -1, 2)]
    assert all(r["replica_ledger_id"] == 50 and r["subscription"] == "q" for r in risk)
    skips = result.table("skip_risk", Q)
    assert sorted((r["origin_entry_id"], r["batch_index"]) for r in skips) == [(0, 3), (3, 0)]

    (summary,) = result.table("subscription_summary", Q)
    assert summary["acked_on_origin"] == 4
    assert summary["copies_of_acked_on_origin"] == 4 and summary["copies_acked_on_replica"] == 1
    assert (summary["redelivery_risk"], summary["skip_risk"]) == (3, 2)

    ranges = {r["range_id"]: r for r in result.table("translated_positions", Q)}
    assert {i: r["range_kind"] for i, r in ranges.items()} == {0: "range", 1: "batch", 2: "batch"}
    first_batch = ranges[1]
    assert first_batch["origin_batch_indexes"] == [0, 2]
    assert (first_batch["origin_upper_ledger_id"], first_batch["origin_upper_entry_id"]) == (40, 0)
    assert (first_batch["origin_messages"], first_batch["copies"]) == (2, 2)
    assert first_batch["copies_acked_on_replica"] == 1
    assert ranges[0]["origin_batch_indexes"] is None and ranges[0]["origin_messages"] == 1

    differences = {r["origin_entry_id"]: r for r in result.table("batch_differences", Q)}
    assert {e: (r["partly_on_origin"], r["partly_on_replica"], r["origin_only_indexes"],
                r["replica_only_indexes"]) for e, r in differences.items()} == {
        0: (True, True, [0], [3]),
        1: (True, False, [1], []),
        3: (False, True, [], [0]),
    }  # fmt: skip
    assert {r["replica_entry_id"] for r in differences.values()} == {0, 1, 3}
    page = (result.out / "report.html").read_text()
    assert "Batches acknowledged differently" in page


def test_duplicate_copies_on_a_replica(result) -> None:
    (duplicate,) = result.table("duplicate_copies", D)
    assert duplicate["origin_entry_id"] == 1 and duplicate["copies"] == 2
    assert [(p["l"], p["e"]) for p in duplicate["positions"]] == [(40, 1), (40, 3)]
    assert result.table("replication_gap", D) == []
    (summary,) = result.table("subscription_summary", D)
    assert summary["acked_on_origin"] == 3, "messages, not copies"
    assert summary["redelivery_risk"] == 4, "both copies of 30:1 would be delivered again"


def test_big_ranges_are_joined_not_exploded(result) -> None:
    """Counted exactly, while the range stays a few hundred pieces (not 200,000 rows)."""
    expected = sum(
        1 for m in case_big()[0] if BIG_RANGE[0] < (m["ledger_id"], m["entry_id"]) <= BIG_RANGE[1]
    )
    (summary,) = result.table("subscription_summary", BIG)
    assert summary["acked_on_origin"] == expected == summary["redelivery_risk"]
    spans = sum(BIG_SPANS.values())
    assert spans // 1024 < 300


def test_delivery_log_duplicates_and_losses(result) -> None:
    duplicates = {r["origin_entry_id"]: r for r in result.table("observed_duplicates", T)}
    assert {e: r["kind"] for e, r in duplicates.items()} == {
        0: "before",
        2: "across_failover",
        4: "across_failover",
        6: "across_failover",
    }
    assert duplicates[0]["deliveries"] == 2
    losses = {(r["origin_cluster"], r["origin_entry_id"]): r["cause"]
              for r in result.table("observed_losses", T)}  # fmt: skip
    assert losses == {("A", 3): "not_delivered", ("A", 7): "replication_gap",
                      ("A", 9): "replication_gap"}  # fmt: skip


def test_report_is_one_self_contained_page(result) -> None:
    page = (result.out / "report.html").read_text()
    assert page.count("<svg") == 6, "one timeline per topic"
    assert "Observed losses" in page and T in page
    assert "<script" not in page and "src=" not in page and "<link" not in page
    assert re.search(r"<h1>georep reconciliation of A, B, \d{4}-\d\d-\d\d \d\d:\d\d UTC</h1>", page)
    # the verdict: the link fails (a gap and a copy stored twice), with the totals' figures
    gap, published = result.totals["replication_gap"], result.totals["messages"]
    assert f"<span class='word'>fail</span> A → B: {gap} missing" in page
    assert "observed in the delivery log: 4 duplicates" in page
    assert page.count("class='failover'") == 1, "the delivery log's failover, on T's timeline"
    assert published and "<th data-column='redelivery_risk'>redelivery risk</th>" in page


def test_small_tables_also_as_csv(result) -> None:
    rows = (result.out / "csv" / "batch_differences").glob("*.csv")
    text = "".join(path.read_text() for path in rows)
    assert text.startswith("topic,partition,subscription,") and ",true,true,0,3\n" in text
    for name in ("link_summary", "subscription_summary", "replication_gaps", "duplicate_copies"):
        assert list((result.out / "csv" / name).glob("*.csv")), name


def test_delivery_log_in_parquet(spark, tmp_path) -> None:
    jsonl = deliveries_for_t(tmp_path / "deliveries.jsonl")
    rows = [json.loads(line) for line in Path(jsonl).read_text().splitlines()]
    for row in rows:
        at = row["delivered_at"]
        row["delivered_at"] = (
            dt.datetime.fromtimestamp(at / 1000, tz=dt.UTC) if isinstance(at, int)
            else dt.datetime(2023, 11, 14, 22, 14, tzinfo=dt.UTC)
        )  # fmt: skip
    parquet_path = tmp_path / "deliveries.parquet"
    pq.write_table(pa.Table.from_pylist(rows), parquet_path)
    from_parquet = load_deliveries(spark, str(parquet_path)).orderBy("delivered_at").collect()
    from_json = load_deliveries(spark, jsonl).orderBy("delivered_at").collect()
    assert from_parquet == from_json
    assert {(r.topic, r.partition, r.phase) for r in from_json} == {
        (T, -1, "before"),
        (T, -1, "after"),
    }


@pytest.mark.parametrize(
    ("lines", "complaint"),
    [
        (['{"cluster": "A"'], "not JSON objects"),
        ([json.dumps({"cluster": "A", "topic": T, "subscription": "s", "origin_cluster": "A",
                      "origin_ledger_id": 1, "origin_entry_id": 0, "batch_index": -1,
                      "delivered_at": 5, "phase": "during"})], "wrong phase"),
        ([json.dumps({"cluster": "A", "topic": T, "subscription": "s", "origin_cluster": "A",
                      "origin_ledger_id": "x", "batch_index": -1,
                      "delivered_at": 5, "phase": "after"})],
         "origin_ledger_id unreadable.*no origin_entry_id"),
        ([], "no rows"),
    ],
)  # fmt: skip
def test_bad_delivery_logs_are_refused(spark, tmp_path, lines, complaint) -> None:
    log = tmp_path / "bad.jsonl"
    log.write_text("".join(line + "\n" for line in lines))
    with pytest.raises(InputError, match=complaint):
        load_deliveries(spark, str(log))


def test_a_declared_link_is_checked_even_with_no_copy(spark) -> None:
    from georep.spark_reconcile import reconciliation as R

    rows = [message("A", 1, 0), message("A", 1, 1, topic=P, partition=0),
            message("B", 5, 0, origin=("A", 1, 0))]  # fmt: skip
    messages = spark.createDataFrame(rows, schema=spark_schema(schema.MESSAGES)).drop(
        "schema_version"
    )
    found = {tuple(r) for r in R.links(messages).collect()}
    assert found == {(T, "A", "B")}
    declared = spark.createDataFrame([("A", "C")], "origin_cluster string, replica_cluster string")
    found = {tuple(r) for r in R.links(messages, declared).collect()}
    assert found == {(T, "A", "B"), (T, "A", "C"), (P, "A", "C")}


# --- acknowledgements in the delivery log: duplicates vs redeliveries -----------------
W = "persistent://geo/ns/worked"


def worked_log(path: Path, *, with_acks: bool) -> str:
    """A published 1:0..1:9, B holds copies of 0..7. On A: 0 negatively acknowledged and
    redelivered, 1 too within the same millisecond, acked 0..3, 4..6 delivered and not
    acked. On B: 2..5 and 7 (7 twice), each acked."""
    rows = []

    def delivered(cluster, entry, phase, at, acked):
        row = {"cluster": cluster, "topic": W, "subscription": "w", "origin_cluster": "A",
               "origin_ledger_id": 1, "origin_entry_id": entry, "batch_index": -1,
               "delivered_at": BASE_MS + at, "phase": phase}  # fmt: skip
        if with_acks:
            row["acked"] = acked
        rows.append(row)

    delivered("A", 0, "before", 0, False)
    delivered("A", 1, "before", 11, False)
    for entry in range(7):
        delivered("A", entry, "before", 10 + entry, entry <= 3)
    for at, entry in enumerate((2, 3, 4, 5, 7, 7)):
        delivered("B", entry, "after", 100 + at, True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


@pytest.mark.parametrize(
    ("with_acks", "duplicates", "redeliveries", "losses"),
    [
        (True,
         {2: "across_failover", 3: "across_failover", 7: "after"},
         {0: "before", 1: "before", 4: "across_failover", 5: "across_failover"},
         {6: "not_acknowledged", 8: "replication_gap", 9: "replication_gap"}),
        # a log that does not say: every delivery counts as acknowledged
        (False,
         {0: "before", 1: "before", 2: "across_failover", 3: "across_failover",
          4: "across_failover", 5: "across_failover", 7: "after"},
         {},
         {8: "replication_gap", 9: "replication_gap"}),
    ],
)  # fmt: skip
def test_acknowledgements_tell_duplicates_from_redeliveries(
    spark, tmp_path, with_acks, duplicates, redeliveries, losses
) -> None:
    """The drill's definitions (docs/DRILL.md): a duplicate was acknowledged and then
    delivered again; delivered on A unacknowledged and then on B is a redelivery; a loss
    was neither acknowledged on A nor delivered on B (one B lacks is a replication gap)."""
    from georep.spark_reconcile.observed import observed

    deliveries = load_deliveries(spark, worked_log(tmp_path / "log.jsonl", with_acks=with_acks))
    published = spark.createDataFrame(
        [message("A", 1, e, topic=W) for e in range(10)], schema=spark_schema(schema.MESSAGES)
    ).drop("schema_version")
    gap = published.where("entry_id >= 8")
    seen = observed(deliveries, published, gap)

    def by_entry(frame, column):
        return {row.origin_entry_id: row[column] for row in frame.collect()}

    assert by_entry(seen.duplicates, "kind") == duplicates
    assert by_entry(seen.redeliveries, "kind") == redeliveries
    assert by_entry(seen.losses, "cause") == losses
    if with_acks:
        acked_at = by_entry(seen.duplicates, "first_acked_at")
        assert acked_at[7] == dt.datetime.fromtimestamp((BASE_MS + 104) / 1000)


def test_acked_column_from_parquet_and_refused_when_not_boolean(spark, tmp_path) -> None:
    jsonl = worked_log(tmp_path / "log.jsonl", with_acks=True)
    rows = [json.loads(line) for line in Path(jsonl).read_text().splitlines()]
    parquet_path = tmp_path / "log.parquet"
    pq.write_table(pa.Table.from_pylist(rows), parquet_path)
    order = ["delivered_at", "origin_entry_id", "acked"]
    from_parquet = load_deliveries(spark, str(parquet_path)).orderBy(*order).collect()
    from_json = load_deliveries(spark, jsonl).orderBy(*order).collect()
    assert from_parquet == from_json
    assert [r.acked for r in from_json] == [False, True, False, True] + [True] * 2 + [False] * 3 + [
        True
    ] * 6

    rows[0]["acked"] = "maybe"
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(json.dumps(row) + "\n" for row in rows))
    with pytest.raises(InputError, match="1 rows: acked not a boolean"):
        load_deliveries(spark, str(bad))
