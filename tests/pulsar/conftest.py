"""Real Apache Pulsar standalones, started once per test session.

``pulsar_jars`` resolves Pulsar from Maven Central into the cache (``docs/PULSAR.md``);
``pulsar_pair`` is two standalones, A and B, with Pulsar's own geo-replication of the
namespace ``georep/geo`` between them and replicated subscriptions enabled. Tests give
their topics unique names, so they share the pair without seeing each other's data.

Every test that uses them runs once per Pulsar release of ``pulsar_version``: the
comma-separated ``$GEOREP_PULSAR_VERSIONS`` (CI names both LTS lines, 4.0.7 and 3.0.7),
else the one ``$GEOREP_PULSAR_VERSION`` chooses (default: the newest supported). A
release's tests run together, the pair of the previous release stopped first, and carry
it in their ids (``[pulsar-3.0.7]``), by which ``make test`` gives each release a worker
of its own (``tests/conftest.py``).

Without Java or Maven the tests are skipped with the reason, except in CI
(``CI=true``), where that is a failure: CI is where the anchor must be measured.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from pulsar_tools.admin import link_geo_replication
from pulsar_tools.standalone import (
    PulsarSetupError,
    PulsarStandalone,
    StandaloneSpec,
    java_missing,
    resolve_jars,
)
from pulsar_tools.standalone import pulsar_version as chosen_version
from tests.conftest import mark_items_under
from tests.harness.failover_checks import stamps_source_position

TENANT = "georep"
NAMESPACE = "geo"
#: Names the releases a session tests, comma-separated (``4.0.7,3.0.7``).
VERSIONS_ENV = "GEOREP_PULSAR_VERSIONS"


def tested_versions() -> list[str]:
    listed = os.environ.get(VERSIONS_ENV, "")
    return [v.strip() for v in listed.split(",") if v.strip()] or [chosen_version()]


VERSIONS = tested_versions()


def _version(item: pytest.Item) -> str | None:
    callspec = getattr(item, "callspec", None)
    version = callspec.params.get("pulsar_version") if callspec is not None else None
    return version if isinstance(version, str) else None


def _version_index(item: pytest.Item) -> int:
    version = _version(item)
    return VERSIONS.index(version) if version in VERSIONS else -1


@pytest.hookimpl(trylast=True)  # after pytest's own grouping by session parameters
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test here is a ``pulsar`` test; one marked ``kills_shared_pulsar`` runs after
    all the others that share the pair. A standalone restarted after SIGKILL is not the one
    it was: its bookie's registration in the RocksDB metadata store flaps for the rest of
    its life ("lock ... was invalidated", hundreds of thousands of times), and a new topic
    then fails now and then with "Not enough non-faulty bookies available". Each release's
    tests run together, in the order of ``VERSIONS``, so that each pair starts once."""
    mark_items_under(items, Path(__file__).parent, pytest.mark.pulsar)
    for item in items:
        version = _version(item)
        if item.get_closest_marker("needs_source_position") and version is not None:
            if not stamps_source_position(version):
                reason = f"Pulsar {version}'s replicator stamps no source position on copies"
                item.add_marker(pytest.mark.skip(reason=reason))
    items.sort(
        key=lambda item: (
            _version_index(item),
            item.get_closest_marker("kills_shared_pulsar") is not None,
        )
    )


@pytest.fixture(scope="session", params=VERSIONS, ids=lambda version: f"pulsar-{version}")
def pulsar_version(request: pytest.FixtureRequest) -> str:
    """The Pulsar release this test runs against."""
    version: str = request.param
    return version


@pytest.fixture(scope="session")
def pulsar_jars(pulsar_version: str) -> Path:
    missing = java_missing()
    if missing:
        if os.environ.get("CI") == "true":
            pytest.fail(f"real-Pulsar tests cannot run in CI: {missing}")
        pytest.skip(missing)
    return resolve_jars(pulsar_version)


@pytest.fixture(scope="session")
def pulsar_pair(pulsar_jars: Path, tmp_path_factory) -> Iterator[dict[str, PulsarStandalone]]:
    base = tmp_path_factory.mktemp("pulsar")
    pair = {
        name: PulsarStandalone(StandaloneSpec(name, base / name), pulsar_jars)
        for name in ("A", "B")
    }
    try:
        for standalone in pair.values():
            standalone.start()
            print(
                f"pulsar standalone {standalone.name} started in {standalone.start_seconds:.1f} s"
            )
        link_geo_replication(list(pair.values()), TENANT, NAMESPACE)
    except PulsarSetupError:
        for standalone in pair.values():
            standalone.stop()
        raise
    yield pair
    for standalone in pair.values():
        standalone.stop()


@pytest.fixture
def geo_topic() -> str:
    """A fresh topic in the geo-replicated namespace."""
    return f"persistent://{TENANT}/{NAMESPACE}/t-{uuid.uuid4().hex[:10]}"
