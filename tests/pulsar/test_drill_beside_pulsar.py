"""``georep drill --beside-pulsar``: georep's gateways beside two real Pulsar standalones
(Pulsar's geo-replication off, the gateways replicate and sync in full mode), measured by
the same drill as the other targets.

Shared consumers acknowledging out of order leave acknowledged ranges above A's
mark-delete position when A's standalone is killed; full mode syncs them, so B loses
nothing. With no settle and a fast consumer, acknowledgements are still on their way to B
at the failure: B delivers again exactly what A's gateway predicted just before it (its
exposure), once B's gateway has applied what B stores (``/sync/caught-up``). That 0
comes twice after a settle is the failover test's (``test_gateway_pulsar.py``). The
drill starts its own two standalones (about 10 s) and gateways: one drill per Pulsar
release. The gateways' copies carry georep's own
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
from pulsar_tools.standalone import VERSION_ENV

pytestmark = [pytest.mark.timeout(400), pytest.mark.slow]


def test_full_mode_beside_pulsar_brings_back_what_it_predicted_after_kill(
    pulsar_jars, pulsar_version, tmp_path, monkeypatch
):
    monkeypatch.setenv(VERSION_ENV, pulsar_version)  # the drill resolves the release it names
    out = tmp_path / "out"
    parser = argparse.ArgumentParser()
    main.configure(parser)
    settings = settings_from_args(
        parser.parse_args(["--beside-pulsar", "--mode", "full", "--fail", "kill",
                           "--messages", "300", "--scenario", "shared-out-of-order",
                           "--settle", "0", "--consume-rate", "2000",
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
    # A's gateway replicates the side topic too: its prediction is known, and exact
    # (but for acknowledgements A's broker never took, which nobody can predict)
    duplicates = block["duplicates"]
    predicted = block["exposure_before_failure"]["count"]
    assert duplicates["count"] - duplicates["ack_not_on_A_cursor"] == predicted, (
        duplicates,
        block["exposure_before_failure"],
        block["timings_s"],
        block["warnings"],
    )
    assert not [w for w in block["warnings"] if "B's gateway" in w], block["warnings"]
    assert block["lost"]["count"] == 0, block["lost"]
    assert block["gateway_sync_mode"] == "full"
    page = (out / "report.html").read_text()
    assert f"georep full beside Apache Pulsar {pulsar_version}" in page
    assert f"full beside Pulsar {pulsar_version}" in main.summary(report, out)
