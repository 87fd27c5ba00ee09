"""``georep drill`` end to end: clusters A and B with gateways stood up by the drill.

- full mode, every scenario, A killed (-9): no duplicates, nothing lost of what was
  replicated before the failure;
- pulsar-compatible, Shared with out-of-order acks: duplicates (the scenario guarantees
  acknowledged ranges above A's mark-delete position at the failure, which syncing the
  mark-delete position alone cannot carry), and the output files agree with the report;
- the exposure A's gateway reads at the failure: the duplicates in full mode, at least
  them in pulsar-compatible mode;
- avro-evolving (Avro records whose schema changes half-way), in both modes: every
  message delivered on B decodes by the schema version it carries there;
- bad flags exit 2 as a process.

Each drill takes about 10 s (2 s to start, 300 messages, 3 s settle, 3 s quiet drain).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
from pathlib import Path

import pytest

from georep.drill import main
from georep.drill.progress import Progress
from georep.drill.scenarios import SCENARIOS
from georep.drill.settings import settings_from_args
from georep.runtime.processes import georep_command

pytest.importorskip("pulsar")
pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

MESSAGES = "300"


def settings_of(*flags: str):
    parser = argparse.ArgumentParser()
    main.configure(parser)
    return settings_from_args(parser.parse_args(["--messages", MESSAGES, *flags]))


def drill(tmp_path: Path, *flags: str) -> dict:
    out = tmp_path / "out"
    out.mkdir(parents=True, exist_ok=True)
    settings = settings_of("--out", str(out), "--data", str(tmp_path / "data"), *flags)
    return asyncio.run(main.drill(settings, out, Progress(enabled=False)))


def assert_sound(block: dict) -> None:
    """What holds in any mode: the copies carry their origin, everything was produced
    and replicated (A fails long after producing), and nothing went missing."""
    assert block["checks"] == {"origin_missing": 0, "origin_mismatches": 0, "unknown_deliveries": 0}
    assert block["produced"] == int(MESSAGES)
    assert block["replicated_before_failure"] == block["produced"], block["not_replicated"]
    assert block["delivered_on_A"] >= 1 and block["acked_on_A"] >= 1
    assert block["lost"]["count"] == 0, block["lost"]
    assert block["time_to_resume_on_B_s"] is not None


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_full_mode_after_kill_has_no_duplicates_and_no_loss(tmp_path, scenario):
    report = drill(tmp_path, "--scenario", scenario, "--fail", "kill", "--mode", "full")
    block = report["modes"]["full"]
    assert_sound(block)
    assert block["duplicates"]["count"] == 0, (block["duplicates"], block["warnings"])
    assert block["exposure_before_failure"]["count"] == 0, block["exposure_before_failure"]
    # B delivered exactly what A had not acknowledged
    assert block["delivered_on_B"] == block["produced"] - block["acked_on_A"]
    if SCENARIOS[scenario].avro:
        assert_decoded_on_b(block)
    else:
        assert block["undecodable_on_B"] is None and block["schema_versions_on_B"] is None


def assert_decoded_on_b(block: dict) -> None:
    """Every message delivered on B decoded by its version there, and B's deliveries carry
    both schemas: what B delivered reaches both halves of production (A stopped halfway
    through its deliveries, and A's consumers hold back one message until the failure)."""
    assert block["undecodable_on_B"]["count"] == 0, block["undecodable_on_B"]
    versions = block["schema_versions_on_B"]
    assert "none" not in versions and sum(versions.values()) == block["delivered_on_B"]
    assert len(versions) == 2, versions


def test_avro_evolving_pulsar_compatible_decodes_on_b(tmp_path):
    report = drill(tmp_path, "--scenario", "avro-evolving", "--mode", "pulsar-compatible")
    block = report["modes"]["pulsar-compatible"]
    assert_sound(block)
    assert_decoded_on_b(block)
    assert block["duplicates"]["count"] > 0  # as shared-out-of-order: the same consumers
    lines = (tmp_path / "out" / "deliveries.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    on_b = [row for row in rows if row["phase"] == "after"]
    assert on_b and all(row["payload_schema_version"] is not None for row in on_b)
    assert not any(row["undecodable"] for row in on_b)
    page = (tmp_path / "out" / "report.html").read_text()
    assert 'data-key="undecodable_on_B">0</td>' in page


def test_pulsar_compatible_shared_out_of_order_shows_duplicates(tmp_path):
    out = tmp_path / "out"
    process = subprocess.run(
        georep_command(
            "--log-level", "WARNING", "drill",
            "--scenario", "shared-out-of-order", "--messages", MESSAGES, "--fail", "kill",
            "--mode", "pulsar-compatible", "--out", str(out), "--data", str(tmp_path / "data"),
            "--json",
        ),
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    assert process.returncode == 0, process.stderr[-3000:]
    report = json.loads(process.stdout)
    block = report["modes"]["pulsar-compatible"]
    assert_sound(block)
    # the scenario's guarantee: acknowledged ranges above A's mark-delete position ...
    cursor = block["a_cursor_at_failure"]
    assert cursor is not None and cursor["ranges"] >= 1, cursor
    # ... which the mark-delete position alone does not carry to B
    assert block["duplicates"]["count"] > 0
    assert block["duplicates"]["ack_not_on_A_cursor"] == 0
    assert block["exposure_before_failure"]["count"] >= block["duplicates"]["count"]

    # the files agree with the report
    assert json.loads((out / "report.json").read_text()) == report
    rows = [json.loads(line) for line in (out / "deliveries.jsonl").read_text().splitlines()]
    assert len(rows) == block["deliveries_on_A"] + block["deliveries_on_B"]
    assert {row["mode"] for row in rows} == {"pulsar-compatible"}
    assert sum(row["phase"] == "before" and row["acked"] for row in rows) >= block["acked_on_A"]
    page = (out / "report.html").read_text()
    assert "<svg" in page and block["topic"] in page
    acked_on_a = {r["origin_position"] for r in rows if r["phase"] == "before" and r["acked"]}
    again_on_b = [r for r in rows if r["phase"] == "after" and r["origin_position"] in acked_on_a]
    assert len({r["origin_position"] for r in again_on_b}) == block["duplicates"]["count"]
    assert page.count("<title>duplicate ") == len(again_on_b)
    # the verdict, first: a failure, its figures, and why (A's cursor against B's)
    verdict = page[page.index('<ul class="verdict">') : page.index('<table class="figures">')]
    assert '<li class="fail" data-target="pulsar-compatible">' in verdict
    assert f"{block['duplicates']['count']} duplicates</span>" in verdict
    assert f"A&#x27;s cursor at the failure: mark-delete {cursor['markDeletePosition']}" in verdict
    # the sync lag over time, sampled from the gateways' start to the failure; the last
    # sample comes after the state at the failure was read, so a lag B's gateway knew then
    # is in the series and drawn (whether a snapshot completed within the settle is the
    # machine's pace, not a guarantee: without one there is no lag to draw)
    samples = block["sync_lag_samples_ms"]
    assert samples and all(at_ms <= block["failed_at"] for at_ms, _ in samples)
    assert '<svg class="lag"' in page
    if block["sync_lag_at_failure_ms"] is not None:
        assert samples[-1][1] is not None
    # A's replication backlog to B, sampled at the same times, as A's gateway reports it
    backlogs = block["replication_backlog_samples"]
    assert [at_ms for at_ms, _ in backlogs] == [at_ms for at_ms, _ in samples]
    assert any(n is not None for _, n in backlogs) and '<svg class="backlog"' in page


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--at", "2"], "--at 2.0"),
        (["--messages", "lots"], "invalid int value"),
        (["--fail", "cut-link", "--a-service-url", "pulsar://127.0.0.1:1"], "--a-admin-url"),
    ],
)
def test_bad_flags_exit_2(flags, message):
    process = subprocess.run(
        georep_command("drill", *flags),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert process.returncode == 2
    assert message in process.stderr
