"""The gateway's live page (georep/gateway/status_page.py) as a reader sees it: rendered
by Chromium at 1400 and 760 px from a gateway's manager with 10,000 topic partitions
behind it (200 namespaces of 50, replicating to B): the stuck namespaces first, a page
of ``limits.status_page_rows_max`` rows, the next pages linked, nothing wider than the
window, and the least needed column left out on the narrow one."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from georep import limits
from georep.gateway import status_page
from georep.gateway.manager import ReplicationManager
from tests.integration.test_report_pages_browser import chromium
from tests.unit.test_gateway_manager import FakeStore, endpoint
from tests.unit.test_gateway_metrics import unstarted

NAMESPACES, PARTITIONS = 200, 50

_PROBE = """
<script>
(() => {
  const rows = [...document.querySelectorAll("#rows tbody tr")];
  const wide = document.querySelector("#rows th.wide");
  const out = document.createElement("pre");
  out.id = "probe";
  out.textContent = JSON.stringify({
    overflow: document.documentElement.scrollWidth - window.innerWidth,
    rows: rows.length,
    first: [rows[0].className, rows[0].cells[0].textContent, rows[0].cells[3].textContent],
    kinds: rows.map((r) => r.className),
    wideShown: getComputedStyle(wide).display !== "none",
    pages: document.querySelector("#pages").textContent,
    next: [...document.querySelectorAll("#pages a")].map((a) => a.getAttribute("href")),
    state: document.querySelector("#state b").textContent,
    tableRight: Math.round(document.querySelector("#rows").getBoundingClientRect().right),
  });
  document.body.appendChild(out);
})();
</script>
"""


def probe(page: str, tmp_path: Path, width: int) -> dict[str, Any]:
    path = tmp_path / f"status-{width}.html"
    path.write_text(page.replace("</body>", _PROBE + "</body>"), encoding="utf-8")
    result = subprocess.run(
        [
            chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            f"--user-data-dir={tmp_path / f'profile-{width}'}", "--hide-scrollbars",
            f"--window-size={width},1000", "--virtual-time-budget=2000", "--dump-dom",
            path.as_uri(),
        ],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    found = re.search(r'<pre id="probe">(.*?)</pre>', result.stdout, re.S)
    assert found, f"no probe output; chromium said: {result.stderr[-2000:]}"
    return json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))


@pytest.fixture
async def manager():
    manager = ReplicationManager(
        local=endpoint("A"),
        remotes={"B": endpoint("B")},
        store=cast(Any, FakeStore()),
        stuck_after_s=60,
        clock=lambda: 10_000.0,
    )
    for n in range(NAMESPACES):
        namespace = f"tenant-{n % 7}/orders-region-{n:03d}-with-a-long-name"
        for p in range(PARTITIONS):
            topic = f"persistent://{namespace}/events-partition-{p}"
            replicator = unstarted(manager, topic, clock=lambda: 10_000.0)
            replicator.backlog_entries = p
            if n % 40 != 3:  # every 40th namespace is not connected
                replicator._consumer = cast(Any, SimpleNamespace(failure=None))
                replicator._producer = cast(Any, SimpleNamespace(failed=False))
            if n in (17, 181) and p == 1:  # stuck: entries wait since long ago
                replicator.progressed_at = 0.0
    manager.partitions_owned = manager.stats.topics = NAMESPACES * PARTITIONS
    yield manager
    await manager.stop()


def test_ten_thousand_partitions_read_worst_first_at_both_widths(manager, tmp_path) -> None:
    rows = status_page.rows(manager, now=10_000.0)
    assert len(rows) == NAMESPACES
    assert [r.stuck for r in rows[:2]] == [1, 1] and rows[2].stuck == 0
    assert sum(r.partitions for r in rows) == NAMESPACES * PARTITIONS
    problems = manager.problems()
    assert any("replication to B: 2 topic partitions moved nothing on" in p for p in problems)
    size = limits.status_page_rows_max
    pages = -(-NAMESPACES // size)

    def render(page: int) -> str:
        return status_page.render(
            cluster="A", instance="a1", partitions_owned=NAMESPACES * PARTITIONS,
            partitions_known=NAMESPACES * PARTITIONS, problems=problems, all_rows=rows,
            page=page,
        )  # fmt: skip

    for width in (1400, 760):
        seen = probe(render(1), tmp_path, width)
        assert seen["overflow"] <= 0 and seen["tableRight"] <= width, seen
        assert seen["rows"] == size and seen["state"] == "degraded"
        assert seen["first"][0] == "bad" and "1 stuck" in seen["first"][2], seen["first"]
        assert seen["kinds"][:2] == ["bad", "bad"]
        assert seen["kinds"][2:7] == ["warn"] * 5  # the 5 not connected, after the stuck
        assert seen["pages"].startswith(f"page 1 of {pages}") and seen["next"] == ["?page=2"]
        assert seen["wideShown"] is (width > 900)
    last = probe(render(pages + 3), tmp_path, 760)  # past the end: the last page
    assert f"page {pages} of {pages} (200 namespaces" in last["pages"]
    assert (
        last["next"] == [f"?page={pages - 1}"] and last["rows"] == NAMESPACES - (pages - 1) * size
    )
