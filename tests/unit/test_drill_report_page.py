"""report.html: self-contained (no script, no external resource), escaped, duplicates
marked in the chart; the progress bar on a terminal and elsewhere."""

from __future__ import annotations

import io
import re

from georep.drill.delivery_log import AFTER, BEFORE, Delivery
from georep.drill.progress import Progress
from georep.drill.report_page import classify_points, outcomes, render
from georep.drill.traffic import DeliveryCounter


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
    assert page.count("<title>redelivered m000000</title>") == 1
    assert "A fails</text>" in page
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)  # no external resources


def three_target_report() -> tuple[dict, dict]:
    deliveries = [delivery(0, BEFORE, False), delivery(1, BEFORE, True)]
    deliveries += [delivery(i, AFTER, False) for i in (0, 1, 2)]
    block = {
        "topic": "t", "failed_at": 12_000, "duplicates": {"count": 1, "sample": ["m000001"]},
        "lost": {"count": 0, "sample": []}, "warnings": [], "produced": 3,
    }  # fmt: skip
    modes = {"pulsar": dict(block), "pulsar-compatible": dict(block), "full": dict(block)}
    modes["full"]["duplicates"] = {"count": 0, "sample": []}
    report = {
        "scenario": "s", "scenario_summary": "x", "fail": "kill", "messages": 3, "keys": 1,
        "target_on_A": 2, "at": 0.5, "settle_s": 3.0, "modes": modes,
    }  # fmt: skip
    return report, {mode: deliveries for mode in modes}


def test_every_target_has_its_column_in_run_order_with_its_own_figures():
    report, deliveries = three_target_report()
    page = render(report, deliveries)
    assert re.findall(r'<section class="target" data-target="([^"]+)"', page) == [
        "pulsar",
        "pulsar-compatible",
        "full",
    ]
    assert "Apache Pulsar (its own geo-replication)" in page and "georep full" in page
    duplicates = re.findall(r'<td class="n (?:bad|ok)" data-key="duplicates">(\d+)</td>', page)
    assert duplicates == ["1", "1", "0"]


def test_each_message_has_one_outcome_the_worst_it_met():
    d = [delivery(0, BEFORE, True), delivery(1, BEFORE, False), delivery(2, BEFORE, True)]
    d += [delivery(0, AFTER, False), delivery(1, AFTER, False), delivery(3, AFTER, False)]
    kinds = [kind for _, kind in classify_points(d)]
    assert kinds == ["a_acked", "a_unacked", "a_acked", "duplicate", "redelivered", "b"]
    assert outcomes(classify_points(d), 5) == [
        "duplicate",
        "redelivered",
        "done_on_a",
        "b",
        "never",
    ]


def test_the_drain_counts_wanted_messages_once_and_not_duplicates():
    counter = DeliveryCounter()
    counter.add(delivery(0, AFTER, False))  # before the wanted set is known
    counter.want(frozenset({"3:0", "3:2"}))
    assert counter.wanted_delivered == 1
    for index in (0, 1, 1, 2, 2):  # 0 again, 1 unwanted (a duplicate), 2 twice
        counter.add(delivery(index, AFTER, False))
    assert counter.wanted_delivered == 2 and counter.distinct == 3


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_redraws_one_line_on_a_terminal():
    stream = Terminal()
    progress = Progress(stream)
    progress.phase("full: consume on A", 10)
    progress.update(5)
    progress.close()
    text = stream.getvalue()
    assert "\r\x1b[2K" in text and "[############............]  5/10" in text
    assert text.endswith("\n") and text.count("\n") == 1


def test_progress_prints_phase_lines_elsewhere_and_nothing_when_disabled():
    stream = io.StringIO()
    progress = Progress(stream)
    progress.phase("full: settle 3 s")
    progress.phase("full: drain on B", 4)
    progress.update(4)
    progress.close()
    lines = stream.getvalue().splitlines()
    assert lines[0] == "full: settle 3 s ..." and lines[2] == "full: drain on B ..."
    assert "\r" not in stream.getvalue() and lines[-1].startswith("full: drain on B  [####")
    quiet = io.StringIO()
    Progress(quiet, enabled=False).phase("x", 1)
    assert quiet.getvalue() == ""
