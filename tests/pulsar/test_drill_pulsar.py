"""``georep drill --mode pulsar``: real Apache Pulsar with its own geo-replication and
replicated subscriptions, measured by the same drill as georep.

Shared consumers acknowledging out of order leave acknowledged ranges above A's
mark-delete position at the failure; Pulsar syncs the mark-delete position alone, so B
delivers those again: duplicates, and nothing lost (every message was replicated before
A failed). The drill starts its own two standalones (about 10 s). The cut-link drill runs
the avro-evolving scenario (the same consumers on Avro records whose schema changes
half-way): every message on B decodes by the version Pulsar's replicator stamped.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

import pytest

from georep.drill import main
from georep.drill.progress import Progress
from georep.drill.settings import settings_from_args
from pulsar_tools.standalone import VERSION_ENV

# The drill maps each copy on B to its origin by the source position Pulsar stamps.
pytestmark = [pytest.mark.timeout(400), pytest.mark.slow, pytest.mark.needs_source_position]


def drill(tmp_path: Path, *flags: str) -> dict:
    out = tmp_path / "out"
    parser = argparse.ArgumentParser()
    main.configure(parser)
    settings = settings_from_args(
        parser.parse_args(["--messages", "200", "--out", str(out), "--data",
                           str(tmp_path / "data"), "--mode", "pulsar", *flags])
    )  # fmt: skip
    out.mkdir(parents=True)
    return asyncio.run(main.drill(settings, out, Progress(enabled=False)))


@pytest.mark.parametrize(
    ("fail", "scenario"), [("kill", "shared-out-of-order"), ("cut-link", "avro-evolving")]
)
def test_real_pulsar_redelivers_acknowledged_messages_after_failover(
    pulsar_jars, pulsar_version, tmp_path, monkeypatch, fail, scenario
):
    monkeypatch.setenv(VERSION_ENV, pulsar_version)  # the drill resolves the release it names
    report = drill(tmp_path, "--fail", fail, "--scenario", scenario)
    block = report["modes"]["pulsar"]
    if scenario == "avro-evolving":  # measured as georep is: decoded on B by version
        assert block["undecodable_on_B"]["count"] == 0, block["undecodable_on_B"]
        versions = block["schema_versions_on_B"]
        assert len(versions) == 2 and "none" not in versions, versions
    else:
        assert block["undecodable_on_B"] is None
    assert block["checks"] == {"origin_missing": 0, "origin_mismatches": 0, "unknown_deliveries": 0}
    assert block["produced"] == 200
    assert block["replicated_before_failure"] == 200, block["not_replicated"]
    assert block["lost"]["count"] == 0, block["lost"]
    # Acknowledged on A, above its mark-delete position, delivered again on B.
    assert block["duplicates"]["count"] > 0
    assert block["acked_on_A"] >= block["duplicates"]["count"]
    assert block["time_to_resume_on_B_s"] is not None
    written = json.loads((tmp_path / "out" / "report.json").read_text())
    assert written["modes"]["pulsar"]["duplicates"] == block["duplicates"]
    page = (tmp_path / "out" / "report.html").read_text()
    assert "pulsar" in page
    # Pulsar's replication backlog A->B (its topic stats) sampled until the failure, drawn.
    # Sampling stops before the failure is stamped, both in wall-clock milliseconds: the
    # last sample may carry the failure's millisecond.
    assert block["sync_lag_samples_ms"] == []  # no gateway, no sync lag
    backlogs = block["replication_backlog_samples"]
    assert backlogs and all(at_ms <= block["failed_at"] for at_ms, _ in backlogs)
    assert any(n is not None for _, n in backlogs) and '<svg class="backlog"' in page
