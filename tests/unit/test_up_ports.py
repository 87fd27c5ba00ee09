"""``georep up`` and ports of 0: the port a process got is read from its ready line,
strictly, and every later start of that process asks for it (a cluster's arguments, a
gateway's TOML file)."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest

from georep.up.config import ClusterSpec, GatewaySpec, UpConfig
from georep.up.supervisor import (
    ReadyLineError,
    Supervised,
    Supervision,
    cluster_ports,
    gateway_port,
    with_cluster_ports,
    with_gateway_port,
)


def topology(tmp_path: Path, *, a_broker_port: int = 0) -> UpConfig:
    return UpConfig(
        data_dir=tmp_path,
        clusters={"A": ClusterSpec("A", a_broker_port, 0), "B": ClusterSpec("B", 0, 0)},
        gateways={"A": GatewaySpec("A", 0, {"public/default": ["B"]})},
    )


@pytest.mark.parametrize(
    ("detail", "ports"),
    [
        ("pulsar://127.0.0.1:60911 http://127.0.0.1:43043", (60911, 43043)),
        ("pulsar://127.0.0.1:1 https://127.0.0.1:65535", (1, 65535)),
        ("pulsar+ssl://127.0.0.1:6651 https://127.0.0.1:8443", (6651, 8443)),
        ("pulsar://::1:6650 http://::1:8080", (6650, 8080)),
        ("pulsar://[::1]:6650 http://[::1]:8080", (6650, 8080)),
        ("  pulsar://localhost:6650   http://localhost:8080 ", (6650, 8080)),
    ],
)
def test_a_cluster_ready_line_names_its_broker_and_admin_ports(detail, ports) -> None:
    assert cluster_ports(detail) == ports


@pytest.mark.parametrize(
    ("detail", "words"),
    [
        ("", "expected a pulsar:// URL and an http:// URL"),
        ("pulsar://127.0.0.1:6650", "expected a pulsar:// URL and an http:// URL"),
        ("pulsar://h:1 http://h:2 http://h:3", "expected a pulsar:// URL and an http:// URL"),
        ("http://127.0.0.1:8080 pulsar://127.0.0.1:6650", "not pulsar://HOST:PORT"),
        ("pulsar+tls://127.0.0.1:6651 https://127.0.0.1:8443", "not pulsar://HOST:PORT"),
        ("pulsar://127.0.0.1:6650 pulsar://127.0.0.1:8080", "not http://HOST:PORT"),
        ("127.0.0.1:6650 http://127.0.0.1:8080", "not pulsar://HOST:PORT"),
        ("pulsar://127.0.0.1 http://127.0.0.1:8080", "not pulsar://HOST:PORT"),
        ("pulsar://:6650 http://127.0.0.1:8080", "not pulsar://HOST:PORT"),
        ("pulsar://[]:6650 http://127.0.0.1:8080", "not pulsar://HOST:PORT"),
        ("pulsar://127.0.0.1:0 http://127.0.0.1:8080", "no port 1..65535"),
        ("pulsar://127.0.0.1:6650 http://127.0.0.1:65536", "no port 1..65535"),
        ("pulsar://127.0.0.1:6650 http://127.0.0.1:8080/", "no port 1..65535"),
        ("pulsar://127.0.0.1:-1 http://127.0.0.1:8080", "no port 1..65535"),
        ("pulsar://127.0.0.1:+80 http://127.0.0.1:8080", "no port 1..65535"),
        ("pulsar://127.0.0.1: http://127.0.0.1:8080", "no port 1..65535"),
        ("pulsar://127.0.0.1:١٢ http://127.0.0.1:8080", "no port 1..65535"),
    ],
)
def test_a_cluster_ready_line_without_its_ports_is_an_error(detail, words) -> None:
    with pytest.raises(ReadyLineError) as caught:
        cluster_ports(detail)
    assert words in str(caught.value) and str(caught.value).startswith("CLUSTER_READY ")


def test_a_gateway_ready_line_names_its_port() -> None:
    assert gateway_port("http://127.0.0.1:39001") == 39001
    assert gateway_port("https://[::1]:8443") == 8443


@pytest.mark.parametrize(
    "detail",
    ["", "http://127.0.0.1", "pulsar://127.0.0.1:8090", "http://h:1 http://h:2", "8090"],
)
def test_a_gateway_ready_line_without_its_port_is_an_error(detail) -> None:
    with pytest.raises(ReadyLineError, match=r"^GATEWAY_READY "):
        gateway_port(detail)


def test_learned_ports_replace_the_zeros_and_must_match_the_ports_asked_for(tmp_path) -> None:
    config = topology(tmp_path, a_broker_port=6650)
    learned = with_cluster_ports(config, "A", "pulsar://127.0.0.1:6650 http://127.0.0.1:43043")
    assert learned.clusters["A"] == ClusterSpec("A", 6650, 43043)
    assert learned.clusters["B"] == config.clusters["B"]
    with pytest.raises(ReadyLineError, match="asked for port 6650, the ready line says 6651"):
        with_cluster_ports(config, "A", "pulsar://127.0.0.1:6651 http://127.0.0.1:43043")
    with pytest.raises(ReadyLineError, match="asked for port 43043, the ready line says 43044"):
        with_cluster_ports(learned, "A", "pulsar://127.0.0.1:6650 http://127.0.0.1:43044")
    gateway = with_gateway_port(learned, "A", "http://127.0.0.1:39001")
    assert gateway.gateways["A"].port == 39001 and gateway.clusters == learned.clusters
    with pytest.raises(ReadyLineError, match="asked for port 39001"):
        with_gateway_port(gateway, "A", "http://127.0.0.1:39002")


def test_a_restart_asks_for_the_ports_the_first_start_got(tmp_path) -> None:
    supervision = Supervision(topology(tmp_path))
    cluster_a, cluster_b = supervision.clusters
    assert option(cluster_a.args, "--broker-port") == option(cluster_a.args, "--admin-port") == "0"
    for process, detail in (
        (cluster_a, "pulsar://127.0.0.1:40001 http://127.0.0.1:40002"),
        (cluster_b, "pulsar://127.0.0.1:40003 http://127.0.0.1:40004"),
    ):
        assert process.on_ready is not None
        process.on_ready(process, detail)
    assert option(cluster_a.args, "--broker-port") == "40001"
    assert option(cluster_a.args, "--admin-port") == "40002"
    assert option(cluster_b.args, "--broker-port") == "40003"

    supervision.add_gateways()
    (gateway,) = supervision.gateways
    path = tmp_path / "gateway-A" / "gateway.toml"
    written = tomllib.loads(path.read_text())
    assert written["gateway"]["listen"] == "127.0.0.1:0"
    assert written["local"]["service_url"] == "pulsar://127.0.0.1:40001"
    assert written["remotes"]["B"]["admin_url"] == "http://127.0.0.1:40004"
    assert gateway.on_ready is not None
    gateway.on_ready(gateway, "http://127.0.0.1:40005")
    assert tomllib.loads(path.read_text())["gateway"]["listen"] == "127.0.0.1:40005"
    assert supervision.config.gateways["A"].port == 40005
    assert supervision.config.clusters["B"] == ClusterSpec("B", 40003, 40004)


def option(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


async def test_an_unreadable_ready_line_stops_the_process_for_good(tmp_path) -> None:
    """The process is stopped and not restarted; up says why."""
    child = (
        "import time; print('CLUSTER_READY pulsar://127.0.0.1:6650', flush=True); time.sleep(600)"
    )
    process = Supervised(
        "cluster A", [sys.executable, "-c", child], "CLUSTER_READY", tmp_path / "a.log"
    )

    def ready(_: Supervised, detail: str) -> None:
        cluster_ports(detail)

    process.on_ready = ready
    await process.start()
    try:
        assert process.failure == (
            "CLUSTER_READY 'pulsar://127.0.0.1:6650': expected a pulsar:// URL and an http:// URL"
        )
        assert process.failure_code == 1 and process.restarts == 0
        assert process.process is not None and not process.process.running
    finally:
        await process.stop()
