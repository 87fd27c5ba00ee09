"""The report toolkit: what georep's three HTML pages share, and nothing of what they say.

The pages are the drill's ``report.html`` (``drill/report_page.py``, with
``drill/failback_page.py``), the audit's ``report.html`` (``spark_reconcile/report.py``)
and the gateway's live ``GET /status`` (``gateway/status_page.py``). Each is one
self-contained document (inline CSS and SVG, no script, nothing fetched), and each keeps
beside itself only the rules and charts that are its own.

- ``html_page.py``  the one stylesheet (type, colours, verdict lines, figure cells,
                    scrolling tables), the document's head, escaping, a figure's text
- ``svg_axis.py``   round axis ticks and the value axis the charts label

Imports point down: the pages import this package; it imports nothing of georep.
"""
