"""The alerting rules shipped for Prometheus (docker/prometheus/georep-alerts.yml): valid
for Prometheus, right on series shaped as gateways export them (promtool's rule unit
tests), and naming only metrics a gateway exports."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml

from georep.gateway import metrics
from tests.prometheus_tools import RULE_TESTS, RULES, tool


def promtool(*args: str) -> str:
    done = subprocess.run(
        [tool("promtool"), *args], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_promtool_checks_the_rules():
    assert "SUCCESS: 10 rules found" in promtool("check", "rules", str(RULES))


def test_the_rules_fire_and_clear_as_their_unit_tests_say():
    assert "SUCCESS" in promtool("test", "rules", str(RULE_TESTS))


def test_every_metric_a_rule_names_is_one_a_gateway_exports():
    source = Path(metrics.__file__).read_text(encoding="utf-8")
    groups = yaml.safe_load(RULES.read_text())["groups"]
    expressions = [rule["expr"] for group in groups for rule in group["rules"]]
    named = {m for e in expressions for m in re.findall(r"\b(georep_[a-z_]+)", e)}
    assert named, expressions
    assert {m for m in named if f'"{m}"' not in source} == set(), named
