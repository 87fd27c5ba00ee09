"""``georep drill --beside-pulsar``: georep's gateways beside two real Pulsar standalones
(Pulsar's geo-replication off, the gateways replicate and sync in full mode), measured by
the same drill as the other targets.

Shared consumers acknowledging out of order leave acknowledged ranges above A's
mark-delete position when A's standalone is killed; full mode syncs them, so B delivers
none of them again and loses nothing. The drill starts its own two standalones (about
10 s) and gateways: one drill per Pulsar release. The gateways' copies carry georep's own
origin properties, so unlike ``--mode pulsar`` this runs on 3.0 as well.
"""

from __future__ import annotations

import argparse
import asyncio
import time

import pytest

from georep.drill import main
from georep.drill.progress import Progress
from georep.drill.settings import settings_from_args
from georep.pulsar.standalone import VERSION_ENV

pytestmark = [pytest.mark.timeout(400), pytest.mark.slow]


def test_full_mode_beside_pulsar_brings_nothing_twice_after_kill(
    pulsar_jars, pulsar_version, tmp_path, monkeypatch
):
    monkeypatch.setenv(VERSION_ENV, pulsar_version)  # the drill resolves the release it names
    out = tmp_path / "out"
    parser = argparse.ArgumentParser()
    main.configure(parser)
    settings = settings_from_args(
        parser.parse_args(["--beside-pulsar", "--mode", "full", "--fail", "kill",
                           "--messages", "300", "--scenario", "shared-out-of-order",
                           "--out", str(out), "--data", str(tmp_path / "data")])
    )  # fmt: skip
    out.mkdir(parents=True)
    started = time.monotonic()
    report = asyncio.run(main.drill(settings, out, Progress(enabled=False)))
    took_s = time.monotonic() - started
    print(f"Pulsar {pulsar_version}: the drill beside Pulsar took {took_s:.1f} s")
    block = report["modes"]["full"]
    assert block["beside_pulsar"] == pulsar_version and report["beside_pulsar"]
    assert block["checks"] == {"origin_missing": 0, "origin_mismatches": 0, "unknown_deliveries": 0}
    assert block["produced"] == 300
    assert block["duplicates"]["count"] == 0, (block["duplicates"], block["warnings"])
    # A's gateway replicates the side topic too: its prediction is known, and right
    assert block["exposure_before_failure"]["count"] == 0, block["exposure_before_failure"]
    assert block["lost"]["count"] == 0, block["lost"]
    assert block["gateway_sync_mode"] == "full"
    page = (out / "report.html").read_text()
    assert f"georep full beside Apache Pulsar {pulsar_version}" in page
    assert f"full beside Pulsar {pulsar_version}" in main.summary(report, out)
