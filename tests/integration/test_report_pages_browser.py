"""The drill page and the reconcile page, rendered by headless Chromium as a reader sees
them: at a wide and a narrow window, every target's column is there, the verdict's and the
table's figures are the report's, at 1400 px the three columns stand in one row with their
charts at one height, and no element sticks out of the page or out of its chart.

A probe script is added to a copy of each page (the pages themselves carry no script);
it measures the laid-out page and writes what it found into the DOM, which Chromium's
``--dump-dom`` returns. Chromium comes from Debian's packages (``.ci/run`` installs it);
without it the test is skipped, except in CI (``CI=true``), where that is a failure.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from georep.drill.delivery_log import AFTER, BEFORE, Delivery
from georep.drill.report_page import render as render_drill
from georep.spark_reconcile.report import render as render_reconcile

WIDTHS = (1400, 760)

_PROBE = """
<script>
(function () {
  const width = document.documentElement.clientWidth;
  const problems = [];
  const name = (el) => el.tagName.toLowerCase() + " "
      + (el.textContent || "").trim().slice(0, 40);
  for (const el of document.body.querySelectorAll("*")) {
    const box = el.getBoundingClientRect();
    if (box.width === 0 && box.height === 0) continue;
    // inside a box that scrolls or clips (a table's .scroll, a topic's one line): the
    // box itself is measured, not what it holds
    let clipped = false;
    for (let a = el.parentElement; a && a !== document.body; a = a.parentElement) {
      if (getComputedStyle(a).overflowX !== "visible") { clipped = true; break; }
    }
    if (!clipped && !el.closest("svg") && box.right > width + 1) {
      problems.push("past the page's right edge: " + name(el));
    }
    if (el.tagName.toLowerCase() === "text") {
      const svg = el.ownerSVGElement.getBoundingClientRect();
      if (box.left < svg.left - 1 || box.right > svg.right + 1 || box.top < svg.top - 1
          || box.bottom > svg.bottom + 1) {
        problems.push("outside its chart: " + name(el));
      }
    }
  }
  if (document.documentElement.scrollWidth > width + 1) {
    problems.push("the page scrolls sideways: " + document.documentElement.scrollWidth);
  }
  const targets = [...document.querySelectorAll("section.target")].map(
      (s) => [s.dataset.target, s.querySelector("svg") !== null]);
  const tops = [...document.querySelectorAll("section.target")].map((s) => [
      Math.round(s.getBoundingClientRect().top),
      Math.round(s.querySelector("svg").getBoundingClientRect().top)]);
  const charts = [
      ...document.querySelectorAll("section.target > svg:not(.lag):not(.backlog)")].map(
      (svg) => Math.round(svg.getBoundingClientRect().width));
  // each target's backlog panel: its figures, or the line saying there is none, and
  // where the failure falls on it and on the sync lag panel above it
  const backlogs = {};
  const failureAt = (svg) => svg === null ? null
      : Math.round(svg.querySelector("line.failure").getBoundingClientRect().left);
  for (const s of document.querySelectorAll("section.target")) {
    const svg = s.querySelector("svg.backlog");
    const note = s.querySelector("p.backlog");
    backlogs[s.dataset.target] = svg === null ? {note: note && note.textContent} : {
      peak: svg.querySelector("[data-key=peak]").textContent,
      last: svg.querySelector("[data-key=last]").textContent,
      failure: failureAt(svg), lagFailure: failureAt(s.querySelector("svg.lag")),
      width: Math.round(svg.getBoundingClientRect().width),
      top: Math.round(svg.getBoundingClientRect().top),
      chart: Math.round(s.querySelector("svg").getBoundingClientRect().width)};
  }
  const verdict = {};
  // the failover's verdict and figures; the failback's (ul.verdict.failback,
  // table.figures.failback) are read apart
  for (const li of document.querySelectorAll("ul.verdict:not(.failback) li")) {
    const entry = verdict[li.dataset.target] = {word: li.className};
    li.querySelectorAll("[data-key]").forEach((el) => {
      entry[el.dataset.key] = [el.textContent, el.className];
    });
  }
  const figures = {};
  const heads = [...document.querySelectorAll("table.figures:not(.failback) th.target")].map(
      (th) => th.dataset.target);
  for (const row of document.querySelectorAll("table.figures:not(.failback) tr")) {
    row.querySelectorAll("td[data-key]").forEach((td, i) => {
      (figures[heads[i]] = figures[heads[i]] || {})[td.dataset.key] = td.textContent;
    });
  }
  const out = document.createElement("pre");
  out.id = "probe";
  const risk = [...document.querySelectorAll("th[data-column$='_risk']")].map(
      (th) => Math.round(th.getBoundingClientRect().right));
  const tiles = [...document.querySelectorAll(".total[data-key]")].map(
      (t) => [t.dataset.key, getComputedStyle(t.querySelector(".value")).color]);
  out.textContent = JSON.stringify(
      {width, problems, targets, tops, charts, backlogs, verdict, figures, risk, tiles});
  document.body.appendChild(out);
})();
</script>
"""


def chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    if os.environ.get("CI") == "true":
        pytest.fail("Chromium is not installed (.ci/run installs Debian's chromium)")
    pytest.skip("Chromium is not installed: apt-get install chromium")


def probe(page: str, tmp_path: Path, width: int) -> dict:
    path = tmp_path / f"page-{width}.html"
    path.write_text(page.replace("</body>", _PROBE + "</body>"), encoding="utf-8")
    result = subprocess.run(
        [
            chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
            "--no-first-run", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", f"--user-data-dir={tmp_path / f'profile-{width}'}",
            "--hide-scrollbars", f"--window-size={width},1000", "--virtual-time-budget=5000",
            "--dump-dom", path.as_uri(),
        ],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    found = re.search(r'<pre id="probe">(.*?)</pre>', result.stdout, re.S)
    assert found, f"no probe output; chromium said: {result.stderr[-2000:]}"
    return json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))


def delivery(mode: str, index: int, phase: str, acked: bool, at_ms: int) -> Delivery:
    return Delivery(
        mode=mode, cluster="A" if phase == BEFORE else "B", phase=phase, consumer="c0",
        topic=f"persistent://public/default/drill-shared-out-of-order-{mode}-20261125"
        + ("-with-a-name-long-enough-to-wrap-in-its-column" if mode == "full" else ""),
        subscription="s", drill_id=f"m{index:06d}", index=index, key="k",
        message_id=f"3:{index}", origin_cluster="A", origin_position=f"3:{index}",
        batch_index=-1, delivered_at=at_ms, acked=acked,
    )  # fmt: skip


def backlog(n: int, scale: int) -> int:
    """A replication backlog that grows while A produces, then drains before the failure."""
    return max(0, (scale + 40) * min(n, 20 - n) // 10)


def drill_report() -> tuple[dict[str, Any], dict[str, list[Delivery]]]:
    """Three targets over 600 messages: A fails at 0 after 300 deliveries and a 3 s wait;
    B delivers the rest in 0.2 s; the first two targets redeliver acknowledged ones; the
    georep targets sampled their sync lag for 9 s before the failure, every target its
    replication backlog (none reported at first)."""
    failed_at = 1_000_000
    report: dict[str, Any] = {
        "scenario": "shared-out-of-order", "scenario_summary": "Shared, out of order",
        "fail": "kill", "messages": 600, "keys": 16, "target_on_A": 300, "at": 0.5,
        "settle_s": 3.0, "modes": {},
    }  # fmt: skip
    deliveries: dict[str, list[Delivery]] = {}
    for mode, duplicates in (("pulsar", 288), ("pulsar-compatible", 225), ("full", 0)):
        ds = [
            delivery(mode, i, BEFORE, i % 25 != 7, failed_at - 7_000 + i * 13) for i in range(300)
        ]
        again = list(range(duplicates)) + [i for i in range(300) if i % 25 == 7]
        ds += [
            delivery(mode, i, AFTER, True, failed_at + 30 + n * 180 // (len(again) + 300))
            for n, i in enumerate([*again, *range(300, 600)])
        ]
        deliveries[mode] = ds
        report["modes"][mode] = {
            "topic": ds[0].topic, "failed_at": failed_at, "produced": 600,
            "replicated_before_failure": 600, "not_replicated": 0, "delivered_on_A": 300,
            "acked_on_A": 288, "unacked_on_A": 12, "delivered_on_B": 300 + len(again),
            "duplicates": {"count": duplicates, "sample": [f"m{i:06d}" for i in range(20)]},
            "redelivered": {"count": 12, "sample": []}, "lost": {"count": 0, "sample": []},
            "sync_lag_at_failure_ms": None if mode == "pulsar" else 20.5,
            "time_to_resume_on_B_s": 0.03, "warnings": [],
            "sync_lag_samples_ms": [] if mode == "pulsar" else [
                [failed_at - 9_000 + 250 * n, None if n == 5 else 20.0 + n] for n in range(36)
            ],
            "replication_backlog_samples": [
                [failed_at - 9_000 + 250 * n, None if n < 2 else backlog(n, duplicates)]
                for n in range(36)
            ],
        }  # fmt: skip
    return report, deliveries


@pytest.mark.parametrize("width", WIDTHS)
def test_drill_page_shows_every_target_and_the_report_figures_without_overflow(tmp_path, width):
    report, deliveries = drill_report()
    found = probe(render_drill(report, deliveries), tmp_path, width)
    assert found["problems"] == []
    assert found["targets"] == [[mode, True] for mode in report["modes"]]
    for mode, block in report["modes"].items():
        shown = found["figures"][mode]
        for key in ("produced", "acked_on_A", "delivered_on_B"):
            assert shown[key] == str(block[key]), (mode, key)
        for key in ("duplicates", "lost"):
            count = block[key]["count"]
            assert shown[key].split("%")[0].startswith(str(count)), (mode, key, shown[key])
            text, css = found["verdict"][mode][key]
            assert text == f"{count} {key}" and css == ("bad" if count else "ok"), (mode, key)
        passed = block["duplicates"]["count"] == 0 and block["lost"]["count"] == 0
        assert found["verdict"][mode]["word"] == ("pass" if passed else "fail")
    for mode, block in report["modes"].items():  # the backlog panel shows the JSON's figures
        shown = found["backlogs"][mode]
        reported = [n for _, n in block["replication_backlog_samples"] if n is not None]
        assert (shown["peak"], shown["last"]) == (str(max(reported)), str(reported[-1])), mode
        assert shown["width"] == shown["chart"], "as wide as the target's chart"
        if mode != "pulsar":  # under the sync lag, on its time axis
            assert shown["failure"] == shown["lagFailure"], (mode, shown)
    if width >= 1400:  # three columns in one row, the charts' tops level
        assert len({top for top, _ in found["tops"]}) == 1, found["tops"]
        assert len({svg for _, svg in found["tops"]}) == 1, found["tops"]
        # the backlog panels too, Pulsar's (no sync lag above it) included
        assert len({shown["top"] for shown in found["backlogs"].values()}) == 1, found
    else:  # one column: each below the one before
        assert [top for top, _ in found["tops"]] == sorted({top for top, _ in found["tops"]})


@pytest.mark.parametrize("width", WIDTHS)
def test_a_failback_section_fits_and_leaves_the_failover_figures_alone(tmp_path, width):
    report, deliveries = drill_report()
    for n, block in enumerate(report["modes"].values()):
        block["failback"] = failback_block(twice=n * 40)
    page = render_drill(report, deliveries)
    found = probe(page, tmp_path, width)
    assert found["problems"] == []
    for mode, block in report["modes"].items():  # still the failover's, not the failback's
        assert found["figures"][mode]["acked_on_A"] == str(block["acked_on_A"])
        count = block["duplicates"]["count"]
        assert found["verdict"][mode]["duplicates"][0] == f"{count} duplicates"
    section = page[page.index('<h2 id="failback">') :]
    for n, mode in enumerate(report["modes"]):
        word = "fail" if n else "pass"
        assert f'<li class="{word}" data-target="{mode}" data-failback>' in section
        assert f'data-key="failback.twice">{n * 40} twice on A</span>' in section


def failback_block(twice: int) -> dict[str, Any]:
    counted = {"count": 0, "sample": []}
    return {
        "acked_on_A": 150, "acked_on_B": 80, "acked_before_return": 200,
        "expected_on_return": 100, "delivered_on_return": 100 + twice,
        "deliveries_on_return": 100 + twice, "delivered_twice_on_return": 0,
        "twice": {"count": twice, "sample": [], "acked_on_A": 0, "acked_on_B": twice},
        "redelivered": {"count": 90, "sample": []}, "first_delivered": {"count": 10, "sample": []},
        "lost": counted, "unknown_deliveries": 0, "sync_settled": True, "sync_settle_s": 2.5,
        "a_cursor_at_return": None, "sync_stats_at_return": None, "restored_at": 1,
        "time_to_resume_on_A_s": 2.6,
    }  # fmt: skip


@pytest.mark.parametrize("width", WIDTHS)
def test_a_single_target_page_draws_its_chart_at_a_column_s_size(tmp_path, width):
    report, deliveries = drill_report()
    report["modes"] = {"full": report["modes"]["full"]}
    found = probe(render_drill(report, deliveries), tmp_path, width)
    assert found["problems"] == []
    [chart] = found["charts"]
    assert chart <= 602, "capped (600 px and its border): not blown up to the page's width"
    (tmp_path / "three").mkdir()
    three = probe(render_drill(*drill_report()), tmp_path / "three", width)
    assert abs(chart - three["charts"][0]) <= 1, "the same size as on a page of three"


def test_a_target_without_replication_says_so_in_its_backlog_panel(tmp_path):
    report, deliveries = drill_report()
    samples = report["modes"]["full"]["replication_backlog_samples"]
    report["modes"]["full"]["replication_backlog_samples"] = [[at, None] for at, _ in samples]
    found = probe(render_drill(report, deliveries), tmp_path, 760)
    assert found["problems"] == []
    assert "A reported no replication to B" in found["backlogs"]["full"]["note"]
    pulsar = report["modes"]["pulsar"]["replication_backlog_samples"]
    assert found["backlogs"]["pulsar"]["peak"] == str(max(n for _, n in pulsar if n))


@pytest.mark.parametrize("width", WIDTHS)
def test_reconcile_page_lays_out_its_timelines_and_tables_without_overflow(tmp_path, width):
    first = 1_764_000_000_000
    series = {"published": [50] * 60, "redelivery_risk": [0] * 55 + [40] * 5}
    rows = [
        {"redelivery_risk": 40, "skip_risk": 0, "acked_on_origin": 300,
         "subscription": "s", "origin_cluster": "A", "replica_cluster": "B",
         "origin_mdp": f"3:{i}", "translated_mdp": f"7:{i}", "replica_mdp": "7:1",
         "topic": "persistent://public/default/" + "t" * 60, "partition": -1}
        for i in range(5)
    ]  # fmt: skip
    link = {
        "origin_cluster": "A", "replica_cluster": "B", "published": 3000, "replication_gap": 0,
        "duplicate_copies": 0, "acked_on_origin": 1500, "redelivery_risk": 200, "skip_risk": 0,
        "worst": {"topic": "persistent://public/default/t", "subscription": "s",
                  "origin_mdp": "3:4", "translated_mdp": "7:4", "replica_mdp": "7:1"},
    }  # fmt: skip
    page = render_reconcile(
        title="georep reconciliation of A, B, 2026-11-26 05:20 UTC",
        totals={"messages": 3000, "redelivery_risk": 200, "replication_gap": 0},
        tables=[("Subscriptions", "per subscription and link", rows, 200)],
        timelines={
            "persistent://public/default/t": {
                "first_ms": first,
                "last_ms": first + 59_000,
                "series": series,
            }
        },
        links=[link],
        inputs=["export-A", "export-B"],
        deliveries="deliveries.jsonl",
        failovers={"persistent://public/default/t": (first + 50_000, first + 62_000)},
    )
    found = probe(page, tmp_path, width)
    assert found["problems"] == []
    # the risk columns come first: in view at either width, whatever the topic's length
    assert found["risk"] and max(found["risk"]) <= width
    colours = dict(found["tiles"])
    assert colours["redelivery_risk"] != colours["replication_gap"]  # non-zero stands out
