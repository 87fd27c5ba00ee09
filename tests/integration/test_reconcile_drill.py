"""Reconcile a real drill: ``georep drill`` on clusters this test runs, ``georep export``
of both clusters, ``georep reconcile`` of the exports with the drill's delivery log, and
the Spark job's figures checked against the drill's own report.json — exactly.

**World.** Clusters A and B and a gateway each (processes), replicating two namespaces
both ways: ``drill/compat`` synced in pulsar-compatible mode, ``drill/full`` in full
mode (a per-namespace override), so one world serves both drills. Each drill is
``avro-evolving`` (``shared-out-of-order``'s consumers on Avro records whose schema changes
half-way), 300 messages, ``--fail cut-link`` on running clusters: the drill
cuts the link over the gateways' REST (the topic's policy set to ``[]``). As soon as
the cut is in place (no replicator of the topic left) the test SIGKILLs both gateways
— the managed drill's cut-link — so that nothing moves A's cursor or B's topic once the
drill, ending, removes its topic policies. Then A and B are exported (A's cursor is still
what it was at the failure), the gateways started again for the next drill.
Pulsar-compatible mode shows duplicates (the scenario leaves acknowledged ranges above
A's mark-delete position); full mode shows none.

**What is compared**, per mode (the Spark job restricted to the drill's topic):

=============================================  ==========================================
reconcile                                      drill report
=============================================  ==========================================
observed_duplicates (all ``across_failover``)  ``duplicates``: acked on A, delivered on B
observed_redeliveries                          ``redelivered``: delivered on A unacked,
                                               then on B
observed_losses, cause not ``replication_gap`` ``lost``
observed_losses, cause ``replication_gap``     ``not_replicated.unconsumed_on_A``
link A→B: origin messages / copies / gap       ``produced`` / ``replicated_before_failure``
                                               / ``not_replicated``
subscription: A's mark-delete position,        ``a_cursor_at_failure``: markDeletePosition,
messages acknowledged on A                     ``acked_on_A_confirmed``
subscription: translated mark-delete position  B's gateway's applied ``lastMarkDelete`` at
                                               the failure (the gateway's translation;
                                               bounds, below)
link A→B: undecodable copies (0), every copy   ``undecodable_on_B`` (0): each delivery on
naming a schema, both schemas on A             B decoded by its version there
=============================================  ==========================================

The observed figures are the drill's definitions because the delivery log carries
``acked`` (spark_reconcile/observed.py ``observed``): a duplicate is a message
delivered again after an acknowledged delivery, which in a drill is "acknowledged on A,
delivered on B"; a message delivered on A unacknowledged and then on B is a redelivery,
not a duplicate. The drill reports messages that never reached B as ``not_replicated``,
apart from its losses; the job counts those not acknowledged on A as losses with cause
``replication_gap``.

Not compared: the job's redelivery and skip risks. They are predictions from the two
cursors as exported, and B's was exported after the drain (B acknowledged everything it
received), so they describe a failing back to A, not the drill's failover. The gateway's
translation is compared as bounds: B's mark-delete position lies before the copy of the
first message above A's mark-delete position (in both modes: a remote never acknowledges
what the source did not), and in full mode at or past the translated one, the copy of A's
last message at or below it (marker entries may lie between); in pulsar-compatible mode
it is a snapshot's, which may lie anywhere below.

About 65 s on two cores: two drills of ~12 s, four exports, one Spark run (local[2], UI
off) of ~30 s.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from georep import limits
from georep.domain.position import Position
from georep.drill import admin_client
from georep.pulsar_text.cursor import parse_position
from georep.runtime.processes import georep_command
from tests.harness.gateway import (
    ClusterProcess,
    GatewayProcess,
    admin_url,
    create_namespace,
    http,
)

pytest.importorskip("pulsar")
pytest.importorskip("pyspark")
pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]

MESSAGES = 300
SCENARIO = "avro-evolving"
MODES = ("pulsar-compatible", "full")
NAMESPACES = {"pulsar-compatible": "drill/compat", "full": "drill/full"}
#: The managed drill's [subscription_sync] (drill/main.py SYNC_PERIODS), one mode per
#: namespace.
SYNC_TOML = """
[subscription_sync]
mode = "full"
subscriptions = "flagged"
snapshot_interval_s = 1.0
poll_interval_s = 0.2
[subscription_sync.namespaces."drill/compat"]
mode = "pulsar-compatible"
"""
#: How long the watcher waits for a drill to cut the link.
CUT_WAIT_S_MAX = 300.0


def georep(*args: str, timeout_s: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run(
        georep_command("--log-level", "WARNING", *args),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


@dataclass
class World:
    root: Path
    clusters: dict[str, ClusterProcess] = field(default_factory=dict)
    gateways: dict[str, GatewayProcess] = field(default_factory=dict)

    def start(self) -> World:
        self.root.mkdir(parents=True, exist_ok=True)
        self.clusters = {name: ClusterProcess(self.root / name.lower(), name=name)
                         for name in ("A", "B")}  # fmt: skip
        for cluster in self.clusters.values():
            cluster.start()
            for namespace in NAMESPACES.values():
                create_namespace(cluster, namespace)
        for name, other in (("A", "B"), ("B", "A")):
            self.gateways[name] = GatewayProcess(
                self.root / f"gw-{name.lower()}",
                local=self.clusters[name],
                remotes=[self.clusters[other]],
                policies={namespace: [other] for namespace in NAMESPACES.values()},
                extra_toml=SYNC_TOML,
            )
        return self

    def stop(self) -> None:
        for process in [*self.gateways.values(), *self.clusters.values()]:
            process.kill()

    def running_flags(self) -> list[str]:
        flags = []
        for name, cluster in self.clusters.items():
            prefix = f"--{name.lower()}"
            flags += [f"{prefix}-service-url", cluster.url]
            flags += [f"{prefix}-admin-url", admin_url(cluster)]
            flags += [f"{prefix}-gateway-url", self.gateways[name].url]
        return flags

    def drill(self, mode: str, out: Path) -> dict:
        """One drill in ``mode``; both gateways are killed once its cut is in place."""
        for gateway in self.gateways.values():
            gateway.start()
        done = threading.Event()
        cut: list[str] = []
        watcher = threading.Thread(target=self._kill_at_cut, args=(mode, cut, done))
        watcher.start()
        try:
            process = georep(
                "drill", "--scenario", SCENARIO, "--messages", str(MESSAGES),
                "--fail", "cut-link", "--mode", mode, "--namespace", NAMESPACES[mode],
                "--out", str(out), "--json", "--no-progress", *self.running_flags(),
            )  # fmt: skip
        finally:
            done.set()
            watcher.join()
        assert process.returncode == 0, process.stderr[-3000:]
        report = json.loads((out / "report.json").read_text())
        assert cut == [report["modes"][mode]["topic"]], (cut, process.stderr[-3000:])
        return report["modes"][mode]

    def _kill_at_cut(self, mode: str, cut: list[str], done: threading.Event) -> None:
        """Wait until B's gateway holds the drill topic's policy ``[]`` (the drill sets
        it on A's first) and neither gateway replicates the topic any more — what the
        drill itself waits for — then SIGKILL both gateways."""
        prefix = f"persistent://{NAMESPACES[mode]}/drill-"
        deadline = time.monotonic() + CUT_WAIT_S_MAX
        while not done.is_set() and time.monotonic() < deadline:
            time.sleep(0.05)
            status, policies = http("GET", f"{self.gateways['B'].url}/admin/georep/v1/policies")
            topics = (policies or {}).get("topics") or {} if status == 200 else {}
            cut_topics = [t for t, p in topics.items()
                          if _full_name(t).startswith(prefix) and p["clusters"] == []]  # fmt: skip
            if not cut_topics or any(self._replicates(g, cut_topics[0]) for g in self.gateways):
                continue
            for gateway in self.gateways.values():
                gateway.kill()
            cut.append(_full_name(cut_topics[0]))
            return

    def _replicates(self, gateway: str, topic: str) -> bool:
        status, stats = http("GET", f"{self.gateways[gateway].url}/admin/georep/v1/stats")
        return status != 200 or bool(admin_client.replicators_of(stats, _full_name(topic)))

    def export(self, cluster: str, topic: str, out: Path) -> dict:
        process = georep(
            "export", "--cluster-admin", admin_url(self.clusters[cluster]),
            "--service-url", self.clusters[cluster].url, "--topics", topic,
            "--out", str(out), "--progress-interval", "0",
        )  # fmt: skip
        assert process.returncode == 0, process.stderr[-3000:]
        return json.loads(process.stdout)


def _full_name(topic: str) -> str:
    return topic if "://" in topic else f"persistent://{topic}"


@dataclass
class Drilled:
    root: Path
    reports: dict[str, dict]
    exports: dict[tuple[str, str], Path]
    deliveries: Path


@pytest.fixture(scope="module")
def drilled(tmp_path_factory) -> Drilled:
    """Both drills, each exported from A and B right after it; one delivery log."""
    root = tmp_path_factory.mktemp("reconcile-drill")
    world = World(root / "world")
    reports, exports, lines = {}, {}, []
    try:
        world.start()
        for mode in MODES:
            out = root / f"drill-{mode}"
            block = world.drill(mode, out)
            reports[mode] = block
            for cluster in ("A", "B"):
                exports[mode, cluster] = root / f"export-{mode}-{cluster}"
                summary = world.export(cluster, block["topic"], exports[mode, cluster])
                assert summary["unmapped_copies"] == 0, summary
            lines += (out / "deliveries.jsonl").read_text().splitlines()
    finally:
        world.stop()
    deliveries = root / "deliveries.jsonl"
    deliveries.write_text("".join(line + "\n" for line in lines))
    return Drilled(root, reports, exports, deliveries)


@dataclass
class Reconciled:
    totals: dict
    out: Path

    def table(self, name: str, topic: str) -> list[dict]:
        rows = pq.read_table(self.out / name).to_pylist()
        return [row for row in rows if row["topic"] == topic]


@pytest.fixture(scope="module")
def reconciled(drilled, spark) -> Reconciled:
    """One reconciliation of all four exports with both drills' deliveries (on the
    session's Spark, tests/conftest.py)."""
    from georep.spark_reconcile import job
    from georep.spark_reconcile.inputs import check_exports

    out = drilled.root / "reconciled"
    checked = check_exports([str(path) for path in drilled.exports.values()])
    totals = job.reconcile(spark, checked, str(drilled.deliveries), out, quiet=True)
    return Reconciled(totals, out)


def test_the_drills_ran_clean(drilled) -> None:
    for mode, block in drilled.reports.items():
        assert block["checks"] == {"origin_missing": 0, "origin_mismatches": 0,
                                   "unknown_deliveries": 0}, mode  # fmt: skip
        assert block["produced"] == MESSAGES and block["gateway_sync_mode"] == mode
        assert block["a_cursor_at_failure"] is not None, block["warnings"]
        assert not block["warnings"], block["warnings"]
    assert drilled.reports["pulsar-compatible"]["duplicates"]["count"] > 0
    assert drilled.reports["full"]["duplicates"]["count"] == 0


@pytest.mark.parametrize("mode", MODES)
def test_observed_duplicates_redeliveries_and_losses_are_the_drills(
    drilled, reconciled, mode
) -> None:
    block = drilled.reports[mode]
    topic, drill_ids = block["topic"], _drill_ids(drilled.deliveries, block["topic"])

    def category(rows: list[dict]) -> dict:
        """The drill's form: count and the first drill ids in production order."""
        ids = sorted(
            drill_ids.get(Position(r["origin_ledger_id"], r["origin_entry_id"]), repr(r))
            for r in rows
        )
        return {"count": len(ids), "sample": ids[: limits.drill_sample_ids_max]}

    duplicates = reconciled.table("observed_duplicates", topic)
    assert {r["kind"] for r in duplicates} <= {"across_failover"}
    assert category(duplicates) == _without(block["duplicates"], "ack_not_on_A_cursor")
    redeliveries = reconciled.table("observed_redeliveries", topic)
    assert {r["kind"] for r in redeliveries} <= {"across_failover"}
    assert category(redeliveries) == block["redelivered"]
    losses = reconciled.table("observed_losses", topic)
    gap = [r for r in losses if r["cause"] == "replication_gap"]
    assert category([r for r in losses if r not in gap]) == block["lost"]
    assert len(gap) == block["not_replicated"]["unconsumed_on_A"]


@pytest.mark.parametrize("mode", MODES)
def test_replication_and_cursors_are_the_drills(drilled, reconciled, mode) -> None:
    block = drilled.reports[mode]
    topic = block["topic"]
    (link,) = reconciled.table("link_summary", topic)
    assert (link["origin_cluster"], link["replica_cluster"]) == ("A", "B")
    assert link["origin_messages"] == block["produced"]
    assert link["copies"] == block["replicated_before_failure"]
    assert link["gap_messages"] == block["not_replicated"]["count"]
    assert link["duplicate_copies"] == 0 and link["unmapped_copies"] == 0
    # every copy carries its origin's schema, as B's consumers found by decoding
    assert link["undecodable_copies"] == 0 == block["undecodable_on_B"]["count"]
    origins = pq.read_table(drilled.exports[mode, "A"] / "messages").to_pylist()
    assert len({m["payload_schema"] for m in origins}) == 2  # v1 then v2, none without
    copies = pq.read_table(drilled.exports[mode, "B"] / "messages").to_pylist()
    assert all(c["payload_schema"] is not None for c in copies)

    (subscription,) = [r for r in reconciled.table("subscription_summary", topic)
                       if r["subscription"] == block["subscription"]]  # fmt: skip
    cursor = block["a_cursor_at_failure"]
    origin_mdp = (subscription["origin_mdp_ledger_id"], subscription["origin_mdp_entry_id"])
    assert origin_mdp == parse_position(cursor["markDeletePosition"])
    assert subscription["acked_on_origin"] == cursor["acked_on_A_confirmed"]

    translated = (subscription["translated_mdp_ledger_id"],
                  subscription["translated_mdp_entry_id"])  # fmt: skip
    # B's sync block for the subscription exists once it applied something from A.
    on_b = (block["sync_stats_at_failure"] or {}).get("B") or {}
    last_applied = ((on_b.get("applied") or {}).get("A") or {}).get("lastMarkDelete")
    if last_applied is None:
        # Pulsar's snapshot protocol moves B's cursor only once a snapshot round has
        # completed below A's mark-delete; a loaded run may fail A before the first one.
        # B then applied nothing (it may not even know the subscription yet), which
        # skips nothing: its cursor stays at its start.
        assert mode == "pulsar-compatible", "full mode applies every mark-delete it reads"
        return
    applied = parse_position(last_applied)
    copies = pq.read_table(drilled.exports[mode, "B"] / "messages").to_pylist()
    first_above = min((c["ledger_id"], c["entry_id"]) for c in copies
                      if (c["origin_ledger_id"], c["origin_entry_id"]) > origin_mdp)  # fmt: skip
    assert applied < first_above, (applied, first_above)
    if mode == "full":
        assert translated <= applied, (translated, applied)


def test_totals_add_up_over_both_drills(drilled, reconciled) -> None:
    totals, blocks = reconciled.totals, drilled.reports.values()
    assert totals["clusters"] == 2 and totals["topics"] == 2
    assert totals["observed_duplicates"] == sum(b["duplicates"]["count"] for b in blocks)
    assert totals["observed_redeliveries"] == sum(b["redelivered"]["count"] for b in blocks)
    assert totals["replication_gap"] == sum(b["not_replicated"]["count"] for b in blocks)
    page = (reconciled.out / "report.html").read_text()
    assert "Observed redeliveries" in page and page.count("<svg") == 2
    # the page leads with the verdict: what the delivery log showed, in the drills' figures
    assert page.index("<ul class='verdict'>") < page.index("<h2>Problems</h2>")
    assert f"observed in the delivery log: {totals['observed_duplicates']} duplicates" in page
    assert page.count("class='failover'") == 2, "each drill's failover on its topic's timeline"


def _drill_ids(deliveries: Path, topic: str) -> dict[Position, str]:
    """origin position -> drill id, of the messages the delivery log shows."""
    ids = {}
    for line in deliveries.read_text().splitlines():
        row = json.loads(line)
        if row["topic"] == topic and row["origin_position"]:
            ids[parse_position(row["origin_position"])] = row["drill_id"]
    return ids


def _without(category: dict, key: str) -> dict:
    return {k: v for k, v in category.items() if k != key}
