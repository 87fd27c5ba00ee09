"""The HTML summary of a reconciliation: one self-contained page (inline CSS and SVG, no
script, nothing fetched), built from small aggregates the job collected. Its stylesheet,
head and axis ticks are the report toolkit's (``georep.reports``).

The page opens with what a reader came for: a title naming the clusters and the time of
the run, the inputs it read, then the **verdict** per link (origin → replica): *fail*
when the replica misses messages or stores some twice, *at risk* when a failover at
export time would deliver messages again (redelivery risk) or skip them (skip risk),
*pass* otherwise; each with its counts and their shares, and why (the subscription most
at risk: where the origin's mark-delete position lands on the replica against the
replica's own). Risk describes the cursors as exported, not a failover that happened; a
drill's delivery log (``--deliveries``) adds what did happen: the observed duplicates
and losses. The totals follow, problems first and coloured when non-zero, inventory
counts apart in grey.

Per topic, a timeline chart: the topic's publish times cut into
``limits.reconcile_timeline_buckets_max`` buckets; the upper panel shows messages
published per bucket, the lower one, on its own scale, the messages of each problem
series (replication gap, redelivery risk, observed duplicates and losses) by the publish
time of the message concerned. A failover shows as the gap and the risk bunching at the
right end of the timeline. With a delivery log, the failover is shaded on its topic's
timeline: from the last delivery before it to the first after it.

Both panels share one time axis with round ticks in seconds from the first publish
(``georep.reports.svg_axis``; the first and last publish times are printed under its ends), and
each panel has round count ticks. The SVG scales to the page's width, the totals wrap,
and wide tables scroll inside their own box rather than widen the page. Table columns
carry readable names (``COLUMN_LABELS``), the risk columns first, and a topic wraps
inside a column of bounded width instead of pushing the figures out of view.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from georep.domain.shares import percent, share
from georep.reports.html_page import document_head, escape
from georep.reports.svg_axis import nice_step, nice_ticks, tick_label, value_labels

SERIES_COLORS = {
    "replication_gap": "#d62728",
    "redelivery_risk": "#ff7f0e",
    "skip_risk": "#8c564b",
    "observed_duplicates": "#9467bd",
    "observed_losses": "#111111",
}
PUBLISHED = "published"
_FAILOVER_FILL = "#e2e8f0"

#: Totals that count something wrong (coloured when non-zero), in the order shown; the
#: others are inventory.
PROBLEM_TOTALS = (
    "replication_gap",
    "duplicate_copies",
    "observed_duplicates",
    "observed_losses",
    "redelivery_risk",
    "skip_risk",
    "batch_entries_differing",
    "unmapped_copies",
    "undecodable_copies",
)
#: What a column, a total or a series is called on the page (others: underscores as
#: spaces).
COLUMN_LABELS = {
    "origin_cluster": "origin",
    "replica_cluster": "replica",
    "origin_messages": "published on origin",
    "gap_messages": "missing on replica",
    "gap_first_publish_time": "first missing published at",
    "gap_last_publish_time": "last missing published at",
    "first_origin_position": "first missing (origin position)",
    "last_origin_position": "last missing (origin position)",
    "duplicate_copies": "stored twice",
    "unmapped_copies": "copies not compared",
    "undecodable_copies": "undecodable as written",
    "origin_mdp": "origin mark-delete",
    "translated_mdp": "origin mark-delete on replica",
    "replica_mdp": "replica mark-delete",
    "replica_subscription_present": "on replica",
    "acked_on_origin": "acked on origin",
    "copies_acked_on_replica": "acked on replica",
    "redelivery_risk": "redelivery risk",
    "skip_risk": "skip risk",
    "origin_position": "origin position",
    "replica_position": "replica position",
    "partly_on_origin": "partly acked on origin",
    "partly_on_replica": "partly acked on replica",
    "acked_on_origin_only": "indexes acked on origin only",
    "acked_on_replica_only": "indexes acked on replica only",
    "origin_ledger_id": "origin ledger",
    "origin_entry_id": "origin entry",
    "extra_deliveries": "extra deliveries",
    "first_publish_time": "first published at",
    "last_publish_time": "last published at",
    "replication_gap": "missing on a replica",
    "batch_entries_partly_acked": "batch entries partly acked",
    "batch_entries_differing": "batches acked differently",
    "observed_duplicates": "observed duplicates",
    "observed_losses": "observed losses",
    "observed_redeliveries": "observed redeliveries (expected)",
}
#: What risk means, said once under the verdict.
RISK_MEANING = (
    "Redelivery risk and skip risk describe the subscriptions' cursors as exported: what a "
    "failover to the replica at export time would deliver again (acknowledged on the "
    "origin, not on the replica) or skip (acknowledged on the replica, not on the "
    "origin). They are not a failover that happened; observed figures, from a drill's "
    "delivery log, are."
)


def label(name: str) -> str:
    return COLUMN_LABELS.get(name, name.replace("_", " "))


_WIDTH, _LEFT, _RIGHT = 900, 64, 170
_TOP_PANEL, _BOTTOM_PANEL, _GAP = 80, 120, 30


def render(
    *,
    title: str,
    totals: Mapping[str, Any],
    tables: Sequence[tuple[str, str, Sequence[Mapping[str, Any]], int]],
    timelines: Mapping[str, Mapping[str, Any]],
    links: Sequence[Mapping[str, Any]] = (),
    inputs: Sequence[str] = (),
    deliveries: str | None = None,
    drill_page: str | None = None,
    failovers: Mapping[str, tuple[int | None, int | None]] | None = None,
) -> str:
    """``tables``: (heading, explanation, rows, total rows); ``timelines``: topic ->
    {"first_ms", "last_ms", "series": {name: [count per bucket]}}; ``links``: per link
    pair, :func:`~georep.spark_reconcile.page_figures.link_totals`' row and, under
    ``"worst"``, its subscription most at risk (or None); ``failovers``: topic ->
    (last delivery before, first after) in epoch ms; ``drill_page``: a relative link to
    the drill's report.html."""
    failovers = failovers or {}
    parts = [
        document_head(title, _CSS),
        f"<h1>{escape(title)}</h1>",
        _inputs(inputs, deliveries, drill_page),
        _verdict(links, totals),
        f"<p class='meaning'>{escape(RISK_MEANING)}</p>",
        _totals(totals),
    ]
    if timelines:
        parts.append("<h2>Timeline per topic</h2>")
        parts.append(_legend(bool(failovers)))
        for topic, timeline in timelines.items():
            parts.append(f"<h3>{escape(topic)}</h3>")
            parts.append(timeline_svg(timeline, failovers.get(topic)))
    for heading, explanation, rows, total in tables:
        parts.append(_table(heading, explanation, rows, total))
    parts.append("</body></html>")
    return "\n".join(parts)


def _inputs(inputs: Sequence[str], deliveries: str | None, drill_page: str | None) -> str:
    if not inputs:
        return ""
    text = "Inputs: " + ", ".join(f"<code>{escape(i)}</code>" for i in inputs)
    if deliveries:
        text += f"; delivery log <code>{escape(deliveries)}</code>"
        if drill_page:
            text += f" (the drill's own page: <a href='{escape(drill_page)}'>report.html</a>)"
    text += (
        ". Every table is beside this page as Parquet (<code>TABLE/</code>) and the"
        " small ones as CSV (<code>csv/TABLE/</code>)."
    )
    return f"<p class='inputs'>{text}</p>"


def link_verdict(link: Mapping[str, Any]) -> tuple[str, str, str]:
    """(word, headline, why) of one link pair: ``fail`` (missing, doubled or undecodable
    copies), ``at risk`` (a failover at export time would redeliver or skip), ``pass``."""
    gap, doubled = int(link["replication_gap"] or 0), int(link["duplicate_copies"] or 0)
    garbled = int(link.get("undecodable_copies") or 0)
    redeliver, skip = int(link["redelivery_risk"] or 0), int(link["skip_risk"] or 0)
    published, acked = int(link["published"] or 0), int(link["acked_on_origin"] or 0)
    word = "fail" if gap or doubled or garbled else "at risk" if redeliver or skip else "pass"
    origin, replica = link["origin_cluster"], link["replica_cluster"]
    headline = (
        f"{origin} → {replica}: {gap:,} missing ({percent(share(gap, published))} of"
        f" {published:,} published), {doubled:,} stored twice; a failover to {replica} at"
        f" export time would deliver {redeliver:,} again"
        f" ({percent(share(redeliver, acked))} of {acked:,} acknowledged on {origin}) and"
        f" skip {skip:,}"
    )
    why = ""
    worst = link.get("worst")
    if worst and (redeliver or skip):
        why = (
            f"Most at risk: subscription {worst['subscription']} on {worst['topic']}:"
            f" {origin}'s mark-delete {worst['origin_mdp'] or 'none'} lands on {replica} at"
            f" {worst['translated_mdp'] or 'none'}; {replica}'s own is"
            f" {worst['replica_mdp'] or 'none (no such subscription there)'}."
        )
    elif not gap and not doubled and not garbled:
        why = f"Every message of {origin} is on {replica} once, and the cursors agree."
    if gap:
        why += f" {gap:,} messages of {origin} never reached {replica}."
    if garbled:
        why += (
            f" {garbled:,} copies on {replica} name a schema version that is not their"
            f" origin's schema there: undecodable as written (undecodable_copies)."
        )
    return word, headline, why.strip()


def _verdict(links: Sequence[Mapping[str, Any]], totals: Mapping[str, Any]) -> str:
    items = []
    for link in links:
        word, headline, why = link_verdict(link)
        css = word.replace(" ", "-")
        items.append(
            f"<li class='{css}' data-link='{escape(link['origin_cluster'])}:"
            f"{escape(link['replica_cluster'])}'><span class='word'>{escape(word)}</span> "
            f"{escape(headline)}<div class='why'>{escape(why)}</div></li>"
        )
    if "observed_duplicates" in totals:
        dup, lost = totals["observed_duplicates"], totals.get("observed_losses", 0)
        word = "fail" if dup or lost else "pass"
        published = totals.get("messages", 0)
        items.append(
            f"<li class='{word}' data-link='observed'><span class='word'>{word}</span> "
            f"observed in the delivery log: {dup:,} duplicates"
            f" ({percent(share(dup, published))} of {published:,} messages), {lost:,} lost,"
            f" {totals.get('observed_redeliveries', 0):,} redelivered (expected)."
            "<div class='why'>A duplicate was delivered again after an acknowledged"
            " delivery; a loss was neither acknowledged before the failover nor delivered"
            " after it.</div></li>"
        )
    if not items:
        return ""
    return "<ul class='verdict'>" + "".join(items) + "</ul>"


def _totals(totals: Mapping[str, Any]) -> str:
    problems = [k for k in PROBLEM_TOTALS if k in totals]
    inventory = [k for k in totals if k not in PROBLEM_TOTALS]

    def tile(key: str, css: str) -> str:
        return (
            f"<div class='total {css}' data-key='{escape(key)}'><div class='value'>"
            f"{escape(_format(totals[key]))}</div>"
            f"<div class='name'>{escape(label(key))}</div></div>"
        )

    bad = "".join(tile(k, "bad" if totals[k] else "ok") for k in problems)
    counted = "".join(tile(k, "inventory") for k in inventory)
    return (
        f"<h2>Problems</h2><div class='totals'>{bad}</div>"
        f"<h2>What was counted</h2><div class='totals small'>{counted}</div>"
    )


def _legend(failover: bool = False) -> str:
    items = [f"<span><i style='background:#bbb'></i>{PUBLISHED}</span>"]
    items += [
        f"<span><i style='background:{color}'></i>{escape(label(name))}</span>"
        for name, color in SERIES_COLORS.items()
    ]
    if failover:
        items.append(
            f"<span><i style='background:{_FAILOVER_FILL}'></i>failover (last delivery"
            " before it to the first after it)</span>"
        )
    return "<p class='legend'>" + " ".join(items) + "</p>"


def _table(heading: str, explanation: str, rows: Sequence[Mapping[str, Any]], total: int) -> str:
    out = [f"<h2>{escape(heading)}</h2>", f"<p>{escape(explanation)}</p>"]
    if not rows:
        out.append("<p class='none'>none</p>")
        return "\n".join(out)
    columns = list(rows[0].keys())
    out.append("<div class='scroll'><table><thead><tr>")
    out += [f"<th data-column='{escape(c)}'>{escape(label(c))}</th>" for c in columns]
    out.append("</tr></thead><tbody>")

    def cell(column: str, value: Any) -> str:
        css = " class='topic'" if column == "topic" else ""
        if column in PROBLEM_TOTALS and isinstance(value, int) and not isinstance(value, bool):
            css = " class='n bad'" if value else " class='n'"
        return f"<td{css}>{escape(_format(value))}</td>"

    for row in rows:
        out.append("<tr>" + "".join(cell(c, row[c]) for c in columns) + "</tr>")
    out.append("</tbody></table></div>")
    if total > len(rows):
        out.append(f"<p class='more'>The first {len(rows)} rows; the Parquet table (and its "
                   "CSV for the small tables) has them all.</p>")  # fmt: skip
    return "\n".join(out)


def timeline_svg(
    timeline: Mapping[str, Any], failover: tuple[int | None, int | None] | None = None
) -> str:
    """Two panels over one time axis: published per bucket (bars), problems per bucket
    (one polyline per series with any count, on a shared scale); ``failover`` (epoch
    ms: the last delivery before it, the first after it) shaded across both, the axis
    stretched to hold it when it came after the last publish."""
    series: Mapping[str, Sequence[int]] = timeline["series"]
    published = list(series.get(PUBLISHED, []))
    buckets = max((len(v) for v in series.values()), default=0) or 1
    plot_width = _WIDTH - _LEFT - _RIGHT
    first_ms, last_ms = timeline.get("first_ms"), timeline.get("last_ms")
    window = _window(failover, first_ms)
    end_ms = last_ms
    data_width = plot_width
    if window is not None and first_ms is not None and last_ms is not None:
        end_ms = max(last_ms, window[1])
        data_width = plot_width * (last_ms - first_ms + 1) / (end_ms - first_ms + 1)
    step = data_width / buckets
    height = _TOP_PANEL + _GAP + _BOTTOM_PANEL + 48
    out = [
        f"<svg xmlns='http://www.w3.org/2000/svg' class='timeline' "
        f"viewBox='0 0 {_WIDTH} {height}' role='img'>",
        f"<rect x='0' y='0' width='{_WIDTH}' height='{height}' fill='white'/>",
    ]
    if window is not None and first_ms is not None and end_ms is not None:
        span = end_ms - first_ms + 1
        left = _LEFT + (window[0] - first_ms) / span * plot_width
        right = max(_LEFT + (window[1] - first_ms) / span * plot_width, left + 2)
        middle = min(max((left + right) / 2, _LEFT + 30), _LEFT + plot_width - 30)
        axis = _TOP_PANEL + _GAP + _BOTTOM_PANEL
        out.append(
            f"<rect class='failover' x='{left:.1f}' y='0' width='{right - left:.1f}' "
            f"height='{axis}' fill='{_FAILOVER_FILL}'><title>failover: "
            f"{escape(_time(window[0]))} to {escape(_time(window[1]))}</title></rect>"
            f"<text x='{middle:.1f}' y='{_TOP_PANEL + _GAP - 8}' font-size='11' "
            "font-weight='600' text-anchor='middle'>failover</text>"
        )
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
                   f"<title>{escape(label(name))}: {sum(counts)}</title></polyline>")  # fmt: skip
        out.append(
            f"<text x='{_LEFT + plot_width + 8}' y='{legend_y + 12}' font-size='11' "
            f"fill='{color}'>{escape(label(name))}: {sum(counts)}</text>"
        )
        legend_y += 16
    if not problems:
        out.append(
            f"<text x='{_LEFT + 8}' y='{bottom_top + _BOTTOM_PANEL / 2}' font-size='12' "
            "fill='#2ca02c'>no gap, no risk, no duplicate, no loss</text>"
        )
    axis_y = bottom_top + _BOTTOM_PANEL
    out.append(_time_axis(first_ms, end_ms, axis_y, plot_width))
    out.append("</svg>")
    return "".join(out)


def _window(
    failover: tuple[int | None, int | None] | None, first_ms: int | None
) -> tuple[int, int] | None:
    """The failover as (start, end) ms, neither before the first publish; None if unknown."""
    if failover is None or first_ms is None:
        return None
    start, stop = failover
    start = start if start is not None else stop
    stop = stop if stop is not None else start
    if start is None or stop is None:
        return None
    start, stop = max(start, first_ms), max(stop, first_ms)
    return (min(start, stop), max(start, stop))


def _count_axis(top: float, bottom: float, maximum: int, name: str) -> str:
    """Round count ticks from 0 to ``maximum`` along a panel's left edge."""

    def y(count: float) -> float:
        return bottom - (bottom - top) * count / maximum

    middle = (top + bottom) / 2
    return value_labels(maximum, 3, _LEFT - 6, y, font_size=10) + (
        f"<text x='12' y='{middle:.1f}' font-size='10' text-anchor='middle' "
        f"transform='rotate(-90 12 {middle:.1f})'>{escape(name)}</text>"
    )


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
            f"{escape(tick_label(t, step))}</text>"
        )
    parts.append(
        f"<text x='{_LEFT + width / 2:.1f}' y='{y + 29}' font-size='11' text-anchor='middle'>"
        "seconds from the first publish</text>"
        f"<text x='{_LEFT}' y='{y + 43}' font-size='10' fill='#555'>"
        f"{escape(_time(first_ms))}</text>"
        f"<text x='{_LEFT + width}' y='{y + 43}' font-size='10' fill='#555' "
        f"text-anchor='end'>{escape(_time(last_ms))}</text>"
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


#: The page's own rules, after the report toolkit's (``georep.reports.html_page.CSS``:
#: verdict lines, figure colours, ``.scroll``): the totals as tiles, dense tables in a
#: monospace face, the timelines' legend.
_CSS = """
h2{margin-top:28px} h3{font-size:14px;font-family:monospace}
.totals{display:flex;flex-wrap:wrap;gap:10px}
.total{border:1px solid #e2e8f0;border-radius:6px;padding:8px 12px;min-width:120px}
.total .value{font-size:20px;font-weight:600} .total .name{font-size:12px;color:#4a5568}
.total.bad{border-color:#c53030;background:#fff5f5} .total.bad .value{color:#c53030}
.total.ok .value{color:#2f855a}
.totals.small .total{padding:4px 10px;min-width:90px;border-color:#edf2f7}
.totals.small .value{font-size:15px;color:#4a5568;font-weight:500}
table{border-collapse:collapse;font-size:12px} td,th{border:1px solid #e2e8f0;padding:3px 6px}
th{background:#f7fafc;text-align:left} td{font-family:monospace;white-space:nowrap}
td.topic{white-space:normal;word-break:break-all;min-width:12em;max-width:22em}
.legend span{margin-right:14px;font-size:12px;white-space:nowrap;display:inline-block}
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px}
svg.timeline{display:block;width:100%;max-width:1200px;height:auto}
.none{color:#2f855a} .more{color:#4a5568;font-size:12px}
.inputs,.meaning{color:#4a5568;font-size:13px;max-width:70em}
.verdict .word{margin-right:4px} .verdict .why{font-size:13px}
"""
