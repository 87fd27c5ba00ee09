"""The drill page's SVG: a target's deliveries chart, its sync lag and replication
backlog over time, and the legend under the figures (``report_page.py`` lays them out).

A target's chart (one SVG of a capped size), y = the message's index in production order
on every panel:

- **before the failure**: A's deliveries over time (seconds before the failure; blue,
  pale when never acknowledged);
- a **break** over the wait between the last delivery on A and the failure (the settle
  time, labelled with its length), which would otherwise be empty width;
- **after the failure**: B's deliveries from the failure (0, the labelled dashed line):
  green for messages A never delivered, an orange diamond for a redelivery (delivered,
  not acknowledged on A: expected), a red square with a white edge for a duplicate
  (acknowledged on A, delivered again), drawn last so that nothing hides it;
- an **outcome strip** at the right: each message's outcome at its index, as bands —
  red duplicate, orange redelivered, grey done on A, green first delivered on B, black
  never delivered — so that where the duplicates are reads off without counting marks.

Under it, for a target with gateways, its **sync lag** over time: B's gateway's
``applied.A.syncLagMs`` as sampled from the gateways' start to the failure (a line; gaps
where the gateway reported none), the failure at 0 and the fault window — from the
failure to the first delivery on B — shaded. Below that, for every target, its
**replication backlog** A→B over the same time axis (``replication_backlog_samples``: A's
gateway's replicator to B, or Pulsar's own), with its peak and last value in the heading;
a target whose A reported no replication to B says so instead of drawing an empty chart.
The time axis and each value axis are shared by the page's targets (``TimelineScale``).

Both time panels are on one scale shared by every target of the page (``Scale``): the
same second is the same width in every column, so a drain of 0.3 s and one of 0.08 s
look it. Ticks are round (``georep.reports.svg_axis``). Above
``limits.drill_chart_points_max`` deliveries every n-th one is drawn (duplicates and
redeliveries always); the strip is exact.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from georep import limits
from georep.drill.delivery_log import BEFORE, Delivery
from georep.reports.svg_axis import nice_step, nice_ticks, tick_label, value_labels

#: The chart's drawing size: about a column's width at 1400 px, so that its text is drawn
#: near its nominal size; the CSS caps how far it may grow (``.target svg``).
_W, _H = 460, 300
_LEFT, _RIGHT, _TOP, _BOTTOM = 44, 6, 30, 44
_STRIP_W, _STRIP_GAP, _BREAK_W = 12, 10, 24
#: Share of the panels' width for the time before the failure.
_BEFORE_SHARE = 0.55

_COLORS = {
    "a_acked": "#2b6cb0",
    "a_unacked": "#a3bffa",
    "b": "#2f855a",
    "redelivered": "#dd6b20",
    "duplicate": "#c53030",
    "done_on_a": "#cbd5e0",
    "never": "#1a202c",
}
_LEGEND = (
    ("a_acked", "on A, acknowledged", "dot"),
    ("a_unacked", "on A, not acknowledged", "dot"),
    ("b", "on B, new", "dot"),
    ("redelivered", "on B, redelivered (unacked on A)", "diamond"),
    ("duplicate", "on B, duplicate (acked on A)", "square"),
    ("failure", "A fails (0 s)", "line"),
)
_STRIP_LEGEND = (
    ("duplicate", "duplicate"),
    ("redelivered", "redelivered"),
    ("done_on_a", "acknowledged on A only"),
    ("b", "first delivered on B"),
    ("never", "never delivered"),
)


def _identity(delivery: Delivery) -> str:
    return delivery.origin_position or delivery.drill_id


def classify_points(deliveries: Sequence[Delivery]) -> list[tuple[Delivery, str]]:
    """Each delivery with its kind: a_acked, a_unacked, b, redelivered or duplicate."""
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
    return points


def _thin(points: list[tuple[Delivery, str]]) -> list[tuple[Delivery, str]]:
    cap = limits.drill_chart_points_max
    if len(points) <= cap:
        return points
    step = -(-len(points) // cap)
    keep = ("duplicate", "redelivered")
    return [p for i, p in enumerate(points) if p[1] in keep or i % step == 0]


def outcomes(points: Sequence[tuple[Delivery, str]], messages: int) -> list[str]:
    """Each message index's outcome (the strip's colours)."""
    strip = ["never"] * messages
    rank = {"never": 0, "done_on_a": 1, "b": 2, "redelivered": 3, "duplicate": 4}
    for d, kind in points:
        if not 0 <= d.index < messages:
            continue
        outcome = {"a_acked": "done_on_a", "a_unacked": "never"}.get(kind, kind)
        if rank[outcome] > rank[strip[d.index]]:
            strip[d.index] = outcome
    return strip


class _Panel:
    """A time panel: seconds ``low..high`` onto pixels ``left..left+width``."""

    def __init__(self, low: float, high: float, left: float, width: float) -> None:
        if high - low < 1e-3:
            high = low + 1e-3
        self.low, self.high, self.left, self.width = low, high, left, width

    def x(self, seconds: float) -> float:
        return self.left + (seconds - self.low) / (self.high - self.low) * self.width

    def ticks(self) -> list[str]:
        """Round ticks, about one per 50 px; a finer step when that one leaves a single
        tick (a span of 0.9 s from -3.97 s: -3.5 alone at 0.5 s, -3.8 .. -3.2 at 0.2 s)."""
        count = max(2, int(self.width // 50))
        values = nice_ticks(self.low, self.high, count)
        if len(values) < 2:
            count += 2
            values = nice_ticks(self.low, self.high, count)
        step = nice_step(self.high - self.low, count)
        return [
            f'<text x="{self.x(t):.1f}" y="{_H - _BOTTOM + 15}" font-size="11" '
            f'text-anchor="middle">{tick_label(t, step)}</text>'
            f'<line x1="{self.x(t):.1f}" x2="{self.x(t):.1f}" y1="{_H - _BOTTOM}" '
            f'y2="{_H - _BOTTOM + 4}" stroke="#4a5568"/>'
            for t in values
        ]


def _mark(kind: str, cx: float, cy: float, title: str) -> str:
    color = _COLORS[kind]
    tip = f"<title>{html.escape(title)}</title>"
    if kind == "duplicate":
        # larger than a redelivery's diamond, and drawn after it
        return (
            f'<rect x="{cx - 3:.1f}" y="{cy - 3:.1f}" width="6" height="6" '
            f'fill="{color}">{tip}</rect>'
        )
    if kind == "redelivered":
        return (
            f'<path d="M{cx:.1f} {cy - 3.5:.1f}l3.5 3.5l-3.5 3.5l-3.5-3.5z" fill="{color}">'
            f"{tip}</path>"
        )
    return f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="1.7" fill="{color}"/>'


@dataclass(frozen=True)
class Scale:
    """The time panels' bounds in seconds from the failure, the same for every target of
    a page: A's panel ``before_low..before_high``, B's ``0..after_high``."""

    before_low: float
    before_high: float
    after_high: float


def _seconds(deliveries: Sequence[Delivery], failed_at_ms: int | None) -> list[float]:
    if not deliveries:
        return []
    origin_ms = failed_at_ms or min(d.delivered_at for d in deliveries)
    return [(d.delivered_at - origin_ms) / 1000.0 for d in deliveries]


def shared_scale(
    targets: Sequence[tuple[Sequence[Delivery], int | None]],
) -> Scale | None:
    """One scale over every target's (deliveries, failed_at_ms); None without deliveries."""
    before: list[float] = []
    after: list[float] = []
    for deliveries, failed_at_ms in targets:
        for d, t in zip(deliveries, _seconds(deliveries, failed_at_ms), strict=True):
            (before if d.phase == BEFORE else after).append(t)
    if not before and not after:
        return None
    low, high = (min(before), max(before)) if before else (-1.0, 0.0)
    return Scale(low, high, max([*after, 0.0]))


@dataclass(frozen=True)
class TimelineScale:
    """The timelines' bounds (sync lag, replication backlog): seconds from the failure
    ``low_s..high_s``, lag ``0..lag_ms_max``, backlog ``0..backlog_max``."""

    low_s: float
    high_s: float
    lag_ms_max: float
    backlog_max: float = 2.0


#: The timelines of a target: (report field, the value's name in ``TimelineScale``).
_LAG, _BACKLOG = "sync_lag_samples_ms", "replication_backlog_samples"


def shared_timeline_scale(
    blocks: Sequence[Mapping[str, Any]], after_high_s: float
) -> TimelineScale | None:
    """One scale over every target's ``sync_lag_samples_ms`` and
    ``replication_backlog_samples``; None if none has any."""
    starts: list[float] = []
    values: dict[str, list[float]] = {_LAG: [1.0], _BACKLOG: [2.0]}
    for block in blocks:
        failed_at = block.get("failed_at")
        for key, found in values.items():
            samples = block.get(key) or []
            if not samples or failed_at is None:
                continue
            starts.append((samples[0][0] - failed_at) / 1000.0)
            found += [value for _, value in samples if value is not None]
    if not starts:
        return None
    return TimelineScale(
        min(min(starts), -1e-3), max(after_high_s, 1e-3), max(values[_LAG]), max(values[_BACKLOG])
    )


_LAG_H = 120
_LAG_TOP, _LAG_BOTTOM = 22, 30


def _count_label(value: float, step: float) -> str:
    """A count's tick: 400, 1.5k, 2M (a million fits the axis' margin)."""
    for unit, suffix in ((1e6, "M"), (1e3, "k")):
        if step >= unit / 10 and value >= unit:
            return tick_label(value / unit, step / unit) + suffix
    return tick_label(value, step)


def _timeline(
    block: Mapping[str, Any],
    key: str,
    scale: TimelineScale,
    value_max: float,
    css: str,
    color: str,
    heading: str,
    aria: str,
    tick: Callable[[float, float], str] = tick_label,
) -> str:
    """One series of ``block[key]`` (``[epoch ms, value or null]``) over time until the
    failure, as wide as the target's chart: a line with gaps where no value was
    reported, the failure at 0 and the fault window shaded; ``heading`` is SVG text."""
    samples = block.get(key) or []
    failed_at = block.get("failed_at")
    right = _W - _RIGHT - _STRIP_W - _STRIP_GAP
    panel = _Panel(scale.low_s, scale.high_s, _LEFT, right - _LEFT)
    bottom = _LAG_H - _LAG_BOTTOM
    height = bottom - _LAG_TOP

    def y(value: float) -> float:
        return bottom - value / value_max * height

    parts = [
        f'<svg class="{css}" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {_W} {_LAG_H}" '
        f'role="img" aria-label="{aria}">',
        f'<rect x="{_LEFT}" y="{_LAG_TOP}" width="{panel.width:.1f}" height="{height}" '
        'fill="#f7fafc"/>',
    ]
    resume = block.get("time_to_resume_on_B_s")
    if resume is not None:
        x0, x1 = panel.x(0.0), panel.x(min(resume, scale.high_s))
        parts.append(
            f'<rect class="fault" x="{x0:.1f}" y="{_LAG_TOP}" width="{max(x1 - x0, 1.5):.1f}" '
            f'height="{height}" fill="#fed7d7"><title>fault window: {resume:g} s from the '
            "failure to the first delivery on B</title></rect>"
        )
    runs: list[list[str]] = [[]]
    for at_ms, value in samples:
        if value is None:
            runs.append([])
            continue
        runs[-1].append(f"{panel.x((at_ms - failed_at) / 1000.0):.1f},{y(value):.1f}")
    for run in runs:
        if len(run) == 1:
            x_text, y_text = run[0].split(",")
            parts.append(f'<circle cx="{x_text}" cy="{y_text}" r="1.5" fill="{color}"/>')
        elif run:
            parts.append(
                f'<polyline fill="none" stroke="{color}" stroke-width="1.5" '
                f'points="{" ".join(run)}"/>'
            )
    x0 = panel.x(0.0)
    parts.append(
        f'<line class="failure" x1="{x0:.1f}" x2="{x0:.1f}" y1="{_LAG_TOP - 4}" y2="{bottom}" '
        'stroke="#1a202c" stroke-width="1.5" stroke-dasharray="4 3"/>'
        f'<text x="{_LEFT}" y="{_LAG_TOP - 8}" font-size="11" fill="#4a5568">{heading}</text>'
    )
    parts.append(value_labels(value_max, 2, _LEFT - 6, y, label=tick))
    for tick_svg in panel.ticks():
        parts.append(
            tick_svg.replace(f'y="{_H - _BOTTOM + 15}"', f'y="{bottom + 15}"').replace(
                f'y1="{_H - _BOTTOM}" y2="{_H - _BOTTOM + 4}"', f'y1="{bottom}" y2="{bottom + 4}"'
            )
        )
    parts.append("</svg>")
    return "".join(parts)


def lag_chart(block: Mapping[str, Any], scale: TimelineScale) -> str:
    """The target's sync lag over time (an SVG as wide as its chart); for a target
    without one whose backlog is drawn, a panel of the same height that says so (every
    column's backlog panel then starts at the same height); else nothing."""
    if block.get("failed_at") is None:
        return ""
    if not block.get(_LAG):
        if not block.get(_BACKLOG):
            return ""
        return (
            f'<svg class="nolag" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {_W} {_LAG_H}" '
            f'role="img" aria-label="no sync lag"><text x="{_LEFT}" y="{_LAG_TOP - 8}" '
            'font-size="11" fill="#4a5568">no sync lag: no gateway syncs this target'
            "</text></svg>"
        )
    heading = "sync lag on B (ms), sampled until the failure"
    return _timeline(
        block, _LAG, scale, scale.lag_ms_max, "lag", "#6b46c1", heading, "sync lag over time"
    )


def backlog_chart(block: Mapping[str, Any], scale: TimelineScale) -> str:
    """The target's replication backlog A→B over time, on the sync lag's time scale; a
    line saying so when A reported none while sampled; nothing for a report without
    the series."""
    if _BACKLOG not in block or block.get("failed_at") is None:
        return ""
    backlogs = [n for _, n in block[_BACKLOG] if n is not None]
    if not backlogs:
        return (
            '<p class="note backlog">No replication backlog to draw: A reported no'
            " replication to B while the drill sampled.</p>"
        )
    heading = (
        "replication backlog A→B (entries): "
        f'peak <tspan data-key="peak">{max(backlogs)}</tspan>, '
        f'last <tspan data-key="last">{backlogs[-1]}</tspan>'
    )
    aria = "replication backlog over time"
    return _timeline(
        block, _BACKLOG, scale, scale.backlog_max, "backlog", "#2c7a7b", heading, aria, _count_label
    )


def chart(
    deliveries: Sequence[Delivery],
    failed_at_ms: int | None,
    messages: int,
    settle_s: float,
    scale: Scale | None = None,
) -> str:
    """The target's SVG; ``scale`` shared with the other targets (its own without)."""
    classified = classify_points(deliveries)
    if not classified:
        return '<p class="note">no deliveries to draw</p>'
    scale = scale or shared_scale([(deliveries, failed_at_ms)])
    assert scale is not None
    seconds = {
        id(d): t for d, t in zip(deliveries, _seconds(deliveries, failed_at_ms), strict=True)
    }
    before = [seconds[id(d)] for d, _ in classified if d.phase == BEFORE]
    after = [seconds[id(d)] for d, _ in classified if d.phase != BEFORE]
    plot_right = _W - _RIGHT - _STRIP_W - _STRIP_GAP
    plot_width = plot_right - _LEFT - _BREAK_W
    height = _H - _TOP - _BOTTOM
    y_high = max(messages - 1, 1)

    def sy(index: float) -> float:
        return _TOP + height - index / y_high * height

    last_a = max(before) if before else scale.before_high
    before_panel = _Panel(scale.before_low, scale.before_high, _LEFT, plot_width * _BEFORE_SHARE)
    after_left = before_panel.left + before_panel.width + _BREAK_W
    after_panel = _Panel(0.0, scale.after_high, after_left, plot_right - after_left)
    last_b = max(after) if after else 0.0
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {_W} {_H}" role="img" '
        'aria-label="deliveries before and after the failure">',
    ]
    for panel, label, anchor, at in (
        (before_panel, "on A, before", "start", before_panel.left),
        (
            after_panel,
            f"on B, after (last at {last_b:.2f} s)",
            "end",
            after_panel.left + after_panel.width,
        ),
    ):
        parts.append(
            f'<rect x="{panel.left:.1f}" y="{_TOP}" width="{panel.width:.1f}" '
            f'height="{height}" fill="#f7fafc"/>'
            f'<text x="{at:.1f}" y="{_TOP - 18}" font-size="11" fill="#4a5568" '
            f'text-anchor="{anchor}">{label}</text>'
        )
        parts += panel.ticks()
    gap_s = -last_a if before and failed_at_ms else settle_s
    middle = before_panel.left + before_panel.width + _BREAK_W / 2
    parts.append(
        f'<path d="M{middle - 5:.1f} {_TOP}l5 6l-5 6l5 6" fill="none" stroke="#718096"/>'
        f'<path d="M{middle - 5:.1f} {_TOP + height}l5 -6l-5 -6l5 -6" fill="none" '
        'stroke="#718096"/>'
        f'<text x="{middle:.1f}" y="{_TOP + height / 2:.1f}" font-size="10" fill="#4a5568" '
        f'text-anchor="middle" transform="rotate(-90 {middle:.1f} {_TOP + height / 2:.1f})">'
        f"{gap_s:.1f} s wait</text>"
    )
    parts.append(value_labels(y_high, 5, _LEFT - 6, sy))
    parts.append(
        f'<text x="{(_LEFT + plot_right) / 2:.0f}" y="{_H - 8}" font-size="12" '
        'text-anchor="middle">seconds from the failure</text>'
        f'<text x="13" y="{_TOP + height / 2:.0f}" font-size="12" text-anchor="middle" '
        f'transform="rotate(-90 13 {_TOP + height / 2:.0f})">message index</text>'
    )
    if failed_at_ms is not None:
        x0 = after_panel.x(0.0)
        parts.append(
            f'<line x1="{x0:.1f}" x2="{x0:.1f}" y1="{_TOP - 4}" y2="{_TOP + height}" '
            'stroke="#1a202c" stroke-width="1.5" stroke-dasharray="4 3"/>'
            f'<text x="{x0 + 3:.1f}" y="{_TOP - 5}" font-size="11" font-weight="600" '
            'text-anchor="start">A fails</text>'
        )
    order = {"a_acked": 0, "a_unacked": 0, "b": 1, "redelivered": 2, "duplicate": 3}
    for d, kind in sorted(_thin(classified), key=lambda point: order[point[1]]):
        panel = before_panel if d.phase == BEFORE else after_panel
        parts.append(
            _mark(kind, panel.x(seconds[id(d)]), sy(max(d.index, 0)), f"{kind} {d.drill_id}")
        )
    parts.append(_strip(outcomes(classified, messages), plot_right + _STRIP_GAP, height, sy))
    parts.append("</svg>")
    return "".join(parts)


def _strip(strip: Sequence[str], left: float, height: float, sy: Callable[[float], float]) -> str:
    parts = [
        f'<text x="{left + _STRIP_W:.1f}" y="{_H - 8}" font-size="11" '
        'fill="#4a5568" text-anchor="end">outcome</text>'
    ]
    start = 0
    band = height / max(len(strip), 1)
    for index in range(1, len(strip) + 1):
        if index < len(strip) and strip[index] == strip[start]:
            continue
        top = sy(index - 1) - band / 2
        parts.append(
            f'<rect x="{left:.1f}" y="{max(top, _TOP):.2f}" width="{_STRIP_W}" '
            f'height="{max(band * (index - start), 0.5):.2f}" fill="{_COLORS[strip[start]]}">'
            f"<title>{strip[start].replace('_', ' ')}: messages {start}..{index - 1}"
            "</title></rect>"
        )
        start = index
    return "".join(parts)


def _swatch(kind: str, shape: str) -> str:
    color = _COLORS.get(kind, "#1a202c")
    body = {
        "dot": f'<circle cx="6" cy="6" r="4" fill="{color}"/>',
        "square": f'<rect x="2" y="2" width="8" height="8" fill="{color}"/>',
        "diamond": f'<path d="M6 1l5 5l-5 5l-5-5z" fill="{color}"/>',
        "line": '<line x1="6" x2="6" y1="0" y2="12" stroke="#1a202c" stroke-dasharray="3 2"/>',
        "band": f'<rect x="0" y="3" width="12" height="6" fill="{color}"/>',
    }[shape]
    return f'<svg width="12" height="12" aria-hidden="true">{body}</svg>'


def legend() -> str:
    """The marks' and the outcome strip's colours, once for every chart of the page."""
    marks = "".join(
        f"<span>{_swatch(kind, shape)}{html.escape(label)}</span>" for kind, label, shape in _LEGEND
    )
    bands = "".join(
        f"<span>{_swatch(kind, 'band')}{html.escape(label)}</span>" for kind, label in _STRIP_LEGEND
    )
    return (
        f'<div class="legend">{marks}</div>'
        f'<div class="legend"><span>outcome strip:</span>{bands}</div>'
    )
