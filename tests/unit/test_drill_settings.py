"""``georep drill`` flags: defaults, refusals (exit 2, naming the flag), running clusters."""

from __future__ import annotations

import argparse
import re

import pytest

from georep.drill import main
from georep.drill.errors import DrillUsageError
from georep.drill.settings import MODES, settings_from_args

RUNNING = [
    "--a-service-url", "pulsar://127.0.0.1:6650",
    "--a-admin-url", "http://127.0.0.1:8080",
    "--a-gateway-url", "http://127.0.0.1:8090",
    "--b-service-url", "pulsar://127.0.0.1:6651",
    "--b-admin-url", "http://127.0.0.1:8081",
    "--b-gateway-url", "http://127.0.0.1:8091",
]  # fmt: skip


def parse(*flags: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="georep drill")
    main.configure(parser)
    return parser.parse_args(list(flags))


def test_defaults():
    settings = settings_from_args(parse())
    assert settings.scenario == "shared-out-of-order"
    assert (settings.messages, settings.at, settings.fail) == (2000, 0.5, "kill")
    assert settings.modes == ("full",) and settings.managed
    assert settings.target_on_a == 1000
    assert settings_from_args(parse("--mode", "both")).modes == MODES
    assert settings_from_args(parse("--messages", "7", "--at", "0.1")).target_on_a == 1


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--scenario", "nope"], "--scenario 'nope'"),
        (["--messages", "0"], "--messages 0"),
        (["--keys", "0"], "--keys 0"),
        (["--at", "0"], "--at 0.0"),
        (["--at", "1.5"], "--at 1.5"),
        (["--at", "nan"], "--at nan"),
        (["--settle", "-1"], "--settle -1.0"),
        (["--fail", "explode"], "--fail 'explode'"),
        (["--mode", "fast"], "--mode 'fast'"),
        (["--namespace", "nope"], "--namespace 'nope'"),
        (["--a-service-url", "pulsar://x:1"], "--a-admin-url"),
        ([*RUNNING], "--fail kill needs clusters the drill stands up"),
        ([*RUNNING[:4], *RUNNING[6:10], "--fail", "cut-link"], "needs --a-gateway-url"),
        ([*RUNNING, "--fail", "cut-link", "--mode", "both"], "--mode both needs"),
        ([*RUNNING, "--fail", "cut-link", "--mode", "all"], "--mode all needs"),
        ([*RUNNING, "--fail", "cut-link", "--mode", "pulsar"], "--mode pulsar needs"),
        ([*RUNNING, "--fail", "cut-link", "--data", "x"], "--data is for"),
        (["--a-service-url", "http://x", *RUNNING[2:], "--fail", "cut-link"], "must start with"),
    ],
)
def test_bad_flags_are_refused_with_exit_2(flags, message, capsys):
    with pytest.raises(DrillUsageError, match=re.escape(message)):
        settings_from_args(parse(*flags))
    assert main.run(parse(*flags)) == 2
    assert message in capsys.readouterr().err


def test_unparsable_numbers_exit_2():
    with pytest.raises(SystemExit) as exit_info:
        parse("--messages", "many")
    assert exit_info.value.code == 2


def test_running_clusters_with_cut_link():
    settings = settings_from_args(
        parse(*RUNNING, "--fail", "cut-link", "--mode", "pulsar-compatible")
    )
    assert not settings.managed and settings.running is not None
    assert settings.running["B"].gateway_url == "http://127.0.0.1:8091"
    assert settings.modes == ("pulsar-compatible",)


def test_mode_all_runs_real_pulsar_beside_both_georep_modes_in_page_order():
    assert settings_from_args(parse("--mode", "all")).modes == (
        "pulsar",
        "pulsar-compatible",
        "full",
    )
    assert settings_from_args(parse("--mode", "pulsar")).modes == ("pulsar",)
