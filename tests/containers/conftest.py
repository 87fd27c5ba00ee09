"""The georep image on a container engine, for the sidecar tests (``docker/README.md``).

``container_engine`` makes the machine ready once per session with
``docker/prepare-podman.sh`` (podman configured, the Debian base image, the
Docker-compatible API socket; idempotent) and exports what testcontainers needs;
``georep_image`` builds ``localhost/georep:test`` from this checkout once per session with
``docker/build-image.sh``. Where no engine can be started (no podman and not root), the
tests are skipped with the reason, except in CI (``CI=true``), where that is a failure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import mark_items_under

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "localhost/georep:test"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mark_items_under(items, Path(__file__).parent, pytest.mark.containers, pytest.mark.timeout(600))


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"container tests cannot run in CI: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def container_engine() -> dict[str, str]:
    if shutil.which("podman") is None and os.geteuid() != 0:
        _unavailable("no podman, and not root to install it (see docker/README.md)")
    started = time.monotonic()
    result = subprocess.run(
        ["bash", str(ROOT / "docker" / "prepare-podman.sh")],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    if result.returncode != 0:
        _unavailable(f"docker/prepare-podman.sh failed: {result.stderr[-1500:]}")
    exports = {}
    for line in result.stdout.splitlines():
        if line.startswith("export "):
            for pair in line.removeprefix("export ").split():
                key, _, value = pair.partition("=")
                exports[key] = value
    os.environ.update(exports)
    print(f"container engine ready in {time.monotonic() - started:.1f} s: {exports}")
    return exports


@pytest.fixture(scope="session")
def georep_image(container_engine: dict[str, str]) -> str:
    started = time.monotonic()
    result = subprocess.run(
        ["bash", str(ROOT / "docker" / "build-image.sh")],
        capture_output=True, text=True, timeout=900, check=False, cwd=ROOT,
        env={**os.environ, "IMAGE": IMAGE, "PYTHON": sys.executable},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    print(f"{IMAGE} built in {time.monotonic() - started:.1f} s: {result.stderr.strip()}")
    return IMAGE


def build_on_base(engine: dict[str, str], image: str, context: Path) -> str:
    """``context``'s Dockerfile built as ``image`` on the local base image."""
    started = time.monotonic()
    result = subprocess.run(
        ["podman", "build", "--format", "docker", "--quiet", "--build-arg",
         f"BASE_IMAGE={engine['GEOREP_BASE_IMAGE']}", "-t", image, str(context)],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    print(f"{image} built in {time.monotonic() - started:.1f} s")
    return image


@pytest.fixture(scope="session")
def postgres_image(container_engine: dict[str, str]) -> str:
    """docker/postgres on the local base: what the compose file's postgres:16 stands for."""
    return build_on_base(
        container_engine, "localhost/georep-postgres:test", ROOT / "docker" / "postgres"
    )


@pytest.fixture(scope="session")
def prometheus_image(container_engine: dict[str, str]) -> str:
    """docker/prometheus on the local base: Debian's Prometheus, for the compose topology."""
    return build_on_base(
        container_engine, "localhost/georep-prometheus:test", ROOT / "docker" / "prometheus"
    )
