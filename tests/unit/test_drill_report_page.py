"""report.html: self-contained (no script, no external resource), escaped, the verdict
first, targets in one order, duplicates marked in the chart over everything else; the
verdict's words and shares; the progress bar on a terminal and elsewhere."""

from __future__ import annotations

import dataclasses
import io
import re

import pytest

from georep.domain.shares import percent
from georep.drill.delivery_log import AFTER, BEFORE, Delivery
from georep.drill.main import keep_start_failures
from georep.drill.progress import Progress
from georep.drill.report_charts import _Panel, classify_points, outcomes
from georep.drill.report_page import render
from georep.drill.topology import StartFailure
from georep.drill.traffic import DeliveryCounter
from georep.drill.verdict import verdict


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
    duplicates = re.findall(r'<td class="n (bad|ok)" data-key="duplicates">(\d+)', page)
    assert duplicates == [("bad", "1"), ("bad", "1"), ("ok", "0")]


def test_targets_keep_one_order_whatever_order_they_ran_in():
    report, deliveries = three_target_report()
    report["modes"] = {m: report["modes"][m] for m in ("full", "pulsar-compatible")}
    page = render(report, deliveries)
    assert re.findall(r'<section class="target" data-target="([^"]+)"', page) == [
        "pulsar-compatible",
        "full",
    ]
    assert re.findall(r'<li class="(?:pass|fail)" data-target="([^"]+)"', page) == [
        "pulsar-compatible",
        "full",
    ]


def test_the_verdict_comes_first_coloured_and_says_why():
    report, deliveries = three_target_report()
    for block in report["modes"].values():
        block.update(acked_on_A=1, replicated_before_failure=3)
    page = render(report, deliveries)
    assert page.index('<ul class="verdict">') < page.index('<table class="figures">')
    lines = re.findall(r'<li class="(pass|fail)" data-target="([^"]+)">(.*?)</li>', page)
    assert [(word, target) for word, target, _ in lines] == [
        ("fail", "pulsar"),
        ("fail", "pulsar-compatible"),
        ("pass", "full"),
    ]
    pulsar = lines[0][2]
    assert '<span class="bad" data-key="duplicates">1 duplicates</span> (100% of 1' in pulsar
    assert '<span class="ok" data-key="lost">0 lost</span> (0% of 3 replicated)' in pulsar
    assert "Every message acknowledged on A came again on B" in pulsar
    assert page.index("what went wrong") < page.index("what was counted")
    assert "georep reconcile --input" in page and "--deliveries deliveries.jsonl" in page


def test_undecodable_on_b_has_its_row_only_when_a_target_measured_it():
    report, deliveries = three_target_report()
    assert 'data-key="undecodable_on_B"' not in render(report, deliveries)
    undecodable = {"count": 3, "sample": [], "by_version": {"1": 3}, "reasons": []}
    report["modes"]["pulsar"]["undecodable_on_B"] = undecodable
    report["modes"]["full"]["undecodable_on_B"] = {**undecodable, "count": 0, "by_version": {}}
    page = render(report, deliveries)
    (row,) = re.findall(r"<tr[^>]*><td>undecodable on B.*?</tr>", page)
    cells = re.findall(r'<td class="n ?([a-z ]*)"(?: data-key="[^"]+")?>([^<]+)<', row)
    assert cells == [("bad", "3"), ("note", "n/a"), ("ok", "0")]  # pulsar, compatible, full
    assert "3 messages delivered on B could not be decoded" in page


def test_duplicates_are_drawn_after_redeliveries_on_one_time_scale():
    report, deliveries = three_target_report()
    later = [
        dataclasses.replace(d, delivered_at=d.delivered_at + 900) if d.phase == AFTER else d
        for d in deliveries["full"]
    ]
    deliveries = {**deliveries, "full": later}
    page = render(report, deliveries)
    for section in re.findall(r'<section class="target".*?</section>', page, re.S):
        assert section.rindex("<title>redelivered m") < section.index("<title>duplicate m")

    # every target's panels span the longest drain: the same ticks in every column, and
    # not those of the shorter drains drawn alone
    def ticks(page: str) -> list[list[str]]:
        return [
            re.findall(r'<text x="([\d.]+)"[^>]*text-anchor="middle">([-\d.]+)</text>', section)
            for section in re.findall(r'<section class="target".*?</section>', page, re.S)
        ]

    shared = ticks(page)
    assert shared[0] == shared[1] == shared[2]
    report["modes"] = {"pulsar": report["modes"]["pulsar"]}
    assert ticks(render(report, deliveries))[0] != shared[0]


@pytest.mark.parametrize(
    ("block", "passed", "headline", "why"),
    [
        (
            {"duplicates": {"count": 225, "ack_not_on_A_cursor": 0}, "acked_on_A": 288,
             "lost": {"count": 0}, "replicated_before_failure": 600,
             "a_cursor_at_failure": {"markDeletePosition": "1:150", "ranges": 5},
             "sync_stats_at_failure": {"B": {"applied": {"A": {
                 "lastMarkDelete": "1:68", "ranges": 0, "syncLagMs": 900.4}}}}},
            False,
            "fail: 225 duplicates (78% of 288 acknowledged on A), 0 lost (0% of 600 replicated)",
            "A's cursor at the failure: mark-delete 1:150 and 5 acknowledged ranges above it."
            " B had applied from A: mark-delete 1:68 and 0 acknowledged ranges (sync lag"
            " 900 ms). 225 of the 288 messages acknowledged on A came again on B: B's"
            " subscription lacked those acknowledgements.",
        ),
        (
            {"duplicates": {"count": 0}, "acked_on_A": 288, "lost": {"count": 2},
             "replicated_before_failure": 600, "sync_stats_at_failure": {"A": {}}},
            False,
            "fail: 0 duplicates (0% of 288 acknowledged on A), 2 lost (0.3% of 600 replicated)",
            "B's gateway had applied nothing from A. Every acknowledgement made on A was in"
            " place on B. 2 replicated messages were neither acknowledged on A nor delivered"
            " on B.",
        ),
        (
            {"duplicates": {"count": 0}, "acked_on_A": 0, "lost": {"count": 0},
             "replicated_before_failure": 0, "not_replicated": {"count": 4}},
            True,
            "pass: 0 duplicates (n/a of 0 acknowledged on A), 0 lost (n/a of 0 replicated)",
            "4 had not reached B when A failed (not counted as lost).",
        ),
    ],
)  # fmt: skip
def test_a_verdict_in_words(block, passed, headline, why):
    found = verdict("pulsar-compatible", block)
    assert found.passed is passed
    assert found.headline() == headline
    assert " ".join(found.why) == why


def test_a_share_is_never_rounded_to_zero():
    assert [percent(x) for x in (None, 0, 0.0004, 0.0033, 0.78, 1.0)] == [
        "n/a", "0%", "<0.1%", "0.3%", "78%", "100%",
    ]  # fmt: skip


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
    # beside the bar: every delivery, and the distinct others (acked on A, again on B)
    assert counter.deliveries == 6 and counter.unwanted_delivered == 1


def test_the_drain_bar_shows_what_else_came(tmp_path):
    stream = Terminal()
    progress = Progress(stream)
    progress.phase("full: drain on B", 4)
    progress.update(4, "600 delivered, 296 acked on A came again")
    progress.close()
    assert "4/4  600 delivered, 296 acked on A came again  " in stream.getvalue()


def test_a_failed_start_attempt_becomes_a_warning_with_its_logs_kept(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    log = data / "cluster-A.log"
    log.write_text("address already in use\n")
    failure = StartFailure(1, f"['cluster', 'A'] did not start: exited with 1; see {log}", (log,))
    out = tmp_path / "out"
    [warning] = keep_start_failures([failure], out, "full")
    kept = out / "start-full-attempt-1" / "cluster-A.log"
    assert kept.read_text() == "address already in use\n"
    assert str(log) not in warning and f"see {kept}" in warning
    assert warning.startswith("start attempt 1 failed and was retried on fresh ports")


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


def test_a_panel_just_short_of_a_round_step_still_has_ticks_to_read():
    # 0.9 s from -3.97 s at one tick per 50 px would give -3.5 alone
    labels = re.findall(r'middle">([-\d.]+)<', "".join(_Panel(-3.97, -3.07, 44, 200).ticks()))
    assert labels == ["-3.8", "-3.6", "-3.4", "-3.2"]


def test_the_sync_lag_timeline_shares_its_scales_and_breaks_where_none_was_reported():
    report, deliveries = three_target_report()
    report["modes"]["pulsar-compatible"]["sync_lag_samples_ms"] = [
        [9_000, 400.0], [9_500, 800.0], [10_000, None], [10_500, 20.0], [11_000, 30.0],
    ]  # fmt: skip
    report["modes"]["full"]["sync_lag_samples_ms"] = [[11_000, 20.0], [11_500, 25.0]]
    report["modes"]["pulsar-compatible"]["time_to_resume_on_B_s"] = 0.5
    page = render(report, deliveries)
    lags = re.findall(r'<section class="target" data-target="([^"]+)">.*?</section>', page, re.S)
    sections = dict(zip(lags, re.findall(r"<section .*?</section>", page, re.S), strict=True))
    assert 'class="lag"' not in sections["pulsar"]  # no gateways, no samples
    compatible = sections["pulsar-compatible"]
    assert compatible.count("<polyline") == 2, "one line per run of reported values"
    assert "<title>fault window: 0.5 s from the failure to the first delivery on B" in compatible
    # one scale: the same tick labels on both lag charts, from the earliest sample
    lag_ticks = [
        re.findall(r'<svg class="lag".*?</svg>', sections[m], re.S)[0]
        for m in ("pulsar-compatible", "full")
    ]
    labels = [re.findall(r">(-?[\d.]+)</text>", svg) for svg in lag_ticks]
    assert labels[0] == labels[1] and "-3" in labels[0] and "800" not in labels[0]


def sections_of(page: str) -> dict[str, str]:
    return dict(
        re.findall(r'<section class="target" data-target="([^"]+)">(.*?)</section>', page, re.S)
    )


def test_the_replication_backlog_timeline_shares_the_lag_s_time_axis_and_says_when_none():
    report, deliveries = three_target_report()
    modes = report["modes"]
    modes["pulsar"]["replication_backlog_samples"] = [[9_000, 0], [10_000, 1500], [11_000, 900]]
    modes["pulsar-compatible"]["sync_lag_samples_ms"] = [[10_000, 40.0], [11_000, 30.0]]
    modes["pulsar-compatible"]["replication_backlog_samples"] = [
        [10_000, None], [10_500, 300], [11_000, None], [11_500, 0],
    ]  # fmt: skip
    modes["pulsar-compatible"]["time_to_resume_on_B_s"] = 0.5
    modes["full"]["sync_lag_samples_ms"] = [[10_000, 40.0], [11_000, 30.0]]
    modes["full"]["replication_backlog_samples"] = [[10_000, None], [11_000, None]]
    sections = sections_of(render(report, deliveries))

    pulsar = sections["pulsar"]  # no sync lag, but its own replicator's backlog
    assert 'class="lag"' not in pulsar and pulsar.count('<svg class="backlog"') == 1
    # in the lag's place a panel of its height says so: the backlogs start level
    assert pulsar.index('<svg class="nolag"') < pulsar.index('<svg class="backlog"')
    assert "no gateway syncs this target" in pulsar
    assert '<tspan data-key="peak">1500</tspan>' in pulsar
    assert '<tspan data-key="last">900</tspan>' in pulsar
    compatible = sections["pulsar-compatible"]
    assert compatible.index('<svg class="lag"') < compatible.index('<svg class="backlog"')
    backlog = re.findall(r'<svg class="backlog".*?</svg>', compatible, re.S)[0]
    lag = re.findall(r'<svg class="lag".*?</svg>', compatible, re.S)[0]
    assert '<tspan data-key="peak">300</tspan>' in backlog  # the page's peak is Pulsar's
    assert '<tspan data-key="last">0</tspan>' in backlog
    assert backlog.count("<circle") == 2, "a lone reported value between gaps is a dot"
    assert "<title>fault window: 0.5 s from the failure" in backlog
    # one time axis: the same ticks and the failure at the same x as the lag above it
    time_ticks = r'text-anchor="middle">(-?[\d.]+)</text>'
    assert re.findall(time_ticks, backlog) == re.findall(time_ticks, lag) != []
    failure = r'<line class="failure" x1="([\d.]+)"'
    assert re.findall(failure, backlog) == re.findall(failure, lag)
    # one backlog axis for the page, its ticks in thousands
    assert re.findall(r'text-anchor="end">([\d.]+k?)</text>', backlog) == ["0", "1k"]
    # nothing reported: a line that says so, no empty chart
    full = sections["full"]
    assert '<p class="note backlog">' in full and '<svg class="backlog"' not in full
    assert "A reported no replication to B while the drill sampled" in full


def test_a_report_without_the_backlog_series_draws_no_backlog_panel():
    report, deliveries = three_target_report()
    report["modes"]["full"]["sync_lag_samples_ms"] = [[11_000, 20.0], [11_500, 25.0]]
    page = render(report, deliveries)
    assert 'class="lag"' in page and 'class="backlog"' not in page
