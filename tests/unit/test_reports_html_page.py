"""The report toolkit's frame: one stylesheet first, the page's own rules after it, the
title escaped, a reload only when asked; and every page is built on it."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

import georep.reports
from georep.drill import report_page
from georep.gateway import status_page
from georep.reports.html_page import CSS, document_head, escape, figure_text
from georep.spark_reconcile import report


def test_the_head_holds_the_shared_rules_then_the_pages() -> None:
    head = document_head("a <b> & 'c'", ".mine { color: red }")
    assert head.startswith("<!doctype html>") and head.endswith("<body>")
    assert "<title>a &lt;b&gt; &amp; &#x27;c&#x27;</title>" in head
    assert head.index(CSS) < head.index(".mine { color: red }")
    assert "refresh" not in head
    assert '<meta http-equiv="refresh" content="5">' in document_head("t", refresh_s=5)


@pytest.mark.parametrize(
    ("value", "text"), [(3, "3"), (0.25, "0.25"), (1.5e6, "1.5e+06"), (2.0, "2")]
)
def test_figure_text(value: float, text: str) -> None:
    assert figure_text(value) == text


def test_escape_quotes_either_way() -> None:
    assert escape("""<'">""") == "&lt;&#x27;&quot;&gt;"
    assert escape(7) == "7"


@pytest.mark.parametrize("page", [report_page, status_page, report])
def test_every_page_uses_the_toolkits_head(page: object) -> None:
    source = inspect.getsource(page)  # type: ignore[arg-type]
    assert "document_head(" in source and "<style>" not in source


def test_the_toolkit_imports_nothing_of_georep() -> None:
    """``georep/reports/__init__.py``: the pages import the toolkit, never the reverse."""
    for path in Path(georep.reports.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                assert not (node.module or "").startswith("georep"), (path.name, node.module)
            elif isinstance(node, ast.Import):
                assert not any(a.name.startswith("georep") for a in node.names), path.name
