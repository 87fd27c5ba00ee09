"""The compose topology (docker/compose.yaml) with podman-compose, brought up once for this
file: replication end to end, both instances of A's gateway, and an alerting rule fired
and cleared for real in the topology's own Prometheus (docker/prometheus).

The Prometheus of this topology runs a copy of the shipped configuration and rules made
here: the same scrape targets and rule expressions, with scrapes and evaluations every
second and every rule's ``for`` cut to 3 s (``rules_holding_for``), so an alert fires
within seconds of its condition instead of minutes. How long each must hold is checked by
promtool's unit tests (tests/unit/test_alert_rules.py); the shipped files stay as they are.
"""

from __future__ import annotations

import functools
import os
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulsar
import pytest
import yaml

from tests.containers.conftest import ROOT
from tests.containers.test_sidecars import (
    NAMESPACE,
    TOKEN,
    client,
    eventually,
    free_port,
    gateway_json,
)
from tests.harness.prometheus import CONFIG, active_alerts, firing, rules_holding_for

#: Every rule's ``for`` in this topology's Prometheus (see the module's docstring).
RULE_FOR_S = 3
#: The gateway instances the topology's Prometheus scrapes (docker/prometheus/prometheus.yml).
GATEWAYS = ("gateway-a", "gateway-a2", "gateway-b", "gateway-c")


@dataclass(frozen=True)
class Compose:
    """A running compose project: its command line, environment and published ports."""

    command: list[str]
    env: dict[str, str]
    ports: dict[str, str]

    def run(self, *args: str, timeout_s: float = 600) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self.command, *args], env=self.env, capture_output=True,
                              text=True, timeout=timeout_s, check=False)  # fmt: skip

    def broker(self, cluster: str) -> str:
        return f"pulsar://127.0.0.1:{self.ports[f'GEOREP_PORT_{cluster}_BROKER']}"

    @property
    def prometheus(self) -> str:
        return f"http://127.0.0.1:{self.ports['GEOREP_PORT_PROMETHEUS']}"


def quick_prometheus_config(directory: Path) -> Path:
    """docker/prometheus's configuration and rules copied into ``directory``, scraping and
    evaluating every second, each rule's ``for`` RULE_FOR_S (the module's docstring)."""
    directory.mkdir(parents=True, exist_ok=True)
    config = yaml.safe_load(CONFIG.read_text())
    config["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
    (directory / CONFIG.name).write_text(yaml.safe_dump(config, sort_keys=False))
    (directory / "georep-alerts.yml").write_text(rules_holding_for(RULE_FOR_S))
    directory.chmod(0o755)  # read by the image's own user, not root
    for path in directory.iterdir():
        path.chmod(0o644)
    return directory


@pytest.fixture(scope="module")
def compose(
    georep_image: str,
    postgres_image: str,
    prometheus_image: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Compose]:
    project = f"georep-test-{uuid.uuid4().hex[:6]}"
    # Every published port free now, chosen by the kernel: a fixed port another process
    # holds would answer in our cluster's place.
    ports = {f"GEOREP_PORT_{cluster}_{kind}": str(free_port())
             for cluster in "ABC" for kind in ("BROKER", "ADMIN", "GATEWAY")}  # fmt: skip
    ports["GEOREP_PORT_A2_GATEWAY"] = str(free_port())  # A's gateway runs twice
    ports["GEOREP_PORT_PROMETHEUS"] = str(free_port())
    prometheus_config = quick_prometheus_config(tmp_path_factory.mktemp("prometheus"))
    env = {**os.environ, "GEOREP_IMAGE": georep_image, "GEOREP_TOKEN": TOKEN,
           "GEOREP_POSTGRES_IMAGE": postgres_image, "GEOREP_PROMETHEUS_IMAGE": prometheus_image,
           "GEOREP_PROMETHEUS_CONFIG": str(prometheus_config), **ports}  # fmt: skip
    topology = Compose(
        ["podman-compose", "-p", project, "-f", str(ROOT / "docker" / "compose.yaml")], env, ports
    )
    started = time.monotonic()
    up = topology.run("up", "-d")
    try:
        assert up.returncode == 0, up.stdout[-2000:] + up.stderr[-2000:]
        print(f"compose topology up in {time.monotonic() - started:.1f} s")
        yield topology
    finally:
        topology.run("down", "-v", timeout_s=300)
        # podman-compose 1.0 leaves the project's network behind; each one holds a subnet
        subprocess.run(["podman", "network", "rm", "-f", f"{project}_default"],
                       capture_output=True, timeout=60, check=False)  # fmt: skip


def two_members(ownership_url: str) -> bool:
    return len(gateway_json(ownership_url)["members"]) == 2


def test_compose_topology_end_to_end(compose: Compose):
    topic = f"persistent://{NAMESPACE}/compose-{uuid.uuid4().hex[:8]}"
    on_a = eventually(lambda: client(compose.broker("A")), "cluster A answers")
    on_c = client(compose.broker("C"))
    try:
        copies = eventually(
            lambda: on_c.subscribe(topic, "copies",
                                   initial_position=pulsar.InitialPosition.Earliest),
            "cluster C answers",
        )  # fmt: skip
        producer = eventually(lambda: on_a.create_producer(topic), "a producer on A")
        for index in range(20):
            producer.send(f"m{index}".encode())
        received = [copies.receive(120_000).data() for _ in range(20)]
        assert received == [f"m{i}".encode() for i in range(20)]
        # Both instances of A's gateway see each other through PostgreSQL.
        for port in ("GEOREP_PORT_A_GATEWAY", "GEOREP_PORT_A2_GATEWAY"):
            url = f"http://127.0.0.1:{compose.ports[port]}/admin/georep/v1/ownership"
            eventually(functools.partial(two_members, url), f"two members seen from {port}")
    finally:
        on_a.close()
        on_c.close()


def until_alerts(
    prometheus: str,
    condition: Callable[[list[dict[str, Any]]], bool],
    what: str,
    timeout_s: float,
) -> float:
    """Poll Prometheus's ``/api/v1/alerts`` until ``condition`` holds of its alerts; the
    seconds that took. Past ``timeout_s`` the test fails with the last answer."""
    started = time.monotonic()
    last: object = "no answer yet"
    while True:
        try:
            alerts = active_alerts(prometheus)
        except OSError as error:  # not up yet
            last = error
        else:
            if condition(alerts):
                return time.monotonic() - started
            last = [(a["labels"], a["state"]) for a in alerts]
        if time.monotonic() - started > timeout_s:
            pytest.fail(f"not within {timeout_s} s: {what}; the alerts API said last: {last}")
        time.sleep(0.5)


def scraped(prometheus: str) -> set[str]:
    """The gateway instances whose last scrape by Prometheus succeeded."""
    url = f"{prometheus}/api/v1/query?query=up%7Bjob%3D%22georep-gateway%22%7D%3D%3D1"
    with urllib.request.urlopen(url, timeout=10) as answer:
        result = yaml.safe_load(answer.read())["data"]["result"]
    return {series["metric"]["instance"].split(":")[0] for series in result}


def test_a_stopped_remote_fires_the_replication_alert_and_its_return_clears_it(
    compose: Compose,
):
    """Cluster C stopped: A's replicators to C lose their producer, the gateway exports
    ``georep_gateway_replicators_not_connected{remote_cluster="C"} > 0`` and the topology's
    Prometheus fires GeorepReplicationDisconnected; C started again, they reconnect and
    the alert clears. (GeorepReplicationStuck needs entries waiting for the watchdog's
    stuck_after_s, minutes by default; a stop disconnects at once.)"""
    alert, labels = "GeorepReplicationDisconnected", {"local_cluster": "A", "remote_cluster": "C"}
    eventually(lambda: scraped(compose.prometheus) >= set(GATEWAYS),
               "Prometheus scrapes every gateway", timeout_s=120)  # fmt: skip
    # A topic replicated A -> C, so that A's gateway runs replicators to C, connected.
    topic = f"persistent://{NAMESPACE}/alert-{uuid.uuid4().hex[:8]}"
    on_a = eventually(lambda: client(compose.broker("A")), "cluster A answers")
    on_c = client(compose.broker("C"))
    try:
        copies = eventually(
            lambda: on_c.subscribe(topic, "copies",
                                   initial_position=pulsar.InitialPosition.Earliest),
            "cluster C answers",
        )  # fmt: skip
        producer = eventually(lambda: on_a.create_producer(topic), "a producer on A")
        producer.send(b"before")
        assert copies.receive(120_000).data() == b"before"
    finally:
        on_a.close()
        on_c.close()
    until_alerts(compose.prometheus, lambda alerts: not firing(alerts, alert, **labels),
                 f"{alert} not firing with C up", timeout_s=60)  # fmt: skip

    stop = compose.run("stop", "cluster-c", timeout_s=120)
    assert stop.returncode == 0, stop.stdout[-2000:] + stop.stderr[-2000:]
    fired_s = until_alerts(
        compose.prometheus, lambda alerts: bool(firing(alerts, alert, **labels)),
        f"{alert} firing once cluster C stopped", timeout_s=120,
    )  # fmt: skip
    start = compose.run("start", "cluster-c", timeout_s=120)
    assert start.returncode == 0, start.stdout[-2000:] + start.stderr[-2000:]
    cleared_s = until_alerts(
        compose.prometheus,
        lambda alerts: not [a for a in alerts
                            if a["labels"] == {**a["labels"], "alertname": alert, **labels}],
        f"{alert} cleared once cluster C runs again", timeout_s=120,
    )  # fmt: skip
    print(f"{alert} fired {fired_s:.1f} s after C stopped, cleared {cleared_s:.1f} s after"
          " it started again")  # fmt: skip
