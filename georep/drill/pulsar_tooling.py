"""The Pulsar tooling the drill's real-Pulsar modes launch Pulsar with.

``--mode pulsar`` (``pulsar_topology.py``) and ``--beside-pulsar`` (``beside_pulsar.py``)
start real Apache Pulsar standalones with ``pulsar_tools`` (jars from Maven Central, the
standalone, Pulsar's admin REST). That package is development tooling beside georep in
a checkout, installed by ``make`` (``pip install -e ./pulsar_tools``), not part of
georep's runtime: the drill imports it where such a mode uses it, never at import, and
says what is missing when it is not there.
"""

from __future__ import annotations

import importlib.util

from georep.drill.errors import DrillError

#: What to do when the tooling is missing.
INSTALL_HINT = (
    "install the development package pulsar_tools of a georep checkout"
    " (pip install -e ./pulsar_tools; make does)"
)


def require_pulsar_tools(what: str) -> None:
    """DrillError naming ``what`` needs the tooling, when ``pulsar_tools`` is missing."""
    if importlib.util.find_spec("pulsar_tools") is None:
        raise DrillError(f"{what} launches real Apache Pulsar: {INSTALL_HINT}")
