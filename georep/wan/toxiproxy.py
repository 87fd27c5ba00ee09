"""An emulated WAN link between two clusters on one machine: toxiproxy
(github.com/Shopify/toxiproxy), built from source with the machine's Go into the cache,
driven over its HTTP API.

One :class:`Toxiproxy` server serves any number of :class:`WanLink` s, each a TCP proxy
on an ephemeral loopback port in front of one address (a broker's port, an admin's).
A link's faults are toxiproxy's toxics, applied to both directions:

- :meth:`WanLink.delay` — latency each way (half the round trip), with jitter;
- :meth:`WanLink.cap` — a bandwidth cap each way, in KiB/s;
- :meth:`WanLink.black_hole` — every byte dropped, no connection closed and none refused
  (new ones are accepted and then hear nothing): what a dead route or a stateful
  firewall that forgot the flow looks like;
- :meth:`WanLink.outage` — the proxy down: connections reset, new ones refused;
- :meth:`WanLink.heal` — every fault removed (the delay and cap stay unless asked).

The kernel's netem would need privileges these machines do not grant. The API is a few
JSON calls, so the client here uses the standard library rather than a Python package
(the ones on PyPI are unmaintained). Used by ``bench/wan.py`` and ``tests/wan``.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The release built (``go install``); its module proxy serves it whole.
TOXIPROXY_VERSION = "v2.12.0"
_MODULE = "github.com/Shopify/toxiproxy/v2/cmd/server"
_CACHE = Path(os.environ.get("GEOREP_CACHE_DIR", Path.home() / ".cache" / "georep"))
#: How long the server may take to answer its API after it starts.
START_TIMEOUT_S = 30.0


class ToxiproxyError(RuntimeError):
    """toxiproxy could not be built, started or driven."""


def go_missing() -> str | None:
    """Why toxiproxy cannot be built here, or None."""
    return None if shutil.which("go") else "the Go toolchain (go) is not installed"


def toxiproxy_binary() -> Path:
    """The server binary, built into the cache once (about 40 s on a new machine)."""
    target = _CACHE / "toxiproxy" / TOXIPROXY_VERSION / "toxiproxy-server"
    if target.exists():
        return target
    missing = go_missing()
    if missing:
        raise ToxiproxyError(f"cannot build toxiproxy: {missing}")
    target.parent.mkdir(parents=True, exist_ok=True)
    # Each builder its own GOBIN, the binary moved into place whole: two test workers
    # may build at once, and neither may see the other's half-written file.
    building = Path(tempfile.mkdtemp(prefix="build-", dir=target.parent))
    env = {**os.environ, "GOBIN": str(building), "CGO_ENABLED": "0"}
    done = subprocess.run(
        ["go", "install", f"{_MODULE}@{TOXIPROXY_VERSION}"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    try:
        if done.returncode != 0:
            raise ToxiproxyError(f"go install {_MODULE}@{TOXIPROXY_VERSION}: {done.stderr[-2000:]}")
        os.replace(building / "server", target)
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return target


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Toxiproxy:
    """A toxiproxy server on loopback; :meth:`start` it, :meth:`stop` it."""

    process: subprocess.Popen[bytes]
    api: str

    @classmethod
    def start(cls, log_file: Path | None = None) -> Toxiproxy:
        binary = toxiproxy_binary()
        port = _free_port()  # the server takes no port 0 for its API
        command = [str(binary), "-host", "127.0.0.1", "-port", str(port)]
        if log_file is None:
            process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        else:
            with open(log_file, "ab") as out:  # the child keeps its own copy
                process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        server = cls(process, f"http://127.0.0.1:{port}")
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                server.request("GET", "/version")
                return server
            except ToxiproxyError:
                if process.poll() is not None or time.monotonic() > deadline:
                    server.stop()
                    raise ToxiproxyError(
                        f"toxiproxy did not answer on {server.api} within {START_TIMEOUT_S} s"
                        f" (exit code {process.returncode})"
                    ) from None
                time.sleep(0.1)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def __enter__(self) -> Toxiproxy:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def request(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.api + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                text = response.read()
        except urllib.error.HTTPError as error:
            raise ToxiproxyError(f"{method} {path}: {error.code} {error.read()[:500]!r}") from None
        except (urllib.error.URLError, OSError) as error:
            raise ToxiproxyError(f"{method} {path}: {error}") from None
        return json.loads(text) if text.strip() else None

    def link(self, name: str, upstream: str = "127.0.0.1:1") -> WanLink:
        """A new link listening on an ephemeral loopback port, towards ``upstream``
        (``host:port``; set it later with :meth:`WanLink.point_at` when the address
        behind it is known only after the link's own, as for an advertised listener)."""
        answer = self.request(
            "POST",
            "/proxies",
            {"name": name, "listen": "127.0.0.1:0", "upstream": upstream, "enabled": True},
        )
        host, _, port = str(answer["listen"]).rpartition(":")
        return WanLink(self, name, host or "127.0.0.1", int(port))


@dataclass
class WanLink:
    """One proxied address: connect to :attr:`address` instead of the one behind it."""

    server: Toxiproxy
    name: str
    host: str
    port: int

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def point_at(self, upstream: str) -> None:
        self.server.request("POST", f"/proxies/{self.name}", {"upstream": upstream})

    def _toxic(self, kind: str, attributes: dict[str, int]) -> None:
        for stream in ("upstream", "downstream"):
            self.server.request(
                "POST",
                f"/proxies/{self.name}/toxics",
                {
                    "name": f"{kind}-{stream}",
                    "type": kind,
                    "stream": stream,
                    "toxicity": 1.0,
                    "attributes": attributes,
                },
            )

    def _remove(self, kind: str) -> None:
        for stream in ("upstream", "downstream"):
            try:
                self.server.request("DELETE", f"/proxies/{self.name}/toxics/{kind}-{stream}")
            except ToxiproxyError as error:
                if ": 404 " not in str(error):
                    raise

    def delay(self, round_trip_ms: float, jitter_ms: float = 0.0) -> None:
        """Half of ``round_trip_ms`` each way (replacing any delay set before)."""
        self._remove("latency")
        half = round(round_trip_ms / 2)
        self._toxic("latency", {"latency": half, "jitter": round(jitter_ms / 2)})

    def cap(self, kib_per_s: int) -> None:
        """At most ``kib_per_s`` KiB a second each way (replacing any cap set before)."""
        self._remove("bandwidth")
        self._toxic("bandwidth", {"rate": kib_per_s})

    def black_hole(self) -> None:
        """Drop every byte both ways; close nothing, refuse nothing."""
        self._toxic("timeout", {"timeout": 0})

    def outage(self) -> None:
        """Down: open connections reset, new ones refused."""
        self.server.request("POST", f"/proxies/{self.name}", {"enabled": False})

    def heal(self) -> None:
        """Neither black hole nor outage (a delay or cap stays)."""
        self._remove("timeout")
        self.server.request("POST", f"/proxies/{self.name}", {"enabled": True})

    def clear(self) -> None:
        """No fault at all: no delay, no cap."""
        self.heal()
        self._remove("latency")
        self._remove("bandwidth")


if __name__ == "__main__":  # .ci/run and the bench: build it before anything needs it
    print(toxiproxy_binary())
