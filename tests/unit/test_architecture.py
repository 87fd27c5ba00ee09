"""docs/ARCHITECTURE.md's claims about the layout, checked against the tree: georep's root
holds exactly what "The root" lists, and every package's ``__init__`` docstring says what
the package owns."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import georep

ROOT = Path(georep.__file__).parent
ARCHITECTURE = ROOT.parent / "docs" / "ARCHITECTURE.md"


def listed_in_root_section() -> set[str]:
    """The names the section "The root (`georep/`)" lists: the code spans that open its
    bullets (``- `domain/`: ...``, ``- `__init__.py`, `cli.py`: ...``)."""
    text = ARCHITECTURE.read_text()
    section = text.split("## The root (`georep/`)", 1)[1].split("\n## ", 1)[0]
    names: set[str] = set()
    for line in section.splitlines():
        if line.startswith("- "):
            head = line[2:].split(":", 1)[0]
            names.update(re.findall(r"`([\w.]+/?)`", head))
    return names


def in_root() -> set[str]:
    names = {path.name for path in ROOT.glob("*.py")}
    names |= {path.parent.name + "/" for path in ROOT.glob("*/__init__.py")}
    return names


def test_the_root_holds_what_the_architecture_lists() -> None:
    listed = listed_in_root_section()
    assert len(listed) > 10, "the section was not read"
    assert in_root() == listed


def test_every_package_says_what_it_owns() -> None:
    packages = sorted(ROOT.rglob("__init__.py"))
    assert len(packages) > 10
    silent = [
        str(path.relative_to(ROOT.parent))
        for path in packages
        if not (ast.get_docstring(ast.parse(path.read_text())) or "").strip()
    ]
    assert silent == []


def test_the_gateway_reaches_subscription_sync_through_its_face() -> None:
    """docs/ARCHITECTURE.md: the gateway reaches sync only through what
    ``georep/subsync/__init__.py`` exports, and only sync's core changes a core."""
    reaching_in = []
    for path in sorted((ROOT / "gateway").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "georep.subsync."
            ):
                reaching_in.append(f"{path.name}: from {node.module} import ...")
            if isinstance(node, ast.Import):
                reaching_in += [
                    f"{path.name}: import {alias.name}"
                    for alias in node.names
                    if alias.name.startswith("georep.subsync.")
                ]
            if isinstance(node, ast.Attribute) and node.attr == "core":
                reaching_in.append(f"{path.name}:{node.lineno}: .core")
    assert reaching_in == []
