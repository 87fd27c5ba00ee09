"""``report.html``: the drill's report as one self-contained page (inline CSS and SVG, no
script, no external resource).

For each mode: the figures, and a chart of every delivery — x is seconds from the
failure (the dashed line at 0), y is the message's index in production order. Deliveries
on A are blue (pale when never acknowledged), on B green; a delivery on B of a message
acknowledged on A (a duplicate) is a red ring, one of a message delivered on A but not
acknowledged there (redelivered, expected) orange. Above ``limits.drill_chart_points_max``
deliveries every n-th one is drawn (duplicates always). With two modes, a table puts
their figures side by side first.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from typing import Any

from georep import limits
from georep.drill.delivery_log import BEFORE, Delivery

_W, _H = 760, 340
_LEFT, _RIGHT, _TOP, _BOTTOM = 56, 16, 16, 40
_COLORS = {
    "a_acked": "#2b6cb0",
    "a_unacked": "#a3bffa",
    "b": "#2f855a",
    "redelivered": "#dd6b20",
    "duplicate": "#c53030",
}

_ROWS = (
    ("produced", "produced on A"),
    ("replicated_before_failure", "replicated to B before the failure"),
    ("not_replicated", "not replicated (not counted as lost)"),
    ("delivered_on_A", "delivered on A (distinct)"),
    ("acked_on_A", "acknowledged on A"),
    ("unacked_on_A", "delivered on A, not acknowledged"),
    ("delivered_on_B", "delivered on B (distinct)"),
    ("duplicates", "duplicates: acked on A, delivered again on B"),
    ("redelivered", "redelivered: unacked on A, delivered on B (expected)"),
    ("lost", "lost: replicated, never acked on A nor delivered on B"),
    ("sync_lag_at_failure_ms", "sync lag at the failure (ms)"),
    ("time_to_resume_on_B_s", "time to resume on B (s)"),
)

_CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 820px; color: #1a202c }
h1 { font-size: 1.5em } h2 { font-size: 1.2em; margin-top: 2em }
table { border-collapse: collapse; margin: 1em 0 }
td, th { padding: .25em .8em; border-bottom: 1px solid #e2e8f0; text-align: left }
td.n { text-align: right; font-variant-numeric: tabular-nums }
.bad { color: #c53030; font-weight: 600 } .ok { color: #2f855a }
.note { color: #4a5568 } code { font-size: .92em }
svg { border: 1px solid #e2e8f0; background: #fff }
pre { white-space: pre-wrap; word-break: break-all; font-size: .85em }
"""


def _value(block: Mapping[str, Any], key: str) -> Any:
    value = block.get(key)
    return value.get("count") if isinstance(value, Mapping) else value


def _cell(key: str, value: Any) -> str:
    if value is None:
        return '<td class="n note">n/a</td>'
    text = f"{value:g}" if isinstance(value, float) else str(value)
    css = "n"
    if key in ("duplicates", "lost"):
        css += " bad" if value else " ok"
    return f'<td class="{css}">{html.escape(text)}</td>'


def _figures(modes: Mapping[str, Mapping[str, Any]]) -> str:
    head = "".join(f"<th>{html.escape(m)}</th>" for m in modes)
    rows = [f"<tr><th></th>{head}</tr>"]
    for key, label in _ROWS:
        cells = "".join(_cell(key, _value(block, key)) for block in modes.values())
        rows.append(f"<tr><td>{html.escape(label)}</td>{cells}</tr>")
    return "<table>" + "".join(rows) + "</table>"


def _identity(delivery: Delivery) -> str:
    return delivery.origin_position or delivery.drill_id


def _points(deliveries: Sequence[Delivery]) -> list[tuple[Delivery, str]]:
    acked = {_identity(d) for d in deliveries if d.phase == BEFORE and d.acked}
    seen_a = {_identity(d) for d in deliveries if d.phase == BEFORE}
    points = []
    for d in deliveries:
        if d.phase == BEFORE:
            kind = "a_acked" if d.acked else "a_unacked"
        elif _identity(d) in acked:
            kind = "duplicate"
        elif _identity(d) in seen_a:
            kind = "redelivered"
        else:
            kind = "b"
        points.append((d, kind))
    cap = limits.drill_chart_points_max
    if len(points) > cap:
        step = -(-len(points) // cap)
        points = [p for i, p in enumerate(points) if p[1] == "duplicate" or i % step == 0]
    return points


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    if high <= low:
        return [low]
    return [low + (high - low) * i / (count - 1) for i in range(count)]


def chart(deliveries: Sequence[Delivery], failed_at_ms: int | None, messages: int) -> str:
    points = _points(deliveries)
    if not points:
        return '<p class="note">no deliveries to draw</p>'
    origin_ms = failed_at_ms or min(d.delivered_at for d, _ in points)
    xs = [(d.delivered_at - origin_ms) / 1000.0 for d, _ in points]
    x_low, x_high = min([*xs, 0.0]), max([*xs, 0.0])
    if x_high - x_low < 1e-3:
        x_high = x_low + 1.0
    y_high = max(messages - 1, 1)
    width, height = _W - _LEFT - _RIGHT, _H - _TOP - _BOTTOM

    def sx(x: float) -> float:
        return _LEFT + (x - x_low) / (x_high - x_low) * width

    def sy(y: float) -> float:
        return _TOP + height - y / y_high * height

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" '
        f'viewBox="0 0 {_W} {_H}" role="img" aria-label="deliveries over time">',
        f'<rect x="{_LEFT}" y="{_TOP}" width="{width}" height="{height}" fill="#f7fafc"/>',
    ]
    for x in _ticks(x_low, x_high):
        parts.append(
            f'<text x="{sx(x):.1f}" y="{_H - 22}" font-size="11" text-anchor="middle">'
            f"{x:.1f}</text>"
        )
    for y in _ticks(0, y_high):
        parts.append(
            f'<text x="{_LEFT - 6}" y="{sy(y) + 4:.1f}" font-size="11" text-anchor="end">'
            f"{y:.0f}</text>"
        )
    parts.append(
        f'<text x="{_LEFT + width / 2:.0f}" y="{_H - 6}" font-size="12" text-anchor="middle">'
        "seconds from the failure</text>"
    )
    parts.append(
        f'<text x="14" y="{_TOP + height / 2:.0f}" font-size="12" text-anchor="middle" '
        f'transform="rotate(-90 14 {_TOP + height / 2:.0f})">message index</text>'
    )
    if failed_at_ms is not None:
        parts.append(
            f'<line x1="{sx(0):.1f}" x2="{sx(0):.1f}" y1="{_TOP}" y2="{_TOP + height}" '
            'stroke="#1a202c" stroke-dasharray="4 3"/>'
        )
    # duplicates last, so that they are drawn on top
    for (d, kind), x in sorted(zip(points, xs, strict=True), key=lambda p: p[0][1] == "duplicate"):
        cx, cy = sx(x), sy(max(d.index, 0))
        if kind == "duplicate":
            parts.append(
                f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="3.5" fill="none" '
                f'stroke="{_COLORS[kind]}" stroke-width="1.5"><title>duplicate '
                f"{html.escape(d.drill_id)}</title></circle>"
            )
        else:
            parts.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="1.6" fill="{_COLORS[kind]}"/>')
    parts.append("</svg>")
    return "".join(parts)


def _legend() -> str:
    labels = {
        "a_acked": "on A, acknowledged",
        "a_unacked": "on A, not acknowledged",
        "b": "on B",
        "redelivered": "on B, redelivered (unacked on A)",
        "duplicate": "on B, duplicate (acked on A)",
    }
    items = "".join(
        f'<span style="margin-right:1.2em"><svg width="10" height="10"><circle cx="5" cy="5" '
        f'r="4" fill="{_COLORS[k]}"/></svg> {html.escape(v)}</span>'
        for k, v in labels.items()
    )
    return f'<p class="note">{items}</p>'


def render(report: Mapping[str, Any], deliveries: Mapping[str, Sequence[Delivery]]) -> str:
    modes = report["modes"]
    title = f"georep drill: {report['scenario']}, {report['fail']}"
    out = [
        "<!doctype html><html lang=en><head><meta charset=utf-8>",
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f'<p class="note">{html.escape(report.get("scenario_summary", ""))}. '
        f"{report['messages']} messages over {report['keys']} keys; A failed after "
        f"{report['target_on_A']} were delivered on A (--at {report['at']}) and "
        f"{report['settle_s']:g} s of settling.</p>",
        _figures(modes),
    ]
    for mode, block in modes.items():
        out.append(f"<h2>mode {html.escape(mode)}</h2>")
        out.append(f'<p class="note">topic <code>{html.escape(block["topic"])}</code></p>')
        out.append(chart(deliveries.get(mode, ()), block.get("failed_at"), report["messages"]))
        out.append(_legend())
        for name in ("duplicates", "lost"):
            sample = block[name]["sample"]
            if sample:
                out.append(
                    f"<p>{name} (first {len(sample)}): <code>{html.escape(', '.join(sample))}"
                    "</code></p>"
                )
        for warning in block.get("warnings", []):
            out.append(f'<p class="bad">warning: {html.escape(warning)}</p>')
    out.append("<h2>report.json</h2><pre>")
    out.append(html.escape(json.dumps(report, indent=2, sort_keys=True)))
    out.append("</pre></body></html>\n")
    return "\n".join(out)
