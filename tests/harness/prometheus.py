"""Prometheus's own tools for the alerting rules (docker/prometheus/): ``promtool`` and
``prometheus`` from Debian's package, which ``.ci/run`` installs. Without them a test
is skipped on a developer's machine and fails in CI."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.harness.broker_cluster import free_port

RULES_DIR = Path(__file__).resolve().parents[2] / "docker" / "prometheus"
RULES = RULES_DIR / "georep-alerts.yml"
RULE_TESTS = RULES_DIR / "georep-alerts.test.yml"
#: The compose topology's Prometheus configuration: every gateway, the rules beside it.
CONFIG = RULES_DIR / "prometheus.yml"


def rules_holding_for(seconds: int) -> str:
    """The shipped rules with every ``for`` cut to ``seconds``: the same expressions, so
    what fires is what the shipped rules would fire, sooner (how long an alert must hold
    is promtool's unit tests' business)."""
    return re.sub(r"(?m)^(\s+)for: \S+$", rf"\1for: {seconds}s", RULES.read_text())


def active_alerts(url: str) -> list[dict[str, Any]]:
    """Prometheus's pending and firing alerts, as ``GET /api/v1/alerts`` lists them."""
    with urllib.request.urlopen(f"{url}/api/v1/alerts", timeout=10) as answer:
        alerts: list[dict[str, Any]] = json.load(answer)["data"]["alerts"]
    return alerts


def firing(alerts: list[dict[str, Any]], alert: str, **labels: str) -> list[dict[str, Any]]:
    """Of ``alerts``, those named ``alert`` firing now whose labels include ``labels``."""
    return [
        a
        for a in alerts
        if a["labels"].get("alertname") == alert
        and a["state"] == "firing"
        and all(a["labels"].get(k) == v for k, v in labels.items())
    ]


def tool(name: str) -> str:
    path = shutil.which(name)
    if path:
        return path
    if os.environ.get("CI") == "true":
        pytest.fail(f"{name} is not installed (.ci/run installs Debian's prometheus)")
    pytest.skip(f"{name} is not installed: apt-get install prometheus")


class PrometheusProcess:
    """A real Prometheus on 127.0.0.1 scraping ``targets`` (host:port) every second under
    job ``georep-gateway`` and evaluating the shipped rules every second, with each
    rule's ``for`` cut to a second: what fires and clears is the rules' expressions on a
    gateway's real metrics; how long an alert must hold is promtool's unit tests'."""

    def __init__(self, directory: Path, targets: list[str]) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.port = free_port()
        (directory / "rules.yml").write_text(rules_holding_for(1))
        (directory / "prometheus.yml").write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "rule_files:\n  - rules.yml\n"
            "scrape_configs:\n  - job_name: georep-gateway\n    static_configs:\n"
            f"      - targets: {json.dumps(targets)}\n"
        )
        self.log_path = directory / "prometheus.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 60) -> None:
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [
                    tool("prometheus"),
                    f"--config.file={self.directory / 'prometheus.yml'}",
                    f"--storage.tsdb.path={self.directory / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.directory,
            )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"prometheus exited: {self.log_path.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=5) as answer:
                    if answer.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"prometheus not ready in {timeout_s} s; see {self.log_path}")

    def firing(self, alert: str, **labels: str) -> list[dict[str, Any]]:
        """The alerts named ``alert`` firing now whose labels include ``labels``."""
        return firing(active_alerts(self.url), alert, **labels)

    def __enter__(self) -> PrometheusProcess:
        self.start()
        return self

    def __exit__(self, *_exc_info: object) -> None:
        self.stop()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
