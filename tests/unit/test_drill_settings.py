"""``georep drill`` flags: defaults, refusals (exit 2, naming the flag), running clusters;
the report page is self-contained."""

from __future__ import annotations

import argparse
import re

import pytest

from georep.drill import main
from georep.drill.delivery_log import AFTER, BEFORE, Delivery
from georep.drill.errors import DrillUsageError
from georep.drill.report_page import render
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
    assert not settings.managed
    assert settings.running["B"].gateway_url == "http://127.0.0.1:8091"
    assert settings.modes == ("pulsar-compatible",)


def delivery(index: int, phase: str, acked: bool) -> Delivery:
    return Delivery(
        mode="full",
        cluster="A" if phase == BEFORE else "B",
        phase=phase,
        consumer="c0",
        topic="persistent://public/default/<t>",
        subscription="s",
        drill_id=f"m{index:06d}",
        index=index,
        key="k",
        message_id=f"3:{index}",
        origin_cluster="A",
        origin_position=f"3:{index}",
        batch_index=-1,
        delivered_at=10_000 + 10 * index + (5_000 if phase == AFTER else 0),
        acked=acked,
    )


def test_the_page_is_self_contained_and_marks_duplicates():
    block = {
        "topic": "persistent://public/default/<t>",
        "failed_at": 12_000,
        "duplicates": {"count": 1, "sample": ["m000001"]},
        "lost": {"count": 0, "sample": []},
        "warnings": ["<script>"],
        "produced": 3,
        "sync_lag_at_failure_ms": None,
    }
    report = {
        "scenario": "shared-out-of-order",
        "scenario_summary": "x",
        "fail": "kill",
        "messages": 3,
        "keys": 1,
        "target_on_A": 2,
        "at": 0.5,
        "settle_s": 3.0,
        "modes": {"full": block},
    }
    deliveries = [delivery(0, BEFORE, False), delivery(1, BEFORE, True)]
    deliveries += [delivery(0, AFTER, False), delivery(1, AFTER, False), delivery(2, AFTER, False)]
    page = render(report, {"full": deliveries})
    assert "<svg" in page and "<script>" not in page and "&lt;script&gt;" in page
    assert "&lt;t&gt;" in page
    assert page.count("<title>duplicate m000001</title>") == 1
    assert page.count("<circle") >= len(deliveries)
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)  # no external resources
