"""Configuration mistakes of ``georep cluster`` and ``georep gateway`` are one line on
stderr, ``georep <command>: error: ...``, and exit code 2, before anything starts: no
traceback, no timestamp, no logger name, and no data directory or metadata created."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.timeout(120)]

NO_TOKENS = {"GEOREP_ADMIN_TOKENS": "", "GEOREP_GATEWAY_TOKENS": ""}


def georep(*args: str, cwd: Path, env: dict[str, str] | None = None):
    return subprocess.run(
        [sys.executable, "-m", "georep", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env={**os.environ, **NO_TOKENS, **(env or {})},
    )


def one_line_exit_2(done, command: str, words: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"georep {command}: error: "), lines
    assert words in lines[0], lines


@pytest.fixture
def taken_port():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield taken.getsockname()[1]


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--broker-port", "7601", "--admin-port", "7601"], "both want port 7601"),
        (["--host", "nowhere.invalid"], "is not an address"),
        (["--admin-host", "192.0.2.1"], "not an address of this machine"),
        (["--host", "0.0.0.0", "--broker-port", "0", "--admin-port", "0"], "--insecure"),
        (["--metadata", "mysql://x/y"], "use sqlite:///path.db"),
        (["--name", "..", "--broker-port", "0", "--admin-port", "0"], "path step"),
    ],
)
def test_cluster_mistakes(tmp_path, flags, words) -> None:
    args = ["cluster", "--name", "A", "--data", str(tmp_path / "data"), *flags]
    one_line_exit_2(georep(*args, cwd=tmp_path), "cluster", words)
    assert not (tmp_path / "data").exists()


def test_a_cluster_port_in_use(tmp_path, taken_port) -> None:
    done = georep(
        "cluster", "--name", "A", "--data", str(tmp_path / "data"),
        "--broker-port", "0", "--admin-port", str(taken_port), cwd=tmp_path,
    )  # fmt: skip
    one_line_exit_2(done, "cluster", f"port {taken_port} on 127.0.0.1 is in use")


def test_an_insecure_cluster_beyond_loopback_is_the_operators_choice(tmp_path) -> None:
    done = georep(
        "cluster", "--name", "A", "--data", str(tmp_path / "data"), "--host", "0.0.0.0",
        "--broker-port", "0", "--admin-port", "0", "--metadata", "mysql://x/y", "--insecure",
        cwd=tmp_path,
    )  # fmt: skip
    one_line_exit_2(done, "cluster", "use sqlite:///path.db")  # past the exposure check


GATEWAY = """
[gateway]
listen = "{listen}"
metadata = "{metadata}"

[local]
name = "A"
service_url = "pulsar://127.0.0.1:6650"
admin_url = "http://127.0.0.1:8080"

[remotes.B]
service_url = "pulsar://127.0.0.1:6651"
admin_url = "http://127.0.0.1:8081"
"""


@pytest.mark.parametrize(
    ("listen", "metadata", "words"),
    [
        ("0.0.0.0:0", "sqlite:///gw.db", "--insecure"),
        ("nowhere.invalid:0", "sqlite:///gw.db", "is not an address"),
        ("127.0.0.1:0", "mysql://x/y", "[gateway] metadata"),
        ("127.0.0.1:99999", "sqlite:///gw.db", "host:port"),
    ],
)
def test_gateway_mistakes(tmp_path, listen, metadata, words) -> None:
    path = tmp_path / "gateway.toml"
    path.write_text(GATEWAY.format(listen=listen, metadata=metadata))
    one_line_exit_2(georep("gateway", "--config", str(path), cwd=tmp_path), "gateway", words)
    assert not (tmp_path / "gw.db").exists()


def test_a_gateway_port_in_use(tmp_path, taken_port) -> None:
    path = tmp_path / "gateway.toml"
    path.write_text(GATEWAY.format(listen=f"127.0.0.1:{taken_port}", metadata="sqlite:///gw.db"))
    done = georep("gateway", "--config", str(path), cwd=tmp_path)
    one_line_exit_2(done, "gateway", f"port {taken_port} on 127.0.0.1 is in use")
