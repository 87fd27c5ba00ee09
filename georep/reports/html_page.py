"""The frame of every report page: one stylesheet, the document's head, escaping.

``CSS`` holds the rules the pages share, in one palette (green ``#2f855a`` for good, red
``#c53030`` for bad, orange ``#c05621`` for a warning or a risk, grey ``#4a5568`` for
notes); a page adds its own rules after it (``document_head(title, page_css)``), so that
where a page says more, its rule wins.

The shared vocabulary, by class:

- ``ul.verdict`` of ``li.pass`` / ``li.fail`` / ``li.at-risk``, each with a
  ``span.word`` (the verdict in capitals) and a ``.why`` line under it;
- ``.bad`` / ``.ok`` / ``.warn`` on a figure (a ``span``, ``td`` or ``p``): red and bold,
  green, orange and bold; ``td.n`` a right-aligned number in tabular figures;
- ``.scroll`` a box that scrolls a wide table inside itself instead of widening the page;
- ``.note`` a grey aside; ``code`` wraps anywhere (a topic is one long word).

The colour classes are scoped to the elements that carry a figure, so that a page's own
``tr.bad`` (a row's background) or ``div.ok`` keeps only its own rule.
"""

from __future__ import annotations

import html
from typing import Any

CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 1.5em 2em;
  color: #1a202c }
h1 { font-size: 1.5em; margin-bottom: .2em } h2 { font-size: 1.15em; margin: 0 0 .3em }
.verdict { list-style: none; padding: 0; margin: 1em 0 }
.verdict li { border-left: 6px solid #2f855a; background: #f0fff4; padding: .5em .9em;
  margin: 0 0 .6em }
.verdict li.fail { border-color: #c53030; background: #fff5f5 }
.verdict li.at-risk { border-color: #c05621; background: #fffaf0 }
.verdict .head { font-size: 1.05em } .verdict .why { margin: .2em 0 0; color: #2d3748 }
.word { text-transform: uppercase; font-weight: 700; letter-spacing: .04em }
.pass .word { color: #2f855a } .fail .word { color: #c53030 } .at-risk .word { color: #c05621 }
.scroll { overflow-x: auto; max-width: 100% }
td.n { text-align: right; font-variant-numeric: tabular-nums }
:is(span, td, p).bad { color: #c53030; font-weight: 600 } :is(span, td, p).ok { color: #2f855a }
:is(span, td, p).warn { color: #c05621; font-weight: 600 }
.note { color: #4a5568 } code { font-size: .92em; overflow-wrap: anywhere }
"""


def document_head(title: str, page_css: str = "", *, refresh_s: int | None = None) -> str:
    """From ``<!doctype html>`` to ``<body>``: ``title`` (escaped here), the shared ``CSS``
    then ``page_css``, and with ``refresh_s`` a reload every that many seconds."""
    refresh = f'<meta http-equiv="refresh" content="{refresh_s}">' if refresh_s else ""
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"{refresh}"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{CSS}{page_css}</style></head><body>"
    )


def escape(value: Any) -> str:
    """``value`` as text inside an element or a quoted attribute (either quote)."""
    return html.escape(str(value), quote=True)


def figure_text(value: float | int) -> str:
    """A figure as a table cell prints it: ``3``, ``0.25``, ``1.5e+06`` (``:g``)."""
    return f"{value:g}" if isinstance(value, float) else str(value)
