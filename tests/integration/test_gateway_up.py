"""``georep up``: the three-cluster example brought up on free ports; its demo shows
messages crossing as the policies say; a killed child is restarted; SIGTERM stops all."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "three-clusters.toml"


def config_on_free_ports(tmp_path: Path) -> Path:
    text = re.sub(r"(broker_port|admin_port|port) = \d+", r"\1 = 0", EXAMPLE.read_text())
    path = tmp_path / "topology.toml"
    path.write_text(text)
    return path


class Up:
    def __init__(self, tmp_path: Path, *extra: str) -> None:
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        args = [
            sys.executable,
            "-m",
            "georep",
            "up",
            "--config",
            str(config_on_free_ports(tmp_path)),
        ]
        args += ["--data", str(tmp_path / "data"), *extra]
        self.process = subprocess.Popen(
            args,
            stdout=subprocess.PIPE,
            stderr=open(tmp_path / "up.log", "ab"),  # the child holds it
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            text=True,
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
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
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(30)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_demo_shows_the_topology(tmp_path) -> None:
    up = Up(tmp_path, "--demo")
    try:
        up.expect(r"^UP_READY 6 processes")
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


def test_children_are_restarted_and_stopped(tmp_path) -> None:
    up = Up(tmp_path)
    try:
        pids = {}
        for _ in range(6):
            match = up.expect(r"\] (cluster|gateway) (\w+)\s+running\s+pid (\d+)")
            pids[f"{match[1]} {match[2]}"] = int(match[3])
        up.expect(r"^UP_READY")
        os.kill(pids["gateway A"], signal.SIGKILL)
        up.expect(r"gateway A\s+restarting\s+exit -9")
        pids["gateway A"] = int(up.expect(r"gateway A\s+running\s+pid (\d+)")[1])
        os.kill(pids["cluster B"], signal.SIGKILL)
        up.expect(r"cluster B\s+restarting\s+exit -9")
        pids["cluster B"] = int(up.expect(r"cluster B\s+running\s+pid (\d+)")[1])

        up.process.send_signal(signal.SIGTERM)
        assert up.process.wait(90) == 0
        for label, pid in pids.items():
            assert not alive(pid), f"{label} (pid {pid}) outlived georep up"
    finally:
        up.kill()
