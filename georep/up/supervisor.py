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
start.

Start: clusters first (``georep cluster``, waiting for ``CLUSTER_READY``), then gateways
(``georep gateway``, ``GATEWAY_READY``). Supervision: a process that exits without being
asked is restarted after a backoff that doubles from ``limits.up_restart_backoff_s_initial``
up to ``..._s_max``, with jitter (``georep/runtime/retry.py``), and starts over once the process
has run a minute. Each process has one status line, printed when its state changes::

    [12:00:01] cluster A  running     pid 4242  pulsar://127.0.0.1:6650 http://127.0.0.1:8080
    [12:00:07] cluster A  restarting  exit -9; again in 0.5 s (restart 1)

A port of 0 is chosen by the process that listens on it: up starts it with port 0, reads
the port it got from its ready line (``CLUSTER_READY pulsar://HOST:PORT
http://HOST:PORT``, ``GATEWAY_READY http://HOST:PORT``) and asks for that same port at
every restart (a gateway's is written into its TOML file), so the gateways' view of
their remotes stays true. The gateways' files are written once every cluster is ready,
with the ports the clusters got. No port is picked ahead of time and left free until a
process binds it: any outgoing connection on the machine could take it meanwhile. A
ready line that names no port, or another port than the one asked for, is a bug: that
process is stopped and not restarted; when that happens while the topology starts, up
stops the others and exits with 1.

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
free and the host an address here; a mistake is one line and exit code 2 (``runtime/console.py``).
A process that exits with code 2 (its configuration is unusable) is not restarted: up
prints its last log line, stops the others and exits with 2.

TLS (``examples/three-clusters-tls.toml``)::

    [tls]
    enabled = true

makes up create a CA for this machine (``runtime/loopback_ca.py``) under ``<data_dir>/tls`` at
every start, and give each cluster and each gateway a server certificate of it for
loopback (and ``host``). The clusters then serve the Pulsar protocol over TLS only
(``pulsar+ssl://``) and their admin REST over https, the gateways their REST over https,
and each gateway's file names its clusters by those URLs with ``tls_trust_certs_file``
set to the CA, hostname verification on: no link of the topology is plaintext. Without
the table (the default) everything is plaintext.

``--demo`` runs a short scripted exchange with the official pulsar-client once all is up
(messages produced on each cluster, then read back from each), prints which messages
crossed where, and stops everything; exit code 0 when the topology behaved.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import functools
import json
import logging
import os
import signal
import sys
import time
import tomllib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from georep import limits
from georep.domain.decimal_text import parse_decimal
from georep.gateway.cluster_endpoint import cluster_name
from georep.invariant import invariant
from georep.rest import tokens as token_sources
from georep.rest.access import ExposureError, check_exposure
from georep.rest.tokens import ADMIN_TOKENS_ENV, GATEWAY_TOKENS_ENV, TokenError
from georep.runtime import console
from georep.runtime.console import ConfigError, check_keys
from georep.runtime.processes import ManagedProcess, ProcessFailed, georep_command
from georep.runtime.retry import Backoff, RetryPolicy
from georep.up.config import ClusterSpec, GatewaySpec, UpConfig

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
    known = {"data_dir", "host", "clusters", "gateways", "tokens", "tls"}
    unknown = sorted(set(document) - known)
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
    tls_table = document.get("tls", {})
    _only(tls_table, {"enabled"}, "[tls]")
    tls = tls_table.get("enabled", False)
    if not isinstance(tls, bool):
        raise ConfigError(f"[tls] enabled must be true or false, got {tls!r}")
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
        tls=tls,
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


# --- ports learned from ready lines ---------------------------------------------------------
class ReadyLineError(ValueError):
    """A ready line that does not say which port its process listens on."""


def cluster_ports(detail: str) -> tuple[int, int]:
    """The broker and admin ports a ``CLUSTER_READY pulsar://HOST:PORT http://HOST:PORT``
    line names (``detail``: what follows ``CLUSTER_READY``; ``pulsar+ssl://`` and
    ``https://`` over TLS)."""
    urls = detail.split()
    if len(urls) != 2:
        raise ReadyLineError(
            f"CLUSTER_READY {detail!r}: expected a pulsar:// URL and an http:// URL"
        )
    return (
        _url_port("CLUSTER_READY", urls[0], ("pulsar", "pulsar+ssl")),
        _url_port("CLUSTER_READY", urls[1], ("http", "https")),
    )


def gateway_port(detail: str) -> int:
    """The port a ``GATEWAY_READY http://HOST:PORT`` line names (``detail``: what follows
    ``GATEWAY_READY``)."""
    urls = detail.split()
    if len(urls) != 1:
        raise ReadyLineError(f"GATEWAY_READY {detail!r}: expected one http:// URL")
    return _url_port("GATEWAY_READY", urls[0], ("http", "https"))


def _url_port(prefix: str, url: str, schemes: tuple[str, ...]) -> int:
    scheme, separator, authority = url.partition("://")
    host, colon, port_text = authority.rpartition(":")
    port = parse_decimal(port_text, digits_max=5)
    if not separator or scheme not in schemes or not colon or not host.strip("[]"):
        raise ReadyLineError(f"{prefix} {url!r}: not {schemes[0]}://HOST:PORT")
    if port is None or not 0 < port <= 65_535:
        raise ReadyLineError(f"{prefix} {url!r}: no port 1..65535 after the host")
    return port


def _learned(what: str, asked: int, found: int) -> int:
    if asked and found != asked:
        raise ReadyLineError(f"{what}: asked for port {asked}, the ready line says {found}")
    return found


def with_cluster_ports(config: UpConfig, name: str, detail: str) -> UpConfig:
    """``config`` with cluster ``name``'s ports those its ``CLUSTER_READY`` line names
    (ReadyLineError when it names none, or not the ports asked for)."""
    spec = config.clusters[name]
    broker, admin = cluster_ports(detail)
    learned = dataclasses.replace(
        spec,
        broker_port=_learned(f"cluster {name} broker", spec.broker_port, broker),
        admin_port=_learned(f"cluster {name} admin", spec.admin_port, admin),
    )
    return dataclasses.replace(config, clusters={**config.clusters, name: learned})


def with_gateway_port(config: UpConfig, name: str, detail: str) -> UpConfig:
    """``config`` with gateway ``name``'s port the one its ``GATEWAY_READY`` line names
    (ReadyLineError when it names none, or not the port asked for)."""
    spec = config.gateways[name]
    port = _learned(f"gateway {name}", spec.port, gateway_port(detail))
    learned = dataclasses.replace(spec, port=port)
    return dataclasses.replace(config, gateways={**config.gateways, name: learned})


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
        #: Called with the ready line's detail at every start, before the process counts
        #: as running; a ReadyLineError stops it for good.
        self.on_ready: Callable[[Supervised, str], None] | None = None
        #: Why the process is not restarted: the one line it said when it exited with
        #: code 2 (its configuration is unusable), or its unreadable ready line.
        self.failure: str | None = None
        #: up's exit code for that failure.
        self.failure_code = 0

    def status(self, state: str, detail: str = "") -> None:
        clock = time.strftime("%H:%M:%S")
        print(f"[{clock}] {self.label:<10} {state:<11} {detail}".rstrip(), flush=True)

    async def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._supervise(), name=self.label)
        await self.ready.wait()

    async def _supervise(self) -> None:
        policy = RetryPolicy(limits.up_restart_backoff_s_initial, limits.up_restart_backoff_s_max)
        backoff = Backoff(policy)
        while not self.stopping:
            self.process = ManagedProcess(self.args, self.ready_prefix, log_path=self.log_path)
            started_at = time.monotonic()
            try:
                self.detail = await self.process.start()
                if self.on_ready is not None:
                    self.on_ready(self, self.detail)
            except ProcessFailed as error:
                if self.process.returncode == console.EXIT_CONFIG:
                    self._fail(console.EXIT_CONFIG, _last_line(self.log_path) or str(error))
                    return
                code = f"did not start: {error}"
            except ReadyLineError as error:
                await self.process.terminate(limits.up_stop_grace_s)
                self._fail(1, str(error))
                return
            else:
                self.status("running", f"pid {self.process.pid}  {self.detail}")
                self.ready.set()
                exit_code = await self.process.wait()
                if self.stopping:
                    break
                code = f"exit {exit_code}"
                if time.monotonic() - started_at > limits.up_stable_run_s:
                    backoff.reset()
            if self.stopping:
                break
            self.restarts += 1
            delay_s = backoff.next_delay_s()
            self.status("restarting", f"{code}; again in {delay_s:.1f} s (restart {self.restarts})")
            await asyncio.sleep(delay_s)

    def _fail(self, code: int, why: str) -> None:
        self.failure, self.failure_code = why, code
        self.status("failed", why)
        self.ready.set()

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
    if spec.discovery_interval_s is not None:
        lines.append(f"discovery_interval_s = {spec.discovery_interval_s!r}")
    if config.gateway_token_file is not None:
        lines.append(f"token_file = {json.dumps(str(config.gateway_token_file))}")
    rest_tls = config.server_files(f"gateway-{spec.cluster}")
    if rest_tls is not None:
        lines.append(f"tls_cert_file = {json.dumps(str(rest_tls.cert_file))}")
        lines.append(f"tls_key_file = {json.dumps(str(rest_tls.key_file))}")
    # Without a token source the gateway sends the first of GEOREP_ADMIN_TOKENS.
    token = (
        [f"token_file = {json.dumps(str(config.admin_token_file))}"]
        if config.admin_token_file is not None
        else []
    )
    # Over TLS: the clusters' TLS URLs, their certificates checked against up's CA and
    # their names against the URL's host (the default, tls_hostname_verification).
    broker, admin = ("pulsar+ssl", "https") if config.tls else ("pulsar", "http")
    if config.ca_file is not None:
        token.append(f"tls_trust_certs_file = {json.dumps(str(config.ca_file))}")
    lines += [
        "",
        "[local]",
        f'name = "{local.name}"',
        f'service_url = "{broker}://{_address(host, local.broker_port)}"',
        f'admin_url = "{admin}://{_address(host, local.admin_port)}"',
        *token,
    ]
    for name, remote in sorted(config.clusters.items()):
        if name == spec.cluster:
            continue
        lines += [
            "",
            f"[remotes.{name}]",
            f'service_url = "{broker}://{_address(host, remote.broker_port)}"',
            f'admin_url = "{admin}://{_address(host, remote.admin_port)}"',
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


def cluster_args(config: UpConfig, name: str, *, insecure: bool = False) -> list[str]:
    """``georep cluster`` for cluster ``name`` on the ports ``config`` gives it (0: the
    cluster picks them)."""
    spec = config.clusters[name]
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
    tls = config.server_files(f"cluster-{name}")
    if tls is not None:
        args += ["--tls-cert-file", str(tls.cert_file), "--tls-key-file", str(tls.key_file)]
    if insecure:
        args.append("--insecure")
    if not spec.fsync:
        args.append("--no-fsync")
    return args


def cluster_process(config: UpConfig, name: str, *, insecure: bool = False) -> Supervised:
    """Cluster ``name``, not started."""
    return Supervised(
        f"cluster {name}",
        cluster_args(config, name, insecure=insecure),
        "CLUSTER_READY",
        config.data_dir / "logs" / f"cluster-{name}.log",
    )


def write_gateway_toml(config: UpConfig, name: str) -> Path:
    """Gateway ``name``'s TOML file, written from ``config`` (its clusters' ports must be
    known: not 0); its path."""
    home = config.data_dir / f"gateway-{name}"
    home.mkdir(parents=True, exist_ok=True)
    path = home / "gateway.toml"
    path.write_text(_gateway_toml(config, config.gateways[name], home))
    return path


def gateway_process(config: UpConfig, name: str, *, insecure: bool = False) -> Supervised:
    """Gateway ``name``, not started; its TOML file written."""
    path = write_gateway_toml(config, name)
    return Supervised(
        f"gateway {name}",
        georep_command("gateway", "--config", str(path), *(["--insecure"] * insecure)),
        "GATEWAY_READY",
        config.data_dir / "logs" / f"gateway-{name}.log",
    )


class Supervision:
    """The processes ``up`` supervises, and ``config`` as they run it: a port of 0 is
    replaced by the port its process reported once ready, and every later start of that
    process asks for that port."""

    def __init__(self, config: UpConfig, *, insecure: bool = False) -> None:
        self.config = config
        self.insecure = insecure
        self.clusters = [self._cluster(name) for name in sorted(config.clusters)]
        self.gateways: list[Supervised] = []

    def _cluster(self, name: str) -> Supervised:
        process = cluster_process(self.config, name, insecure=self.insecure)
        process.on_ready = functools.partial(self._cluster_ready, name)
        return process

    def _cluster_ready(self, name: str, process: Supervised, detail: str) -> None:
        self.config = with_cluster_ports(self.config, name, detail)
        process.args = cluster_args(self.config, name, insecure=self.insecure)

    def add_gateways(self) -> None:
        """The gateways, not started: once every cluster is ready, for their TOML files
        name the clusters' ports."""
        for name in sorted(self.config.gateways):
            process = gateway_process(self.config, name, insecure=self.insecure)
            process.on_ready = functools.partial(self._gateway_ready, name)
            self.gateways.append(process)

    def _gateway_ready(self, name: str, process: Supervised, detail: str) -> None:
        self.config = with_gateway_port(self.config, name, detail)
        write_gateway_toml(self.config, name)


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


def issue_certificates(config: UpConfig) -> None:
    """A new CA under ``config.tls_dir`` and a server certificate of it for every cluster
    and gateway, naming loopback and ``config.host`` (what the URLs of the topology name).
    Made anew at every start of up, before any process starts with its files."""
    from georep.runtime.loopback_ca import LOOPBACK_NAMES, LoopbackCa

    ca = LoopbackCa.create(config.tls_dir)
    names = tuple(dict.fromkeys((*LOOPBACK_NAMES, config.host)))
    processes = [f"cluster-{name}" for name in config.clusters]
    processes += [f"gateway-{name}" for name in config.gateways]
    for process in processes:
        written = ca.server_files(process, names=names)
        invariant(written == config.server_files(process), f"{process}'s TLS files moved")


async def serve(config: UpConfig, demo: bool, *, insecure: bool = False) -> int:
    config.data_dir.mkdir(parents=True, exist_ok=True)
    if config.tls:
        await asyncio.to_thread(issue_certificates, config)  # RSA keys: a second or two
    topology = Supervision(config, insecure=insecure)
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    code = 0
    try:
        starting = asyncio.gather(*(p.start() for p in topology.clusters))
        await _unless_stopped(starting, stopping)
        if not stopping.is_set() and not _failed(topology.clusters):
            topology.add_gateways()
            starting = asyncio.gather(*(p.start() for p in topology.gateways))
            await _unless_stopped(starting, stopping)
        processes = [*topology.clusters, *topology.gateways]
        failed = _failed(processes)
        if failed:
            for process in failed:
                print(f"georep up: {process.label}: {process.failure}", file=sys.stderr)
            code = max(process.failure_code for process in failed)
        elif not stopping.is_set():
            print(f"{UP_READY} {len(processes)} processes; data in {config.data_dir}", flush=True)
            for process in processes:
                print(f"  {process.label:<10} {process.detail}", flush=True)
            if demo:
                from georep.up.demo import run_demo

                demo_run = asyncio.to_thread(run_demo, topology.config)
                code = await _unless_stopped(demo_run, stopping)
            else:
                await stopping.wait()
    finally:
        print("stopping: gateways first, then clusters", flush=True)
        await asyncio.gather(*(p.stop() for p in topology.gateways))
        await asyncio.gather(*(p.stop() for p in topology.clusters))
    return int(code or 0)


_T = TypeVar("_T")


def _failed(processes: list[Supervised]) -> list[Supervised]:
    return [p for p in processes if p.failure is not None]


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
