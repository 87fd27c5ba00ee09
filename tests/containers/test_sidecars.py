"""georep as sidecars in containers, as deployed: two clusters and a gateway beside each on
one container network, driven from the host with the official client through published
ports. The gateway container is killed and started again: nothing lost, nothing twice.
The compose topology (docker/compose.yaml) has its own file: test_compose.py.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import socket
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pulsar
import pytest
from testcontainers.core.container import DockerContainer
from testcontainers.core.network import Network

TOKEN = "sidecar-test-token"
NAMESPACE = "public/default"


def eventually(condition: Callable[[], object], what: str, timeout_s: float = 90.0):
    deadline = time.monotonic() + timeout_s
    last: Exception | None
    while True:
        try:
            value = condition()
        except Exception as error:  # not up yet
            value, last = None, error
        else:
            last = None
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"not within {timeout_s} s: {what} (last error: {last})")
        time.sleep(0.5)


def gateway_json(url: str) -> dict:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.loads(answer.read())


def client(url: str) -> pulsar.Client:
    return pulsar.Client(
        url,
        operation_timeout_seconds=30,
        logger=pulsar.FileLogger(pulsar.LoggerLevel.Error, os.devnull),
    )


def gateway_toml(local: str, remote: str) -> str:
    return f"""
[gateway]
listen = "0.0.0.0:8090"
metadata = "sqlite:////var/lib/georep/gateway-{local}.db"
discovery_interval_s = 0.5

[local]
name = "{local}"
service_url = "pulsar://cluster-{local.lower()}:6650"
admin_url = "http://cluster-{local.lower()}:8080"
token_env = "GEOREP_CLUSTER_TOKEN"

[remotes.{remote}]
service_url = "pulsar://cluster-{remote.lower()}:6650"
admin_url = "http://cluster-{remote.lower()}:8080"
token_env = "GEOREP_CLUSTER_TOKEN"

[policies.namespaces]
"{NAMESPACE}" = ["{remote}"]
"""


def cluster_container(image: str, network: Network, name: str) -> DockerContainer:
    return (
        DockerContainer(image)
        .with_network(network)
        .with_network_aliases(f"cluster-{name.lower()}")
        .with_env("GEOREP_ADMIN_TOKENS", TOKEN)
        .with_exposed_ports(6650, 8080)
        .with_command(
            f"cluster --name {name} --data /var/lib/georep/{name} --host 0.0.0.0"
            " --broker-port 6650 --admin-host 0.0.0.0 --admin-port 8080"
        )
    )


def gateway_container(image: str, network: Network, name: str, config: Path) -> DockerContainer:
    return (
        DockerContainer(image)
        .with_network(network)
        .with_network_aliases(f"gateway-{name.lower()}")
        .with_env("GEOREP_CLUSTER_TOKEN", TOKEN)
        .with_env("GEOREP_GATEWAY_TOKENS", TOKEN)
        .with_env("GEOREP_HEALTH_URL", "http://127.0.0.1:8090/health")
        .with_volume_mapping(str(config), "/etc/georep/gateway.toml", "ro")
        .with_exposed_ports(8090)
        .with_command("gateway --config /etc/georep/gateway.toml")
    )


def broker_url(container: DockerContainer) -> str:
    return f"pulsar://127.0.0.1:{container.get_exposed_port(6650)}"


def ready_line(container: DockerContainer, prefix: str) -> bool:
    stdout, _ = container.get_logs()
    return prefix.encode() in stdout


@pytest.fixture
def sidecars(georep_image: str, tmp_path: Path) -> Iterator[dict[str, DockerContainer]]:
    started = time.monotonic()
    network = Network()
    # Its Docker client closed after the network is removed: testcontainers leaves it open,
    # and its pooled socket would be an unclosed socket (a ResourceWarning, an error here)
    # wherever the collector met it. Each container's own client closes when it stops.
    with contextlib.closing(network._docker.client), network:
        containers: dict[str, DockerContainer] = {}
        try:
            for name in ("A", "B"):
                containers[name] = cluster_container(georep_image, network, name).start()
            for name in ("A", "B"):
                eventually(functools.partial(ready_line, containers[name], "CLUSTER_READY"),
                           f"cluster {name} ready")  # fmt: skip
            for local, remote in (("A", "B"), ("B", "A")):
                config = tmp_path / f"gateway-{local}.toml"
                config.write_text(gateway_toml(local, remote))
                config.chmod(0o644)  # read by the image's non-root user
                containers[f"gateway-{local}"] = gateway_container(
                    georep_image, network, local, config
                ).start()
            for local in ("A", "B"):
                gateway = containers[f"gateway-{local}"]
                eventually(functools.partial(ready_line, gateway, "GATEWAY_READY"),
                           f"gateway {local} ready")  # fmt: skip
            print(f"two clusters and two gateways ready in {time.monotonic() - started:.1f} s")
            yield containers
        finally:
            for container in containers.values():
                container.stop()


def test_sidecars_replicate_and_a_killed_gateway_resumes_without_loss_or_duplicates(sidecars):
    topic = f"persistent://{NAMESPACE}/sidecar-{uuid.uuid4().hex[:8]}"
    on_a, on_b = client(broker_url(sidecars["A"])), client(broker_url(sidecars["B"]))
    try:
        copies = on_b.subscribe(topic, "copies", initial_position=pulsar.InitialPosition.Earliest)
        producer = on_a.create_producer(topic, batching_enabled=False)
        for index in range(100):
            producer.send(f"m{index}".encode())
        first = [copies.receive(90_000).data() for _ in range(100)]
        assert first == [f"m{i}".encode() for i in range(100)]
        for message in first:
            assert message  # every copy arrived once, in order

        gateway = sidecars["gateway-A"].get_wrapped_container()
        gateway.kill()  # SIGKILL: no shutdown path runs
        for index in range(100, 200):
            producer.send(f"m{index}".encode())
        gateway.start()
        second = [copies.receive(90_000).data() for _ in range(100)]
        assert second == [f"m{i}".encode() for i in range(100, 200)]
        with pytest.raises(pulsar.Timeout):  # nothing twice
            copies.receive(3_000)
    finally:
        on_a.close()
        on_b.close()


def test_health_checks_pass_and_the_image_says_what_reconcile_lacks(sidecars, georep_image):
    for name in ("A", "gateway-A"):
        container_id = sidecars[name].get_wrapped_container().id
        check = subprocess.run(["podman", "healthcheck", "run", container_id],
                               capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
        assert check.returncode == 0, (name, check.stdout, check.stderr)
    # Only runtime dependencies are in the image: no PySpark, and reconcile says so.
    run = subprocess.run(
        ["podman", "run", "--rm", georep_image, "reconcile", "--input", "a", "b", "--out", "o"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert run.returncode == 2, run.stderr
    assert "PySpark is not installed" in run.stderr and "Traceback" not in run.stderr


def test_a_container_stops_cleanly_on_sigterm(sidecars):
    cluster = sidecars["B"].get_wrapped_container()
    cluster.stop(timeout=30)  # docker stop: SIGTERM, then SIGKILL after 30 s
    cluster.reload()
    assert cluster.attrs["State"]["ExitCode"] == 0, cluster.logs()[-2000:]


def free_port() -> int:
    """A port no socket on 127.0.0.1 holds right now (the kernel's choice for port 0)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
