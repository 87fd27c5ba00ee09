"""The HTML summary of a reconciliation: one self-contained page (inline CSS and SVG, no
script, nothing fetched), built from small aggregates the job collected.

Per topic, a timeline chart: the topic's publish times cut into
``limits.reconcile_timeline_buckets_max`` buckets; the upper panel shows messages
published per bucket, the lower one, on its own scale, the messages of each problem
series (replication gap, redelivery risk, observed duplicates and losses) by the publish
time of the message concerned. A failover shows as the gap and the risk bunching at the
right end of the timeline.

Both panels share one time axis with round ticks in seconds from the first publish
(``georep.svg_axis``; the first and last publish times are printed under its ends), and
each panel has round count ticks. The SVG scales to the page's width, the totals wrap,
and wide tables scroll inside their own box rather than widen the page.
"""

from __future__ import annotations

import datetime as dt
import html
from collections.abc import Mapping, Sequence
from typing import Any

from georep.svg_axis import nice_step, nice_ticks, tick_label

SERIES_COLORS = {
    "replication_gap": "#d62728",
    "redelivery_risk": "#ff7f0e",
    "skip_risk": "#8c564b",
    "observed_duplicates": "#9467bd",
    "observed_losses": "#111111",
}
PUBLISHED = "published"

_WIDTH, _LEFT, _RIGHT = 900, 64, 170
_TOP_PANEL, _BOTTOM_PANEL, _GAP = 80, 120, 30


def render(
    *,
    title: str,
    totals: Mapping[str, Any],
    tables: Sequence[tuple[str, str, Sequence[Mapping[str, Any]], int]],
    timelines: Mapping[str, Mapping[str, Any]],
) -> str:
    """``tables``: (heading, explanation, rows, total rows); ``timelines``: topic ->
    {"first_ms", "last_ms", "series": {name: [count per bucket]}}."""
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        _totals(totals),
    ]
    if timelines:
        parts.append("<h2>Timeline per topic</h2>")
        parts.append(_legend())
        for topic, timeline in timelines.items():
            parts.append(f"<h3>{_e(topic)}</h3>")
            parts.append(timeline_svg(timeline))
    for heading, explanation, rows, total in tables:
        parts.append(_table(heading, explanation, rows, total))
    parts.append("</body></html>")
    return "\n".join(parts)


def _totals(totals: Mapping[str, Any]) -> str:
    cells = "".join(
        f"<div class='total'><div class='value'>{_e(_format(v))}</div>"
        f"<div class='name'>{_e(k.replace('_', ' '))}</div></div>"
        for k, v in totals.items()
    )
    return f"<div class='totals'>{cells}</div>"


def _legend() -> str:
    items = [f"<span><i style='background:#bbb'></i>{PUBLISHED}</span>"]
    items += [
        f"<span><i style='background:{color}'></i>{_e(name.replace('_', ' '))}</span>"
        for name, color in SERIES_COLORS.items()
    ]
    return "<p class='legend'>" + " ".join(items) + "</p>"


def _table(heading: str, explanation: str, rows: Sequence[Mapping[str, Any]], total: int) -> str:
    out = [f"<h2>{_e(heading)}</h2>", f"<p>{_e(explanation)}</p>"]
    if not rows:
        out.append("<p class='none'>none</p>")
        return "\n".join(out)
    columns = list(rows[0].keys())
    out.append("<div class='scroll'><table><thead><tr>")
    out += [f"<th>{_e(c)}</th>" for c in columns]
    out.append("</tr></thead><tbody>")
    for row in rows:
        out.append("<tr>" + "".join(f"<td>{_e(_format(row[c]))}</td>" for c in columns) + "</tr>")
    out.append("</tbody></table></div>")
    if total > len(rows):
        out.append(f"<p class='more'>The first {len(rows)} rows; the Parquet table has them "
                   "all.</p>")  # fmt: skip
    return "\n".join(out)


def timeline_svg(timeline: Mapping[str, Any]) -> str:
    """Two panels over one time axis: published per bucket (bars), problems per bucket
    (one polyline per series with any count, on a shared scale)."""
    series: Mapping[str, Sequence[int]] = timeline["series"]
    published = list(series.get(PUBLISHED, []))
    buckets = max((len(v) for v in series.values()), default=0) or 1
    plot_width = _WIDTH - _LEFT - _RIGHT
    step = plot_width / buckets
    height = _TOP_PANEL + _GAP + _BOTTOM_PANEL + 48
    out = [
        f"<svg xmlns='http://www.w3.org/2000/svg' class='timeline' "
        f"viewBox='0 0 {_WIDTH} {height}' role='img'>",
        f"<rect x='0' y='0' width='{_WIDTH}' height='{height}' fill='white'/>",
    ]
    top_max = max(published, default=0) or 1
    for i, count in enumerate(published):
        bar = _TOP_PANEL * count / top_max
        out.append(
            f"<rect x='{_LEFT + i * step:.1f}' y='{_TOP_PANEL - bar:.1f}' "
            f"width='{max(step - 1, 1):.1f}' height='{bar:.1f}' fill='#bbb'>"
            f"<title>{count} published</title></rect>"
        )
    out.append(_count_axis(0, _TOP_PANEL, top_max, "published"))
    problems = {k: list(v) for k, v in series.items() if k != PUBLISHED and any(v)}
    bottom_top = _TOP_PANEL + _GAP
    bottom_max = max((max(v) for v in problems.values()), default=0) or 1
    out.append(
        f"<line x1='{_LEFT}' y1='{bottom_top + _BOTTOM_PANEL}' x2='{_LEFT + plot_width}' "
        f"y2='{bottom_top + _BOTTOM_PANEL}' stroke='#888'/>"
    )
    out.append(_count_axis(bottom_top, bottom_top + _BOTTOM_PANEL, bottom_max, "messages"))
    legend_y = bottom_top
    for name, counts in problems.items():
        color = SERIES_COLORS.get(name, "#1f77b4")
        points = " ".join(
            f"{_LEFT + (i + 0.5) * step:.1f},"
            f"{bottom_top + _BOTTOM_PANEL - _BOTTOM_PANEL * c / bottom_max:.1f}"
            for i, c in enumerate(counts)
        )
        out.append(f"<polyline fill='none' stroke='{color}' stroke-width='2' points='{points}'>"
                   f"<title>{_e(name)}: {sum(counts)}</title></polyline>")  # fmt: skip
        out.append(
            f"<text x='{_LEFT + plot_width + 8}' y='{legend_y + 12}' font-size='11' "
            f"fill='{color}'>{_e(name.replace('_', ' '))}: {sum(counts)}</text>"
        )
        legend_y += 16
    if not problems:
        out.append(
            f"<text x='{_LEFT + 8}' y='{bottom_top + _BOTTOM_PANEL / 2}' font-size='12' "
            "fill='#2ca02c'>no gap, no risk, no duplicate, no loss</text>"
        )
    axis_y = bottom_top + _BOTTOM_PANEL
    out.append(_time_axis(timeline.get("first_ms"), timeline.get("last_ms"), axis_y, plot_width))
    out.append("</svg>")
    return "".join(out)


def _count_axis(top: float, bottom: float, maximum: int, name: str) -> str:
    """Round count ticks from 0 to ``maximum`` along a panel's left edge."""
    step = nice_step(maximum, 3)
    parts = [
        f"<text x='{_LEFT - 6}' y='{bottom - (bottom - top) * t / maximum + 4:.1f}' "
        f"font-size='10' text-anchor='end'>{_e(tick_label(t, step))}</text>"
        for t in nice_ticks(0, maximum, 3)
    ]
    middle = (top + bottom) / 2
    parts.append(
        f"<text x='12' y='{middle:.1f}' font-size='10' text-anchor='middle' "
        f"transform='rotate(-90 12 {middle:.1f})'>{_e(name)}</text>"
    )
    return "".join(parts)


def _time_axis(first_ms: int | None, last_ms: int | None, y: float, width: float) -> str:
    """Seconds from the first publish, round ticks; the ends' wall-clock times below."""
    if first_ms is None or last_ms is None:
        return ""
    span_s = max((last_ms - first_ms) / 1000.0, 1e-3)
    step = nice_step(span_s, 6)
    parts = []
    for t in nice_ticks(0, span_s, 6):
        x = _LEFT + t / span_s * width
        parts.append(
            f"<line x1='{x:.1f}' x2='{x:.1f}' y1='{y}' y2='{y + 4}' stroke='#888'/>"
            f"<text x='{x:.1f}' y='{y + 15}' font-size='10' text-anchor='middle'>"
            f"{_e(tick_label(t, step))}</text>"
        )
    parts.append(
        f"<text x='{_LEFT + width / 2:.1f}' y='{y + 29}' font-size='11' text-anchor='middle'>"
        "seconds from the first publish</text>"
        f"<text x='{_LEFT}' y='{y + 43}' font-size='10' fill='#555'>"
        f"{_e(_time(first_ms))}</text>"
        f"<text x='{_LEFT + width}' y='{y + 43}' font-size='10' fill='#555' "
        f"text-anchor='end'>{_e(_time(last_ms))}</text>"
    )
    return "".join(parts)


def _time(ms: int | None) -> str:
    if ms is None:
        return ""
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _format(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:24px;color:#222}
h1{font-size:22px} h2{font-size:17px;margin-top:28px} h3{font-size:14px;font-family:monospace}
.totals{display:flex;flex-wrap:wrap;gap:10px}
.total{border:1px solid #ddd;border-radius:6px;padding:8px 12px;min-width:120px}
.total .value{font-size:20px;font-weight:600} .total .name{font-size:12px;color:#555}
table{border-collapse:collapse;font-size:12px} td,th{border:1px solid #ddd;padding:3px 6px}
th{background:#f4f4f4;text-align:left} td{font-family:monospace;white-space:nowrap}
.legend span{margin-right:14px;font-size:12px;white-space:nowrap}
svg.timeline{display:block;width:100%;max-width:1200px;height:auto}
.scroll{overflow-x:auto;max-width:100%}
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px}
.none{color:#2ca02c} .more{color:#555;font-size:12px}
"""
