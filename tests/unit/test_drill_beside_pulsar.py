"""``georep drill --beside-pulsar``: the modes it runs and refuses, the gateway files it
writes (as the gateway reads them), and how the report names the target."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from georep.drill import main
from georep.drill.beside_pulsar import BesidePulsarTopology
from georep.drill.errors import DrillUsageError
from georep.drill.report_page import render, target_label
from georep.drill.settings import settings_from_args
from georep.gateway import config as gateway_config
from georep.runtime.console import ConfigError
from georep.subsync.settings import SyncMode
from pulsar_tools.standalone import PulsarStandalone, StandaloneSpec


def parse(*flags: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="georep drill")
    main.configure(parser)
    return parser.parse_args(list(flags))


def test_the_georep_mode_beside_pulsar_is_full_and_all_adds_pulsar_alone():
    assert settings_from_args(parse("--beside-pulsar")).modes == ("full",)
    settings = settings_from_args(parse("--beside-pulsar", "--mode", "all"))
    assert settings.modes == ("pulsar", "full") and settings.beside_pulsar
    assert not settings_from_args(parse("--mode", "all")).beside_pulsar


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--mode", "pulsar-compatible"], "--beside-pulsar --mode pulsar-compatible"),
        (["--mode", "both"], "--beside-pulsar --mode both"),
        (
            ["--fail", "cut-link", "--a-service-url", "pulsar://x:1", "--a-admin-url", "http://x"],
            "--beside-pulsar needs clusters the drill stands up",
        ),
    ],
)
def test_what_cannot_run_beside_pulsar_exits_2(flags, message, capsys):
    with pytest.raises(DrillUsageError, match=re.escape(message)):
        settings_from_args(parse("--beside-pulsar", *flags))
    assert main.run(parse("--beside-pulsar", *flags)) == 2
    assert message in capsys.readouterr().err


def topology(tmp_path: Path, mode: str) -> BesidePulsarTopology:
    beside = BesidePulsarTopology(tmp_path, "shop/eu", {**main.SYNC_PERIODS, "mode": mode})
    beside.standalones = {
        name: PulsarStandalone(
            StandaloneSpec(name, tmp_path / name, broker_port=port, web_port=port + 1000,
                           bookie_port=port + 2000), tmp_path,
        )
        for name, port in (("A", 6650), ("B", 6651))
    }  # fmt: skip
    return beside


def test_the_gateway_file_replicates_and_syncs_beside_both_standalones(tmp_path):
    beside = topology(tmp_path, "full")
    beside.gateway_ports["B"] = 8091  # a restart listens where the first start did
    for name, other in (("A", "B"), ("B", "A")):
        path = tmp_path / f"{name}.toml"
        path.write_text(beside._gateway_toml(name, tmp_path))
        loaded = gateway_config.load(path, environ={})
        assert loaded.local.name == name and loaded.local.kind.value == "pulsar"
        assert list(loaded.remotes) == [other] and loaded.remotes[other].kind.value == "pulsar"
        assert loaded.remotes[other].service_url == beside.standalones[other].service_url
        assert dict(loaded.seed_namespace_policies) == {"shop/eu": (other,)}
        assert loaded.sync.default.mode is SyncMode.FULL
        assert loaded.discovery_interval_s == 0.5
        assert loaded.listen_port == {"A": 0, "B": 8091}[name]


def test_the_gateway_beside_pulsar_refuses_pulsar_compatible(tmp_path):
    """Why the drill refuses the mode beside Pulsar: the gateway would not start."""
    path = tmp_path / "A.toml"
    path.write_text(topology(tmp_path, "pulsar-compatible")._gateway_toml("A", tmp_path))
    with pytest.raises(ConfigError, match="pulsar-compatible"):
        gateway_config.load(path, environ={})


def block(beside: str | None) -> dict:
    return {
        "topic": "t", "failed_at": 12_000, "produced": 3, "replicated_before_failure": 3,
        "duplicates": {"count": 0, "sample": []}, "lost": {"count": 0, "sample": []},
        "redelivered": {"count": 0, "sample": []}, "acked_on_A": 2, "warnings": [],
        "sync_lag_at_failure_ms": None, "time_to_resume_on_B_s": 0.5,
        "exposure_before_failure": None, "beside_pulsar": beside,
    }  # fmt: skip


def test_the_report_names_the_target_beside_pulsar_and_not_the_embedded_one(tmp_path):
    assert target_label("full", block("4.0.7")) == "georep full beside Apache Pulsar 4.0.7"
    assert target_label("full", block(None)) == target_label("full") == "georep full"
    report = {
        "scenario": "s", "scenario_summary": "x", "fail": "kill", "messages": 3, "keys": 1,
        "target_on_A": 2, "at": 0.5, "settle_s": 3.0,
        "modes": {"pulsar": block(None), "full": block("4.0.7")},
    }  # fmt: skip
    page = render(report, {})
    assert "<h2>georep full beside Apache Pulsar 4.0.7</h2>" in page
    assert "<h2>Apache Pulsar (its own geo-replication)</h2>" in page
    text = main.summary(report, tmp_path)
    assert re.search(r"^  full beside Pulsar 4\.0\.7 +duplicates 0 +exposure n/a", text, re.M)
    assert re.search(r"^  pulsar +duplicates 0", text, re.M)


async def test_without_the_pulsar_tooling_the_drill_says_what_to_install(tmp_path, monkeypatch):
    import importlib.util

    from georep.drill.errors import DrillError
    from georep.drill.pulsar_topology import PulsarTopology

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *args: None if name == "pulsar_tools" else real(name, *args),
    )
    beside = BesidePulsarTopology(tmp_path, "shop/eu", {**main.SYNC_PERIODS, "mode": "full"})
    with pytest.raises(DrillError, match=r"--beside-pulsar .*pip install -e \./pulsar_tools"):
        await beside.start()
    with pytest.raises(DrillError, match=r"--mode pulsar .*pulsar_tools"):
        await PulsarTopology(tmp_path, "shop/eu").start()
    assert beside.standalones == {}
