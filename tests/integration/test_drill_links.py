"""``georep drill`` end to end, the failures besides a kill and the way back:

- cut-link, both modes side by side;
- failback (``--failback``), full mode, A killed: back on A nothing comes twice and
  nothing is lost, and the files keep the return apart;
- running clusters (not started by the drill), cut over their gateways' REST.

Apart from test_drill.py so that the two files' drills can run on both workers at once.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from georep.drill import admin_client, main
from georep.drill.progress import Progress
from georep.drill.topology import ManagedTopology
from tests.integration.test_drill import assert_sound, drill, settings_of

pytest.importorskip("pulsar")
pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]


def test_cut_link_in_both_modes(tmp_path):
    report = drill(
        tmp_path, "--scenario", "shared-out-of-order", "--fail", "cut-link", "--mode", "both"
    )
    assert list(report["modes"]) == ["pulsar-compatible", "full"]  # as --mode all has them
    full, compatible = report["modes"]["full"], report["modes"]["pulsar-compatible"]
    for block in (full, compatible):
        assert_sound(block)
        assert block["fail"] == "cut-link"
    assert full["duplicates"]["count"] == 0, (full["duplicates"], full["warnings"])
    assert compatible["duplicates"]["count"] > 0


def test_failback_in_full_mode_after_kill_brings_nothing_twice_to_a(tmp_path):
    """A killed, consumers on B acknowledge about half (out of order), A comes back on its
    data, B's state is synced to A, the consumers move home: 45 to 50 s, about 28 s of
    drill (the failover's 18, restore 4, sync back 2.5, drain home 3.2) and up to 20 s for
    the clusters to stop."""
    report = drill(tmp_path, "--fail", "kill", "--mode", "full", "--failback")
    block = report["modes"]["full"]
    assert_sound(block)
    assert block["duplicates"]["count"] == 0, (block["duplicates"], block["warnings"])
    assert block["exposure_before_failure"]["count"] == 0, block["exposure_before_failure"]
    back = block["failback"]
    assert back["sync_settled"], block["warnings"]
    assert back["twice"]["count"] == 0, (back["twice"], block["warnings"])
    assert back["lost"]["count"] == 0, back["lost"]
    # B acknowledged part of its drain: the admin_client, and only it, came home
    assert 0 < back["acked_on_B"] < block["delivered_on_B"]
    assert back["delivered_on_return"] == back["expected_on_return"] > 0
    # the return is kept out of the reconcile input, in a file of its own
    out = tmp_path / "out"
    phases = {
        json.loads(line)["phase"] for line in (out / "deliveries.jsonl").read_text().splitlines()
    }
    assert phases == {"before", "after"}
    rows = [
        json.loads(line) for line in (out / "deliveries-failback.jsonl").read_text().splitlines()
    ]
    assert {row["phase"] for row in rows} == {"return"}
    assert len(rows) == back["deliveries_on_return"]
    page = (out / "report.html").read_text()
    assert 'data-key="failback.twice">0 twice on A</span>' in page


async def test_running_clusters_cut_link_over_the_gateways_rest(tmp_path):
    """Clusters and gateways the drill did not start: it cuts the link by setting the
    topic's policy to [] on both gateways, and removes those policies afterwards."""
    topology = ManagedTopology(tmp_path / "data", "public/default", {"mode": "full"})
    await topology.start()
    try:
        urls = topology.urls
        flags = ["--fail", "cut-link", "--scenario", "key-shared", "--out", str(tmp_path)]
        for cluster in ("a", "b"):
            target = urls[cluster.upper()]
            assert target.gateway_url is not None
            flags += [f"--{cluster}-service-url", target.service_url]
            flags += [f"--{cluster}-admin-url", target.admin_url]
            flags += [f"--{cluster}-gateway-url", target.gateway_url]
        report = await main.drill(settings_of(*flags), tmp_path, Progress(enabled=False))
        block = report["modes"]["full"]
        for cluster in ("A", "B"):
            policies = await asyncio.to_thread(
                admin_client.request_json,
                "GET",
                f"{urls[cluster].gateway_url}/admin/georep/v1/policies",
                token_env=admin_client.GATEWAY_TOKEN_ENV,
            )
            assert block["topic"] not in (policies.get("topics") or {}), policies
    finally:
        await topology.stop()
    assert report["clusters"] == "running"
    assert_sound(block)
    assert block["duplicates"]["count"] == 0, (block["duplicates"], block["warnings"])
