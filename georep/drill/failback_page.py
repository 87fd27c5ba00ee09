"""The failback's part of report.html: a verdict line per target and its figures side by
side (failback.py defines them), under the failover's figures. Nothing when the drill
ran without ``--failback``. Classes are the page's (``figures``) and the report
toolkit's (``verdict``, ``.bad``, ``.ok``: ``georep.reports.html_page``)."""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping
from typing import Any

from georep.domain.shares import percent
from georep.drill.failback import failback_verdict
from georep.drill.report import figure_value
from georep.reports.html_page import figure_text

#: (key in the failback block, label, whether a non-zero value is a problem).
_ROWS = (
    ("twice", "delivered twice on A (acknowledged on A or B before)", True),
    ("lost", "lost (acknowledged nowhere, never came on A)", True),
    ("redelivered", "redelivered (delivered before, acknowledged nowhere)", False),
    ("first_delivered", "first delivered on the return", False),
    ("acked_on_A", "acknowledged on A before the failure", False),
    ("acked_on_B", "acknowledged on B after it", False),
    ("expected_on_return", "expected on A (acknowledged nowhere)", False),
    ("delivered_on_return", "delivered on A on the return", False),
    ("sync_settle_s", "sync back to A, s", False),
    ("time_to_resume_on_A_s", "from A's return to the first delivery on A, s", False),
)


def _cell(key: str, value: Any, problem: bool) -> str:
    if value is None:
        return '<td class="n note">n/a</td>'
    css = "n" + ((" bad" if value else " ok") if problem else "")
    text = figure_text(value)
    return f'<td class="{css}" data-key="failback.{key}">{html.escape(text)}</td>'


def failback_section(modes: Mapping[str, Mapping[str, Any]], label: Callable[[str], str]) -> str:
    """``modes``: target -> its report block, in page order; ``label``: a target's name."""
    blocks = {m: b["failback"] for m, b in modes.items() if b.get("failback") is not None}
    if not blocks:
        return ""
    items = []
    for target, block in blocks.items():
        v = failback_verdict(target, block)
        word = "pass" if v.passed else "fail"
        settled = "" if block.get("sync_settled") else " The sync back to A had not settled."
        items.append(
            f'<li class="{word}" data-target="{html.escape(target)}" data-failback>'
            f'<div class="head"><span class="word">{word}</span> '
            f"<strong>{html.escape(label(target))}</strong>: "
            f'<span class="{"bad" if v.twice else "ok"}" data-key="failback.twice">'
            f"{v.twice} twice on A</span> ({percent(v.twice_share)} of {v.acked_before}"
            f' acknowledged on A or B), <span class="{"bad" if v.lost else "ok"}"'
            f' data-key="failback.lost">{v.lost} lost</span></div>'
            f'<p class="why">{v.redelivered} delivered before and acknowledged nowhere came'
            f" again on A (expected).{settled}</p></li>"
        )
    head = "".join(
        f'<th class="target" data-target="{html.escape(m)}">{html.escape(label(m))}</th>'
        for m in blocks
    )
    rows = [f"<tr><th></th>{head}</tr>"]
    for key, text, problem in _ROWS:
        cells = "".join(_cell(key, figure_value(b, key), problem) for b in blocks.values())
        rows.append(f"<tr><td>{html.escape(text)}</td>{cells}</tr>")
    return (
        '<h2 id="failback">Failback: the consumers back on A</h2>'
        '<p class="note">After the failover the consumers on B acknowledged about half of'
        " what they received; A came back, B's subscription state was synced to A, and the"
        " consumers moved home. A message is <em>twice on A</em> when it came on A after"
        " the move although a consumer had acknowledged it before, on A or on B.</p>"
        '<ul class="verdict failback">' + "".join(items) + "</ul>"
        '<div class="scroll"><table class="figures failback">' + "".join(rows) + "</table></div>"
    )
