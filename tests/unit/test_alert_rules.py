"""The alerting rules shipped for Prometheus (docker/prometheus/georep-alerts.yml): valid
for Prometheus, right on series shaped as gateways export them (promtool's rule unit
tests), and naming only metrics a gateway exports."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml

from georep.gateway import metrics
from tests.harness.prometheus import CONFIG, RULE_TESTS, RULES, RULES_DIR, tool


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


def test_the_compose_prometheus_config_is_valid_and_scrapes_every_gateway():
    """docker/prometheus/prometheus.yml, which the compose topology's Prometheus runs:
    promtool accepts it and the rules it loads, and it scrapes each gateway service of
    docker/compose.yaml (a gateway added there and not here would go unwatched)."""
    assert "SUCCESS" in promtool("check", "config", str(CONFIG))
    compose = yaml.safe_load((RULES_DIR.parent / "compose.yaml").read_text())
    gateways = {f"{name}:8090" for name in compose["services"] if name.startswith("gateway-")}
    jobs = yaml.safe_load(CONFIG.read_text())["scrape_configs"]
    (job,) = [job for job in jobs if job["job_name"] == "georep-gateway"]
    targets = {target for group in job["static_configs"] for target in group["targets"]}
    assert gateways and targets == gateways, (targets, gateways)
