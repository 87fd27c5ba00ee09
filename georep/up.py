"""``georep up --config FILE``: a whole local topology — clusters and their gateways —
from one TOML file, supervised.

Example (``examples/three-clusters.toml``: A↔B both ways, A→C one way, B and C
unrelated)::

    data_dir = "georep-up-data"          # relative to the working directory

    [clusters.A]
    broker_port = 6650
    admin_port = 8080

    [gateways.A]
    port = 8090
    replicate = { "public/default" = ["B", "C"] }

Every gateway knows every other cluster as a remote (so its policies can be changed to
any of them at run time over its REST admin); ``replicate`` seeds its policies on first
start. A port of 0 is chosen once when ``up`` starts and kept across restarts, so the
gateways' view of their remotes stays true.

Start: clusters first (``georep cluster``, waiting for ``CLUSTER_READY``), then gateways
(``georep gateway``, ``GATEWAY_READY``). Supervision: a process that exits without being
asked is restarted after a backoff that doubles from ``limits.up_restart_backoff_s_initial``
up to ``..._s_max`` (and starts over once the process has run a minute). Each process has
one status line, printed when its state changes::

    [12:00:01] cluster A  running     pid 4242  pulsar://127.0.0.1:6650 http://127.0.0.1:8080
    [12:00:07] cluster A  restarting  exit -9; again in 0.5 s (restart 1)

SIGINT (Ctrl-C) or SIGTERM stops everything cleanly: gateways first (their replicators
persist what they acknowledged), then clusters, each with SIGTERM and, after a grace
period, SIGKILL. Logs go to ``<data_dir>/logs/<process>.log``.

Tokens (``rest/tokens.py``): ``GEOREP_ADMIN_TOKENS`` and ``GEOREP_GATEWAY_TOKENS`` in
up's environment reach every process, or name token files in the file::

    [tokens]
    admin_file = "secrets/admin-tokens"      # the clusters' admin REST (one token a line)
    gateway_file = "secrets/gateway-tokens"  # the gateways' REST

Clusters require the admin tokens, gateways require the gateway tokens and send the
first admin token to every cluster. With none, up says on its console that the REST is
open; with ``host`` beyond loopback it refuses to start unless ``--insecure``.

Before starting anything up checks the file and the machine: ports must be distinct and
free and the host an address here; a mistake is one line and exit code 2 (``console.py``).
A process that exits with code 2 (its configuration is unusable) is not restarted: up
prints its last log line, stops the others and exits with 2.

``--demo`` runs a short scripted exchange with the official pulsar-client once all is up
(messages produced on each cluster, then read back from each), prints which messages
crossed where, and stops everything; exit code 0 when the topology behaved.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import signal
import socket
import sys
import time
import tomllib
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, TypeVar

from georep import console, limits
from georep.console import ConfigError, check_keys
from georep.gateway.config import cluster_name
from georep.processes import ManagedProcess, ProcessFailed, georep_command
from georep.rest import tokens as token_sources
from georep.rest.access import ExposureError, check_exposure
from georep.rest.tokens import ADMIN_TOKENS_ENV, GATEWAY_TOKENS_ENV, TokenError
from georep.up_config import ClusterSpec, GatewaySpec, UpConfig

log = logging.getLogger(__name__)

UP_READY = "UP_READY"


# --- configuration -----------------------------------------------------------------------
def load_config(path: Path, data_dir: Path | None = None) -> UpConfig:
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ConfigError(f"cannot read {path}: {error.strerror}") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: not valid TOML: {error}") from None
    unknown = sorted(set(document) - {"data_dir", "host", "clusters", "gateways", "tokens"})
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {unknown}")
    clusters = {}
    for name, table in (document.get("clusters") or {}).items():
        cluster_name(f"[clusters.{name}]", name)
        _only(table, {"broker_port", "admin_port", "fsync"}, f"[clusters.{name}]")
        clusters[name] = ClusterSpec(
            name,
            _port(f"[clusters.{name}] broker_port", table.get("broker_port", 0)),
            _port(f"[clusters.{name}] admin_port", table.get("admin_port", 0)),
            bool(table.get("fsync", True)),
        )
    if not clusters:
        raise ConfigError(f"{path}: no [clusters.NAME] table")
    gateways = {}
    for name, table in (document.get("gateways") or {}).items():
        if name not in clusters:
            raise ConfigError(f"[gateways.{name}]: there is no [clusters.{name}]")
        _only(table, {"port", "replicate", "subscription_sync"}, f"[gateways.{name}]")
        replicate = table.get("replicate", {})
        for namespace, targets in replicate.items():
            if not isinstance(targets, list) or set(targets) - set(clusters):
                raise ConfigError(
                    f"[gateways.{name}] replicate {namespace!r}: list clusters of this file"
                )
        sync = table.get("subscription_sync", {})
        if not isinstance(sync, dict):
            raise ConfigError(f"[gateways.{name}] subscription_sync must be a table")
        gateways[name] = GatewaySpec(
            name, _port(f"[gateways.{name}] port", table.get("port", 0)), replicate, sync
        )
    if 2 * len(clusters) > limits.up_processes_count_max:
        raise ConfigError(f"at most {limits.up_processes_count_max // 2} clusters")
    token_table = document.get("tokens", {})
    _only(token_table, {"admin_file", "gateway_file"}, "[tokens]")
    files = {}
    for key in ("admin_file", "gateway_file"):
        value = token_table.get(key)
        if value is not None and (not isinstance(value, str) or not value):
            raise ConfigError(f"[tokens] {key} must be a path")
        files[key] = (path.parent / value).resolve() if value else None
    host = document.get("host", "127.0.0.1")
    if not isinstance(host, str) or not host:
        raise ConfigError(f"host must be an address, got {host!r}")
    return UpConfig(
        data_dir=(data_dir or Path(document.get("data_dir", "georep-up-data"))).resolve(),
        clusters=clusters,
        gateways=gateways,
        host=host,
        admin_token_file=files["admin_file"],
        gateway_token_file=files["gateway_file"],
    )


def check(config: UpConfig, environ: dict[str, str], *, insecure: bool) -> list[str]:
    """What can be known wrong before anything starts, as ConfigError; the warnings to
    print on the console."""
    ports = {}
    for name, spec in sorted(config.clusters.items()):
        ports[f"[clusters.{name}] broker_port"] = spec.broker_port
        ports[f"[clusters.{name}] admin_port"] = spec.admin_port
    for name, gateway_spec in sorted(config.gateways.items()):
        ports[f"[gateways.{name}] port"] = gateway_spec.port
    try:
        console.check_distinct(ports)
        console.check_bind("host", config.host, 0)
        for what, port in ports.items():
            if port:
                console.check_bind(what, config.host, port)
        admin = token_sources.tokens_from(
            environ.get(ADMIN_TOKENS_ENV),
            str(config.admin_token_file) if config.admin_token_file else None,
        )
        gateway = token_sources.tokens_from(
            environ.get(GATEWAY_TOKENS_ENV),
            str(config.gateway_token_file) if config.gateway_token_file else None,
        )
    except (console.BindError, TokenError) as error:
        raise ConfigError(str(error)) from None
    if config.gateways and admin and not _first_admin_token(config, environ):
        raise ConfigError("the gateways need an admin token to send to the clusters")
    warnings = []
    for what, found in (("the clusters' admin REST", admin), ("the gateways' REST", gateway)):
        if what.startswith("the gateways") and not config.gateways:
            continue
        try:
            warning = check_exposure(
                what, config.host, tokens_required=bool(found), insecure=insecure
            )
        except ExposureError as error:
            raise ConfigError(str(error)) from None
        if warning:
            variable = ADMIN_TOKENS_ENV if "clusters" in what else GATEWAY_TOKENS_ENV
            warnings.append(f"{warning} ({variable} or [tokens])")
    return warnings


def _first_admin_token(config: UpConfig, environ: dict[str, str]) -> str | None:
    if config.admin_token_file is not None:
        found = token_sources.read_file(str(config.admin_token_file))
        return found[0] if found else None
    return token_sources.client_token(environ, ADMIN_TOKENS_ENV)


def _only(table: Any, allowed: set[str], where: str) -> None:
    if not isinstance(table, dict):
        raise ConfigError(f"{where} must be a table")
    check_keys(table, allowed, where)


def _port(what: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 65_535:
        raise ConfigError(f"{what} must be a port number 0..65535, got {value!r}")
    return value


def _free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


# --- processes -----------------------------------------------------------------------------
class Supervised:
    """One child process, restarted with backoff when it exits unasked."""

    def __init__(self, label: str, args: list[str], ready_prefix: str, log_path: Path) -> None:
        self.label = label
        self.args = args
        self.ready_prefix = ready_prefix
        self.log_path = log_path
        self.process: ManagedProcess | None = None
        self.restarts = 0
        self.stopping = False
        self.detail = ""
        self._task: asyncio.Task[None] | None = None
        self.ready = asyncio.Event()
        #: The one line a process that exited with code 2 said: it is not restarted.
        self.config_error: str | None = None

    def status(self, state: str, detail: str = "") -> None:
        clock = time.strftime("%H:%M:%S")
        print(f"[{clock}] {self.label:<10} {state:<11} {detail}".rstrip(), flush=True)

    async def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._supervise(), name=self.label)
        await self.ready.wait()

    async def _supervise(self) -> None:
        backoff = limits.up_restart_backoff_s_initial
        while not self.stopping:
            self.process = ManagedProcess(self.args, self.ready_prefix, log_path=self.log_path)
            started_at = time.monotonic()
            try:
                self.detail = await self.process.start()
            except ProcessFailed as error:
                if self.process.returncode == console.EXIT_CONFIG:
                    self.config_error = _last_line(self.log_path) or str(error)
                    self.status("failed", self.config_error)
                    self.ready.set()
                    return
                code = f"did not start: {error}"
            else:
                self.status("running", f"pid {self.process.pid}  {self.detail}")
                self.ready.set()
                exit_code = await self.process.wait()
                if self.stopping:
                    break
                code = f"exit {exit_code}"
                if time.monotonic() - started_at > limits.up_stable_run_s:
                    backoff = limits.up_restart_backoff_s_initial
            if self.stopping:
                break
            self.restarts += 1
            self.status("restarting", f"{code}; again in {backoff:.1f} s (restart {self.restarts})")
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, limits.up_restart_backoff_s_max)

    async def stop(self) -> None:
        self.stopping = True
        if self.process is not None and self.process.running:
            code = await self.process.terminate(limits.up_stop_grace_s)
            self.status("stopped", f"exit {code}")
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


def _last_line(path: Path) -> str:
    with contextlib.suppress(OSError):
        lines = path.read_text(errors="replace").strip().splitlines()
        return lines[-1] if lines else ""
    return ""


def _gateway_toml(config: UpConfig, spec: GatewaySpec, home: Path) -> str:
    host = config.host
    local = config.clusters[spec.cluster]
    lines = [
        "# written by georep up; edit the up configuration instead",
        "[gateway]",
        f"listen = {json.dumps(_address(host, spec.port))}",
        f"metadata = {json.dumps('sqlite:///' + str(home / 'gateway.db'))}",
    ]
    if config.gateway_token_file is not None:
        lines.append(f"token_file = {json.dumps(str(config.gateway_token_file))}")
    # Without a token source the gateway sends the first of GEOREP_ADMIN_TOKENS.
    token = (
        [f"token_file = {json.dumps(str(config.admin_token_file))}"]
        if config.admin_token_file is not None
        else []
    )
    lines += [
        "",
        "[local]",
        f'name = "{local.name}"',
        f'service_url = "pulsar://{_address(host, local.broker_port)}"',
        f'admin_url = "http://{_address(host, local.admin_port)}"',
        *token,
    ]
    for name, remote in sorted(config.clusters.items()):
        if name == spec.cluster:
            continue
        lines += [
            "",
            f"[remotes.{name}]",
            f'service_url = "pulsar://{_address(host, remote.broker_port)}"',
            f'admin_url = "http://{_address(host, remote.admin_port)}"',
            *token,
        ]
    if spec.replicate:
        lines += ["", "[policies.namespaces]"]
        lines += [
            f'"{namespace}" = {json.dumps(sorted(targets))}'
            for namespace, targets in sorted(spec.replicate.items())
        ]
    if spec.subscription_sync:
        lines += ["", _toml_table("subscription_sync", spec.subscription_sync)]
    return "\n".join(lines) + "\n"


def _address(host: str, port: int) -> str:
    """``host:port`` as a URL authority (an IPv6 address in brackets)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _toml_table(name: str, table: dict[str, Any]) -> str:
    """``table`` as a TOML table ``[name]``: scalars as JSON literals (valid TOML for
    strings, numbers and booleans), nested tables as inline tables."""

    def value(item: Any) -> str:
        if isinstance(item, dict):
            inner = ", ".join(f"{json.dumps(k)} = {value(v)}" for k, v in item.items())
            return "{ " + inner + " }"
        if isinstance(item, bool):
            return "true" if item else "false"
        return json.dumps(item)

    return "\n".join([f"[{name}]", *(f"{json.dumps(k)} = {value(v)}" for k, v in table.items())])


def _with_ports(config: UpConfig) -> UpConfig:
    """Ports of 0 replaced by free ports, chosen once, so that restarts keep them."""
    clusters = {
        name: ClusterSpec(
            name,
            spec.broker_port or _free_port(config.host),
            spec.admin_port or _free_port(config.host),
            spec.fsync,
        )
        for name, spec in config.clusters.items()
    }
    gateways = {
        name: dataclasses.replace(spec, port=spec.port or _free_port(config.host))
        for name, spec in config.gateways.items()
    }
    return dataclasses.replace(config, clusters=clusters, gateways=gateways)


def build(config: UpConfig, *, insecure: bool = False) -> tuple[list[Supervised], list[Supervised]]:
    """The supervised clusters and gateways (not started)."""
    logs = config.data_dir / "logs"
    clusters = []
    for name, spec in sorted(config.clusters.items()):
        args = georep_command(
            "cluster",
            "--name", name,
            "--data", str(config.data_dir / f"cluster-{name}"),
            "--host", config.host,
            "--broker-port", str(spec.broker_port),
            "--admin-port", str(spec.admin_port),
            "--admin-host", config.host,
        )  # fmt: skip
        if config.admin_token_file is not None:
            args += ["--admin-token-file", str(config.admin_token_file)]
        if insecure:
            args.append("--insecure")
        if not spec.fsync:
            args.append("--no-fsync")
        clusters.append(
            Supervised(f"cluster {name}", args, "CLUSTER_READY", logs / f"cluster-{name}.log")
        )
    gateways = []
    for name, gateway in sorted(config.gateways.items()):
        home = config.data_dir / f"gateway-{name}"
        home.mkdir(parents=True, exist_ok=True)
        path = home / "gateway.toml"
        path.write_text(_gateway_toml(config, gateway, home))
        gateways.append(
            Supervised(
                f"gateway {name}",
                georep_command("gateway", "--config", str(path), *(["--insecure"] * insecure)),
                "GATEWAY_READY",
                logs / f"gateway-{name}.log",
            )
        )
    return clusters, gateways


# --- the command -----------------------------------------------------------------------------
def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, type=Path, help="topology TOML file")
    parser.add_argument(
        "--data", type=Path, default=None, help="data directory (overrides data_dir)"
    )
    parser.add_argument(
        "--insecure",
        action="store_true",
        help="let clusters and gateways listen beyond loopback with no token",
    )
    parser.add_argument(
        "--demo",
        action="store_true",
        help="once up, produce and consume a few messages on each cluster, show what "
        "crossed where, and stop",
    )


async def serve(config: UpConfig, demo: bool, *, insecure: bool = False) -> int:
    config = _with_ports(config)
    config.data_dir.mkdir(parents=True, exist_ok=True)
    clusters, gateways = build(config, insecure=insecure)
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    code = 0
    try:
        starting = asyncio.gather(*(p.start() for p in clusters))
        await _unless_stopped(starting, stopping)
        if not stopping.is_set() and not _failed(clusters):
            await _unless_stopped(asyncio.gather(*(p.start() for p in gateways)), stopping)
        failed = _failed([*clusters, *gateways])
        if failed:
            for process in failed:
                print(f"georep up: {process.label}: {process.config_error}", file=sys.stderr)
            code = console.EXIT_CONFIG
        elif not stopping.is_set():
            count = len(clusters) + len(gateways)
            print(f"{UP_READY} {count} processes; data in {config.data_dir}", flush=True)
            for process in [*clusters, *gateways]:
                print(f"  {process.label:<10} {process.detail}", flush=True)
            if demo:
                from georep.up_demo import run_demo

                code = await _unless_stopped(asyncio.to_thread(run_demo, config), stopping)
            else:
                await stopping.wait()
    finally:
        print("stopping: gateways first, then clusters", flush=True)
        await asyncio.gather(*(p.stop() for p in gateways))
        await asyncio.gather(*(p.stop() for p in clusters))
    return int(code or 0)


_T = TypeVar("_T")


def _failed(processes: list[Supervised]) -> list[Supervised]:
    return [p for p in processes if p.config_error is not None]


async def _unless_stopped(awaitable: Awaitable[_T], stopping: asyncio.Event) -> _T | int:
    """``await awaitable`` unless a signal comes first (then cancel it)."""
    task = asyncio.ensure_future(awaitable)
    waiter = asyncio.ensure_future(stopping.wait())
    done, _ = await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()
    if task in done:
        return task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
    return 1


def run(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.config, args.data)
        warnings = check(config, dict(os.environ), insecure=args.insecure)
    except ConfigError as error:
        return console.config_error("up", error)
    if sys.platform == "win32":  # pragma: no cover - signals and fork semantics
        return console.config_error("up", "georep up needs a POSIX system")
    for warning in warnings:
        print(f"warning: {warning}", flush=True)
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    import uvloop

    return uvloop.run(serve(config, args.demo, insecure=args.insecure))
