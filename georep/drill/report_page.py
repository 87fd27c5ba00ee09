"""``report.html``: the drill's report as one self-contained page (inline CSS and SVG, no
script, no external resource), built to answer "what did the failover cost, and why?"
without scrolling.

The page, top to bottom:

- the **verdict**, one line per target (``georep.drill.verdict``): pass or fail,
  duplicates and losses as counts and as shares, and why (A's cursor at the failure
  against what B had applied from A);
- a table of every target's figures side by side: the problems first (non-zero ones in
  colour), the inventory counts below them, apart;
- one column per target with its chart, what it found twice or lost, and its warnings:
  three columns on a wide screen, one on a narrow one (a CSS grid of fixed tracks, so that
  a page of one or two targets draws its charts at the same size as a page of three).

Targets always appear in the order of ``TARGET_ORDER`` (real Pulsar, georep
``pulsar-compatible``, georep ``full``), whatever ``--mode`` ran them in, so that pages of
``--mode all`` and ``--mode both`` compare column by column.

The charts are ``report_charts.py``'s; the shared stylesheet and the document's head
are the report toolkit's (``georep.reports``).
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from typing import Any

from georep.domain.shares import percent
from georep.drill.delivery_log import Delivery
from georep.drill.failback_page import failback_section
from georep.drill.report import figure_value
from georep.drill.report_charts import (
    Scale,
    TimelineScale,
    backlog_chart,
    chart,
    lag_chart,
    legend,
    shared_scale,
    shared_timeline_scale,
)
from georep.drill.verdict import Verdict, verdict
from georep.reports.html_page import document_head, figure_text

#: What each target is called on the page (unknown ones by their own name).
TARGET_LABELS = {
    "pulsar": "Apache Pulsar (its own geo-replication)",
    "pulsar-compatible": "georep pulsar-compatible",
    "full": "georep full",
}

#: The order of the columns and of the verdict's lines on every page.
TARGET_ORDER = ("pulsar", "pulsar-compatible", "full")

#: The figures table: the problems first, then what was counted (inventory).
_PROBLEM_ROWS = (
    ("duplicates", "duplicates: acked on A, delivered again on B"),
    ("exposure_before_failure", "exposure just before the failure: the duplicates predicted"),
    ("lost", "lost: replicated, never acked on A nor delivered on B"),
    ("redelivered", "redelivered: unacked on A, delivered on B (expected)"),
    ("undecodable_on_B", "undecodable on B by their schema version (avro-evolving)"),
    ("sync_lag_at_failure_ms", "sync lag at the failure (ms)"),
    ("time_to_resume_on_B_s", "time to resume on B (s)"),
)
_INVENTORY_ROWS = (
    ("produced", "produced on A"),
    ("replicated_before_failure", "replicated to B before the failure"),
    ("not_replicated", "not replicated (not counted as lost)"),
    ("delivered_on_A", "delivered on A (distinct)"),
    ("acked_on_A", "acknowledged on A"),
    ("unacked_on_A", "delivered on A, not acknowledged"),
    ("delivered_on_B", "delivered on B (distinct)"),
)
#: Rows left out when no target has their figure (a scenario without a schema).
_OPTIONAL_ROWS = frozenset({"undecodable_on_B"})
#: Rows whose figure is a share of another row, shown beside the count.
_SHARE_OF = {"duplicates": "acked_on_A", "lost": "replicated_before_failure"}

#: The page's own rules, after the toolkit's (``georep.reports.html_page.CSS``: verdict
#: lines, figure colours, ``.scroll``, ``.note``).
_CSS = """
table.figures { border-collapse: collapse; margin: 1em 0 1.5em }
.figures td, .figures th { padding: .25em .9em; border-bottom: 1px solid #e2e8f0;
  text-align: left; white-space: nowrap }
.figures th.target { text-align: right; white-space: normal; min-width: 6em }
.figures td:first-child { white-space: normal; min-width: 12em }
.figures tr.group th { text-align: left; padding-top: .9em; color: #4a5568;
  font-size: .85em; text-transform: uppercase; letter-spacing: .05em }
.figures tr.inventory td { color: #4a5568 }
.share { font-weight: 400; color: #4a5568; margin-left: .3em }
.targets { display: grid;
  grid-template-columns: repeat(auto-fill, minmax(min(100%, 340px), 1fr));
  gap: 1.5em 2em; align-items: start }
.target { min-width: 0 }
.target h2, .target p.topic { white-space: nowrap; overflow: hidden; text-overflow: ellipsis }
.target svg { display: block; width: 100%; max-width: 600px; height: auto;
  border: 1px solid #e2e8f0; background: #fff }
.target svg.lag, .target svg.nolag, .target svg.backlog { margin-top: .4em }
.legend { display: flex; flex-wrap: wrap; gap: .3em 1.2em; margin: .8em 0; color: #4a5568 }
.legend span { white-space: nowrap }
.legend svg { vertical-align: -1px; margin-right: .35em }
.sample { overflow-wrap: anywhere }
details pre { white-space: pre-wrap; word-break: break-all; font-size: .85em }
"""


def target_label(target: str, block: Mapping[str, Any] | None = None) -> str:
    """What ``target`` is called on the page; ``block`` (its report block) says whether it
    ran beside real Pulsar (``beside_pulsar``: the release), which the name then says."""
    label = TARGET_LABELS.get(target, target)
    beside = (block or {}).get("beside_pulsar")
    return f"{label} beside Apache Pulsar {beside}" if beside else label


def target_name(target: str, block: Mapping[str, Any]) -> str:
    """The target's short name in the terminal summary: ``full``, or ``full beside Pulsar
    4.0.7``."""
    beside = block.get("beside_pulsar")
    return f"{target} beside Pulsar {beside}" if beside else target


def ordered(modes: Mapping[str, Any]) -> list[str]:
    """The targets in ``TARGET_ORDER``, unknown ones after them in the order run."""
    known = [m for m in TARGET_ORDER if m in modes]
    return known + [m for m in modes if m not in TARGET_ORDER]


def _cell(key: str, value: Any, block: Mapping[str, Any]) -> str:
    if value is None:
        return '<td class="n note">n/a</td>'
    text = figure_text(value)
    css = "n"
    extra = ""
    if key in ("duplicates", "lost"):
        css += " bad" if value else " ok"
        whole = figure_value(block, _SHARE_OF[key]) or 0
        if whole:
            extra = f'<span class="share">{percent(value / whole)}</span>'
    elif key == "redelivered" and value:
        css += " warn"
    elif key == "undecodable_on_B":
        css += " bad" if value else " ok"
    return f'<td class="{css}" data-key="{key}">{html.escape(text)}{extra}</td>'


def _figures(modes: Mapping[str, Mapping[str, Any]]) -> str:
    head = "".join(
        f'<th class="target" data-target="{html.escape(m)}">'
        f"{html.escape(target_label(m, block))}</th>"
        for m, block in modes.items()
    )
    rows = [f"<tr><th></th>{head}</tr>"]
    for group, css, group_rows in (
        ("what went wrong", "problem", _PROBLEM_ROWS),
        ("what was counted", "inventory", _INVENTORY_ROWS),
    ):
        rows.append(f'<tr class="group"><th colspan="{len(modes) + 1}">{group}</th></tr>')
        for key, label in group_rows:
            if key in _OPTIONAL_ROWS and all(figure_value(b, key) is None for b in modes.values()):
                continue
            cells = "".join(_cell(key, figure_value(block, key), block) for block in modes.values())
            rows.append(f'<tr class="{css}"><td>{html.escape(label)}</td>{cells}</tr>')
    return '<div class="scroll"><table class="figures">' + "".join(rows) + "</table></div>"


def _verdicts(verdicts: Sequence[Verdict], modes: Mapping[str, Mapping[str, Any]]) -> str:
    items = []
    for v in verdicts:
        word = "pass" if v.passed else "fail"
        dup_css = "bad" if v.duplicates else "ok"
        lost_css = "bad" if v.lost else "ok"
        items.append(
            f'<li class="{word}" data-target="{html.escape(v.target)}">'
            f'<div class="head"><span class="word">{word}</span> '
            f"<strong>{html.escape(target_label(v.target, modes.get(v.target)))}</strong>: "
            f'<span class="{dup_css}" data-key="duplicates">{v.duplicates} duplicates</span>'
            f" ({percent(v.duplicates_share)} of {v.acked_on_a} acknowledged on A), "
            f'<span class="{lost_css}" data-key="lost">{v.lost} lost</span>'
            f" ({percent(v.lost_share)} of {v.replicated} replicated)</div>"
            f'<p class="why">{html.escape(" ".join(v.why))}</p></li>'
        )
    return '<ul class="verdict">' + "".join(items) + "</ul>"


def _target_column(
    target: str,
    block: Mapping[str, Any],
    deliveries: Sequence[Delivery],
    report: Mapping[str, Any],
    scale: Scale | None,
    timeline_scale: TimelineScale | None = None,
) -> str:
    topic = html.escape(block["topic"])
    out = [
        f'<section class="target" data-target="{html.escape(target)}">',
        f"<h2>{html.escape(target_label(target, block))}</h2>",
        # one line whatever the topic's length, so that every column's chart starts at
        # the same height
        f'<p class="note topic" title="{topic}">topic <code>{topic}</code></p>',
        chart(deliveries, block.get("failed_at"), report["messages"], report["settle_s"], scale),
        lag_chart(block, timeline_scale) if timeline_scale is not None else "",
        backlog_chart(block, timeline_scale) if timeline_scale is not None else "",
    ]
    for name in ("duplicates", "lost"):
        sample = block[name]["sample"]
        if sample:
            out.append(
                f'<p class="sample">{name} (first {len(sample)}): '
                f"<code>{html.escape(', '.join(sample))}</code></p>"
            )
    for warning in block.get("warnings", []):
        out.append(f'<p class="bad">warning: {html.escape(warning)}</p>')
    out.append("</section>")
    return "\n".join(out)


#: Where a drill's page tells the reader to look next (its audit, docs/AUDIT.md).
_AUDIT_HINT = (
    "For the audit of the same failover message by message: export both clusters "
    "(<code>georep export</code>) and run <code>georep reconcile --input EXPORT-A EXPORT-B "
    "--deliveries deliveries.jsonl --out audit</code> with this directory's "
    "<code>deliveries.jsonl</code> (docs/AUDIT.md)."
)


def render(report: Mapping[str, Any], deliveries: Mapping[str, Sequence[Delivery]]) -> str:
    modes = {mode: report["modes"][mode] for mode in ordered(report["modes"])}
    title = f"georep drill: {report['scenario']}, {report['fail']}"
    scale = shared_scale(
        [(deliveries.get(mode, ()), block.get("failed_at")) for mode, block in modes.items()]
    )
    timeline_scale = shared_timeline_scale(list(modes.values()), scale.after_high if scale else 0.0)
    out = [
        document_head(title, _CSS),
        f"<h1>{html.escape(title)}</h1>",
        f'<p class="note">{html.escape(report.get("scenario_summary", ""))}. '
        f"{report['messages']} messages over {report['keys']} keys; A failed after "
        f"{report['target_on_A']} were delivered on A (--at {report['at']}) and "
        f"{report['settle_s']:g} s of settling.</p>",
        _verdicts([verdict(mode, block) for mode, block in modes.items()], modes),
        _figures(modes),
        failback_section(modes, lambda mode: target_label(mode, modes[mode])),
        legend(),
        '<div class="targets">',
        *(
            _target_column(mode, block, deliveries.get(mode, ()), report, scale, timeline_scale)
            for mode, block in modes.items()
        ),
        "</div>",
        f'<p class="note">{_AUDIT_HINT}</p>',
        "<details><summary>report.json</summary><pre>",
        html.escape(json.dumps(report, indent=2, sort_keys=True)),
        "</pre></details></body></html>\n",
    ]
    return "\n".join(out)
