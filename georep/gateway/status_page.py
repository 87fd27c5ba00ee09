"""``GET /status``: a gateway's live page, one self-contained HTML page (inline CSS, no
script, no external resource) that reloads itself every ``limits.status_page_refresh_s``.

It answers "is anything stuck, and how far behind is each remote?" at a glance. Its
figures are the ones ``/metrics`` exports (``metrics.replication_figures``), per
namespace and remote:

- a line with the gateway's state: ``ok``, or ``degraded`` and every problem
  ``/health`` lists;
- the instance, and this instance's share of the cluster's topic partitions (several
  instances each serve their own page, for the partitions they run);
- one row per namespace and remote: the topic partitions replicated, how many are stuck
  (the watchdog's, with the longest stall) or not connected, the backlog, the oldest
  unreplicated entry's age, the messages a second going out, the sync lag of the
  subscription states applied here from that remote, and the exposure towards it (the
  messages a failover now would deliver again, with the oldest such acknowledgement's
  age: ``metrics.exposure_figures``). Worst first: stuck, then not connected, then the
  longest delay, then the largest exposure; ``limits.status_page_rows_max`` rows a page,
  ``?page=N`` for the others.

It reads well from 1400 px down to 760 px (tests/integration/test_status_page_browser.py
renders it in Chromium at both) and stays a page of rows however many partitions stand
behind it: a row is a namespace, not a partition. Its stylesheet is the report toolkit's
(``georep.reports``), with the page's own rules after it.
"""

from __future__ import annotations

import html
import time
from collections import Counter
from dataclasses import dataclass

from georep import limits
from georep.gateway.manager import ReplicationManager
from georep.gateway.metrics import FIGURE, exposure_figures, replication_figures
from georep.reports.html_page import document_head


@dataclass(frozen=True)
class Row:
    namespace: str
    remote: str
    partitions: int
    stuck: int
    not_connected: int
    stalled_s: float
    backlog: float | None
    delay_s: float | None
    rate_out: float
    sync_lag_ms: float | None
    exposure: int | None = None
    exposure_oldest_s: float | None = None

    @property
    def rank(self) -> tuple[bool, bool, float, int, str, str]:
        """Sorts the worst first (with ``reverse=True``): stuck, not connected, delay,
        exposure."""
        return (self.stuck > 0, self.not_connected > 0, self.delay_s or 0.0,
                self.exposure or 0, self.namespace, self.remote)  # fmt: skip


def rows(manager: ReplicationManager, now: float | None = None) -> list[Row]:
    """Every namespace and remote, worst first."""
    now = time.time() if now is None else now
    figures = replication_figures(manager, now)
    partitions = Counter(
        (remote, replicator.topic_name.namespace)
        for (_topic, remote), replicator in manager.replicators.items()
    )
    stuck = Counter(
        (remote, manager.replicators[topic, remote].topic_name.namespace)
        for topic, remote in manager.stalled()
    )
    lag: dict[tuple[str, str], float] = {}
    for sync in manager.syncs.values():
        for (_subscription, source), applied in sync.applied.items():
            if applied.sync_lag_ms is not None:
                key = (source, sync.topic_name.namespace)
                lag[key] = max(lag.get(key, 0.0), applied.sync_lag_ms)
    exposure = {
        (remote, namespace): f for (_, namespace, remote), f in exposure_figures(manager).items()
    }
    out = []
    for (_local, remote, namespace), values in figures.items():
        count = partitions[remote, namespace]
        connected = values[FIGURE["georep_replication_connected"]] or 0
        out.append(
            Row(
                namespace=namespace,
                remote=remote,
                partitions=count,
                stuck=stuck[remote, namespace],
                not_connected=count - int(connected),
                stalled_s=values[FIGURE["georep_replication_stalled_seconds"]] or 0.0,
                backlog=values[FIGURE["georep_replication_backlog"]],
                delay_s=values[FIGURE["georep_replication_delay_in_seconds"]],
                rate_out=values[FIGURE["georep_replication_rate_out"]] or 0.0,
                sync_lag_ms=lag.get((remote, namespace)),
                exposure=exposure.get((remote, namespace), (None, None))[0],
                exposure_oldest_s=exposure.get((remote, namespace), (None, None))[1],
            )
        )
    return sorted(out, key=lambda row: row.rank, reverse=True)


#: The page's own rules, after the report toolkit's (``georep.reports.html_page.CSS``): a
#: live page is denser than a report (smaller margins and title), and its rows colour
#: their background, not their figures.
_CSS = """
body { margin: 16px } h1 { font-size: 18px; margin: 0 0 4px }
p.meta { color: #4a5568; margin: 0 0 12px; }
.state { padding: 8px 12px; border-radius: 4px; margin-bottom: 12px; }
.state.ok { background: #f0fff4; } .state.degraded { background: #fff5f5; }
.state ul { margin: 4px 0 0; padding-left: 20px; }
table { border-collapse: collapse; width: 100%; table-layout: fixed; }
th, td { padding: 4px 6px; border-bottom: 1px solid #e2e8f0; text-align: right;
         overflow-wrap: anywhere; }
th:first-child, td:first-child, th:nth-child(2), td:nth-child(2),
th:nth-child(4), td:nth-child(4) { text-align: left; }
th:first-child { width: 26%; }
tr.bad td { background: #fff5f5; } tr.warn td { background: #fffaf0; }
nav { margin-top: 12px; }
@media (max-width: 900px) { .wide { display: none; } th:first-child { width: 34%; } }
"""

_COLUMNS = ("namespace", "remote", "partitions", "state", "backlog", "delay",
            "out msg/s", "sync lag", "exposure")  # fmt: skip
_WIDE = {"out msg/s"}  # left out below 900 px


def _state(row: Row) -> tuple[str, str]:
    if row.stuck:
        return "bad", f"{row.stuck} stuck ({row.stalled_s:.0f} s)"
    if row.not_connected:
        return "warn", f"{row.not_connected} not connected"
    return "", "moving"


def _exposure(row: Row) -> str:
    if row.exposure is None:
        return "-"
    if not row.exposure or row.exposure_oldest_s is None:
        return _number(row.exposure)
    return f"{_number(row.exposure)} ({_number(row.exposure_oldest_s, ' s')})"


def _number(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}{unit}" if value >= 10 or value == int(value) else f"{value:.1f}{unit}"


def render(
    *,
    cluster: str,
    instance: str,
    partitions_owned: int,
    partitions_known: int,
    problems: list[str],
    all_rows: list[Row],
    page: int,
) -> str:
    """One page of the status: ``page`` counts from 1 (past the last: the last)."""
    size = limits.status_page_rows_max
    pages = max(1, -(-len(all_rows) // size))
    page = min(max(1, page), pages)
    shown = all_rows[(page - 1) * size : page * size]
    state = "degraded" if problems else "ok"
    items = "".join(f"<li>{html.escape(p)}</li>" for p in problems)
    head = "".join(
        f"<th{' class=wide' if c in _WIDE else ''}>{html.escape(c)}</th>" for c in _COLUMNS
    )
    body = []
    for row in shown:
        kind, said = _state(row)
        cells = [
            html.escape(row.namespace),
            html.escape(row.remote),
            f"{row.partitions:,}",
            html.escape(said),
            _number(row.backlog),
            _number(row.delay_s, " s"),
            _number(row.rate_out),
            _number(row.sync_lag_ms, " ms"),
            _exposure(row),
        ]
        tds = "".join(
            f"<td{' class=wide' if c in _WIDE else ''}>{v}</td>"
            for c, v in zip(_COLUMNS, cells, strict=True)
        )
        body.append(f'<tr class="{kind}">{tds}</tr>' if kind else f"<tr>{tds}</tr>")
    if not body:
        body.append(f'<tr><td colspan="{len(_COLUMNS)}">nothing replicated yet</td></tr>')
    links = []
    if page > 1:
        links.append(f'<a href="?page={page - 1}">previous</a>')
    links.append(f"page {page} of {pages} ({len(all_rows):,} namespaces and remotes)")
    if page < pages:
        links.append(f'<a href="?page={page + 1}">next</a>')
    title = f"georep gateway {cluster}"
    return (
        document_head(title, _CSS, refresh_s=limits.status_page_refresh_s)
        + f"<h1>{html.escape(title)}</h1>"
        f'<p class="meta">instance {html.escape(instance)}: {partitions_owned:,} of'
        f" {partitions_known:,} topic partitions; refreshed every"
        f" {limits.status_page_refresh_s} s</p>"
        f'<div class="state {state}" id="state"><b>{state}</b>'
        f"{f'<ul>{items}</ul>' if items else ''}</div>"
        f'<table id="rows"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'
        f'<nav id="pages">{" · ".join(links)}</nav>'
        "</body></html>"
    )
