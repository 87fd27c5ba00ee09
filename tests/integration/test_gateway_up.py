"""``georep up``: the three-cluster example brought up with every port 0 (each process
picks its own) and tokens on (from token files named in the file, or from the
environment); its demo shows messages crossing as the policies say; a killed child is
restarted on the ports it had; SIGTERM stops all; a mistake in the file or on the machine
is one line and exit code 2, with nothing started."""

from __future__ import annotations

import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "three-clusters.toml"


ADMIN_TOKEN = "up-admin-token-0123456789"
GATEWAY_TOKEN = "up-gateway-token-0123456789"
NO_TOKENS = {"GEOREP_ADMIN_TOKENS": "", "GEOREP_GATEWAY_TOKENS": ""}


def config_on_free_ports(tmp_path: Path, extra: str = "") -> Path:
    text = re.sub(r"(broker_port|admin_port|port) = \d+", r"\1 = 0", EXAMPLE.read_text())
    path = tmp_path / "topology.toml"
    path.write_text(text + "\n" + extra)
    return path


def with_token_files(tmp_path: Path) -> str:
    """A [tokens] table naming two token files (written beside the topology file)."""
    (tmp_path / "admin-tokens").write_text(f"# the clusters'\n{ADMIN_TOKEN}\n")
    (tmp_path / "gateway-tokens").write_text(f"{GATEWAY_TOKEN}\n")
    return '[tokens]\nadmin_file = "admin-tokens"\ngateway_file = "gateway-tokens"\n'


class Up:
    def __init__(
        self, tmp_path: Path, *extra: str, env: dict[str, str] | None = None, toml: str = ""
    ) -> None:
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        args = [
            sys.executable,
            "-m",
            "georep",
            "up",
            "--config",
            str(config_on_free_ports(tmp_path, toml)),
        ]
        args += ["--data", str(tmp_path / "data"), *extra]
        with open(tmp_path / "up.log", "ab") as log:  # the child holds its own copy
            self.process = subprocess.Popen(
                args,
                stdout=subprocess.PIPE,
                stderr=log,
                env={**os.environ, **NO_TOKENS, "PYTHONUNBUFFERED": "1", **(env or {})},
                text=True,
            )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None  # stdout=PIPE
        with self.process.stdout:  # closed at its end: up and its children gone
            for line in self.process.stdout:
                self.lines.put(line.rstrip("\n"))

    def expect(self, pattern: str, timeout_s: float = 90) -> re.Match:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                break
            self.seen.append(line)
            match = re.search(pattern, line)
            if match:
                return match
        raise AssertionError(f"no line matching {pattern!r}; saw:\n" + "\n".join(self.seen))

    def kill(self) -> None:
        """Stop up and everything it runs: SIGTERM (up stops its children), SIGKILL only
        if that hangs."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(90)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(30)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_demo_shows_the_topology_with_tokens_from_files(tmp_path) -> None:
    up = Up(tmp_path, "--demo", toml=with_token_files(tmp_path))
    try:
        up.expect(r"^UP_READY 6 processes")
        assert not [line for line in up.seen if "OPEN" in line], up.seen
        up.expect(r"demo: cluster A holds from-A x5, from-B x5  \[ok\]")
        up.expect(r"demo: cluster B holds from-A x5, from-B x5  \[ok\]")
        up.expect(r"demo: cluster C holds from-A x5, from-C x5  \[ok\]")
        up.expect(r"every cluster holds what its policies say")
        # the replicated subscription fails over with exactly what A left unacked
        up.expect(
            r"demo: failed over to C: demo-app received \['from-A-1', 'from-A-3', 'from-C-0'"
            r".*\[ok\]"
        )
        up.expect(r"demo: failed over to B: demo-app received \['from-A-1', 'from-A-3'\]  \[ok\]")
        assert up.process.wait(60) == 0
    finally:
        up.kill()


def test_children_are_restarted_on_their_ports_and_stopped_with_tokens_from_the_environment(
    tmp_path,
):
    """Every port is 0 in the file: a killed child comes back on the ports it reported at
    its first start, which its peers were told."""
    env = {"GEOREP_ADMIN_TOKENS": ADMIN_TOKEN, "GEOREP_GATEWAY_TOKENS": GATEWAY_TOKEN}
    up = Up(tmp_path, env=env)
    try:
        pids, urls = {}, {}
        for _ in range(6):
            match = up.expect(r"\] (cluster|gateway) (\w+)\s+running\s+pid (\d+)\s+(\S.*)$")
            pids[f"{match[1]} {match[2]}"] = int(match[3])
            urls[f"{match[1]} {match[2]}"] = match[4]
        assert re.fullmatch(r"pulsar://127\.0\.0\.1:\d+ http://127\.0\.0\.1:\d+", urls["cluster B"])
        assert not [url for url in urls.values() if re.search(r":0\b", url)], urls
        up.expect(r"^UP_READY")
        gateway_toml = (tmp_path / "data" / "gateway-A" / "gateway.toml").read_text()
        assert f'listen = "{urls["gateway A"].removeprefix("http://")}"' in gateway_toml
        b_broker, b_admin = urls["cluster B"].split()
        assert f'service_url = "{b_broker}"' in gateway_toml  # A's remote B
        assert f'admin_url = "{b_admin}"' in gateway_toml
        cluster_b = up.expect(r"cluster B\s+pulsar://\S+ (http://\S+)")[1]
        gateway_a = up.expect(r"gateway A\s+(http://\S+)")[1]
        for url, token in ((gateway_a, GATEWAY_TOKEN), (cluster_b, ADMIN_TOKEN)):
            assert (
                get(
                    f"{url}/admin/georep/v1/stats"
                    if url == gateway_a
                    else f"{url}/admin/v2/tenants",
                    None,
                )
                == 401
            )
            assert (
                get(
                    f"{url}/admin/georep/v1/stats"
                    if url == gateway_a
                    else f"{url}/admin/v2/tenants",
                    token,
                )
                == 200
            )
        for label in ("gateway A", "cluster B"):
            os.kill(pids[label], signal.SIGKILL)
            up.expect(rf"{label}\s+restarting\s+exit -9")
            match = up.expect(rf"{label}\s+running\s+pid (\d+)\s+(\S.*)$")
            pids[label] = int(match[1])
            assert match[2] == urls[label], f"{label} came back on other ports"
        assert get(f"{gateway_a}/admin/georep/v1/stats", GATEWAY_TOKEN) == 200
        assert get(f"{cluster_b}/admin/v2/tenants", ADMIN_TOKEN) == 200

        up.process.send_signal(signal.SIGTERM)
        assert up.process.wait(90) == 0
        for label, pid in pids.items():
            assert not alive(pid), f"{label} (pid {pid}) outlived georep up"
    finally:
        up.kill()


def get(url: str, token: str | None) -> int:
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status
    except urllib.error.HTTPError as error:
        return error.code


def test_an_open_topology_says_so_on_the_console(tmp_path) -> None:
    up = Up(tmp_path)
    try:
        up.expect(r"^warning: the clusters' admin REST is OPEN")
        up.expect(r"^warning: the gateways' REST is OPEN")
        up.expect(r"^UP_READY 6 processes")
    finally:
        up.kill()


def run_up(tmp_path: Path, toml: str, *extra: str, env: dict[str, str] | None = None):
    path = tmp_path / "bad.toml"
    path.write_text(toml)
    return subprocess.run(
        [sys.executable, "-m", "georep", "up", "--config", str(path), *extra],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **NO_TOKENS, **(env or {})},
        cwd=tmp_path,
    )


@pytest.mark.parametrize(
    ("toml", "words"),
    [
        ("[clusters.A]\nbroker_port = 7501\nadmin_port = 7501\n", "both want port 7501"),
        ('host = "nowhere.invalid"\n[clusters.A]\n', "is not an address"),
        ('host = "192.0.2.1"\n[clusters.A]\n', "not an address of this machine"),
        ('host = "0.0.0.0"\n[clusters.A]\n', "--insecure"),
        ("[clusters.A]\nbroker_port = 99999\n", "port number 0..65535"),
        ('[tokens]\nadmin_file = "missing"\n[clusters.A]\n', "cannot read token file"),
        ("[clusters.A]\n[gateways.B]\n", "there is no [clusters.B]"),
        ('[tls]\nenabled = "yes"\n[clusters.A]\n', "[tls] enabled must be true or false"),
    ],
)
def test_mistakes_are_one_line_and_exit_2(tmp_path, toml, words) -> None:
    done = run_up(tmp_path, toml)
    assert done.returncode == 2, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("georep up: ") and words in lines[0], lines
    assert not (tmp_path / "georep-up-data").exists(), "nothing may start"


def test_a_port_in_use_is_one_line_and_exit_2(tmp_path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run_up(tmp_path, f"[clusters.A]\nadmin_port = {port}\n")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"georep up: error: [clusters.A] admin_port: port {port} on 127.0.0.1 is in use"
    )
