"""The gateway's configuration: one TOML file, checked into one typed object.

This module owns the file as a whole (its sections, ``[gateway]``, rate limits, seed
policies, limits, metrics, the REST's tokens and TLS) and ``GatewayConfig``; a cluster's
table (``[local]``, ``[remotes.NAME]``) is read into a ``ClusterEndpoint`` by
``cluster_endpoint.py``, and single values are checked by ``config_values.py``.

Example (``examples/gateway-a.toml`` has a commented one)::

    [gateway]
    listen = "127.0.0.1:8090"              # the gateway's REST admin
    metadata = "sqlite:///var/lib/georep/gateway-a.db"   # its own metadata store
    token_file = "/etc/georep/gateway-tokens"   # admin tokens (or GEOREP_GATEWAY_TOKENS)
    allowed_hosts = ["gateway-a.internal"]   # Host names beside loopback (rest/access.py)
    discovery_interval_s = 3.0
    retry_backoff_s_max = 30.0             # longest wait between reconnection attempts
    stuck_after_s = 120.0                  # no progress with entries waiting: restarted
    instance = "gw-a1"                     # among several instances (default: host-pid-random)
    lease_s = 3.0                          # kill -9 of an instance: others take over in time
    heartbeat_s = 0.5                      # at most lease_s / 4

    [local]                                 # the cluster this gateway sits beside
    name = "A"
    kind = "georep"                         # or "pulsar": real Apache Pulsar
    service_url = "pulsar://127.0.0.1:6650"
    admin_url = "http://127.0.0.1:8080"
    token_env = "CLUSTER_A_TOKEN"           # or token_file; none: GEOREP_ADMIN_TOKENS

    [remotes.B]                             # across a WAN: TLS (client/tls.py)
    service_url = "pulsar+ssl://pulsar-b.example:6651"
    admin_url = "https://pulsar-b.example:8443"
    token_file = "/etc/georep/cluster-b-token"
    tls_trust_certs_file = "/etc/georep/ca-b.pem"   # default: the system's CAs
    # tls_hostname_verification = true      # default
    # tls_cert_file / tls_key_file          # a client certificate (mutual TLS)
    listener_name = "wan"                   # lookups answer this advertised listener
    keepalive_interval_s = 15.0             # a black hole is noticed within 3x this
    replication_window_entries = 1000       # unanswered sends per replicator (docs/WAN.md)

    [rate_limits]                           # per replicator; absent or 0: unlimited
    messages_per_s = 20000
    bytes_per_s = 50_000_000

    [policies.namespaces]                   # applied only where no policy is stored yet
    "public/default" = ["B"]
    [policies.topics]
    "persistent://public/default/local-only" = []

    [subscription_sync]                     # see georep/subsync/settings.py
    mode = "full"                           # full | pulsar-compatible | off

    [limits]                                # past either: WARNING, /metrics, /health degraded
    replicators_max = 40000                 # topic partitions x remotes (limits.py: default)
    sync_topics_max = 20000                 # topic partitions synced

    [metrics]
    topic_level = false                     # true: series per topic partition (bounded)

Secrets (``rest/tokens.py`` names the variables): a cluster's token comes from a file
(``token_file``) or an environment variable (``token_env``); a literal ``token`` is
accepted for local experiments and warned about; with none of them, the first token of
``GEOREP_ADMIN_TOKENS`` is sent, so one shell variable serves every cluster of a
deployment. The gateway's own REST tokens come from ``GEOREP_GATEWAY_TOKENS`` /
``GEOREP_GATEWAY_READ_ONLY_TOKENS`` or ``token_file`` / ``read_only_token_file``. Tokens
are ``Token`` objects: they print as ``***``. Allowed ``Host`` names of the REST:
``allowed_hosts`` and ``GEOREP_ALLOWED_HOSTS``.

TLS: a cluster is reached over TLS where its URLs say so (``pulsar+ssl://``,
``https://``), with the keys of ``client/tls.py`` (named after Pulsar's client
settings); TLS keys beside two plaintext URLs are refused, since they would protect
nothing. The gateway's own REST serves https with ``[gateway] tls_cert_file`` and
``tls_key_file``.

Unknown keys are refused (a typo in ``rate_limit`` would otherwise silently mean
"unlimited"), and every error names the key at fault.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import ssl
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from georep import limits
from georep.domain.decimal_text import parse_decimal
from georep.domain.topic_name import InvalidTopicName, TopicName, check_namespace
from georep.gateway import config_values as values
from georep.gateway.cluster_endpoint import ClusterEndpoint, ClusterKind, parse_endpoint, same_place
from georep.rest import tokens as token_sources
from georep.rest.access import ALLOWED_HOSTS_ENV, Access, allowed_hosts
from georep.rest.tokens import (
    GATEWAY_READ_ONLY_TOKENS_ENV,
    GATEWAY_TOKENS_ENV,
    Token,
    TokenError,
)
from georep.runtime.console import ConfigError, check_keys
from georep.runtime.tls_files import TlsFiles
from georep.subsync import SyncMode, SyncSettings, parse_sync

log = logging.getLogger(__name__)

DEFAULT_LISTEN = "127.0.0.1:8090"

_SECTIONS = {
    "gateway",
    "local",
    "remotes",
    "rate_limits",
    "policies",
    "subscription_sync",
    "limits",
    "metrics",
}
_GATEWAY_KEYS = {
    "listen",
    "metadata",
    "token_file",
    "read_only_token_file",
    "allowed_hosts",
    "discovery_interval_s",
    "retry_backoff_s_max",
    "stuck_after_s",
    "instance",
    "lease_s",
    "heartbeat_s",
    "tls_cert_file",
    "tls_key_file",
}
_RATE_KEYS = {"messages_per_s", "bytes_per_s"}
_LIMIT_KEYS = {"replicators_max", "sync_topics_max"}


@dataclass(frozen=True)
class GatewayConfig:
    local: ClusterEndpoint
    remotes: Mapping[str, ClusterEndpoint]
    metadata_url: str
    listen_host: str = "127.0.0.1"
    listen_port: int = 8090
    admin_tokens: frozenset[Token] = field(default=frozenset(), repr=False)
    read_only_tokens: frozenset[Token] = field(default=frozenset(), repr=False)
    discovery_interval_s: float = limits.gateway_discovery_interval_s_default
    #: Longest wait between a replicator's reconnection attempts.
    retry_backoff_s_max: float = limits.replicator_retry_backoff_s_max
    #: A replicator that moved nothing on for so long while entries wait is stuck: said,
    #: and restarted (``ReplicationManager.heal_stalled``).
    stuck_after_s: float = limits.replicator_stuck_after_s_default
    messages_per_s: float | None = None
    bytes_per_s: float | None = None
    #: Policies applied at start where none is stored: namespace -> clusters.
    seed_namespace_policies: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    seed_topic_policies: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: What subscriptions' state is synced, and how (``georep/subsync/settings.py``).
    sync: SyncSettings = field(default_factory=SyncSettings)
    #: ``Host`` names the REST answers to beside the defaults (``rest/access.py``).
    allowed_hosts: tuple[str, ...] = ()
    #: Replicators and synced topic partitions this gateway runs at most ([limits]).
    replicators_max: int = limits.gateway_replicators_count_max
    sync_topics_max: int = limits.sync_topics_count_max
    #: This instance's name among the gateways of its cluster (None: generated at start),
    #: its lease and heartbeat (``gateway/ownership.py``).
    instance: str | None = None
    lease_s: float = limits.gateway_lease_s_default
    heartbeat_s: float = limits.gateway_heartbeat_s_default
    #: The REST served over https with this certificate and key; None: plain http.
    rest_tls: TlsFiles | None = None
    #: ``/metrics`` per topic partition (at most ``limits.metrics_topic_partitions_max``)
    #: rather than per namespace, as Pulsar's ``exposeTopicLevelMetricsInPrometheus``.
    metrics_topic_level: bool = False

    @property
    def open(self) -> bool:
        """No admin token: anyone reaching the port may change policies."""
        return not self.admin_tokens

    @property
    def access(self) -> Access:
        """What the REST checks of every request (``rest/access.py``)."""
        return Access(
            self.admin_tokens,
            self.read_only_tokens,
            allowed_hosts(self.listen_host, self.allowed_hosts, tokens_required=not self.open),
        )


def load(path: str | os.PathLike[str], environ: Mapping[str, str] = os.environ) -> GatewayConfig:
    """Read and check the TOML file at ``path``; ConfigError says what is wrong."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > limits.gateway_config_bytes_max:
            raise ConfigError(f"{path}: {size} bytes; at most {limits.gateway_config_bytes_max}")
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ConfigError(f"cannot read {path}: {error.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path}: not valid TOML: {error}") from None
    return parse(document, environ, base_dir=path.parent)


def parse(
    document: Mapping[str, Any],
    environ: Mapping[str, str] = os.environ,
    *,
    base_dir: Path = Path("."),
) -> GatewayConfig:
    check_keys(document, _SECTIONS, "the file")
    gateway = values.table(document, "gateway")
    check_keys(gateway, _GATEWAY_KEYS, "[gateway]")
    local = parse_endpoint(
        "local", values.table(document, "local", required=True), environ, base_dir
    )
    remotes_table = values.table(document, "remotes")
    if len(remotes_table) > limits.remote_clusters_count_max:
        raise ConfigError(f"[remotes]: at most {limits.remote_clusters_count_max} clusters")
    remotes = {}
    for name, table in remotes_table.items():
        if not isinstance(table, Mapping):
            raise ConfigError(f"[remotes.{name}] must be a table")
        if "name" in table and table["name"] != name:
            raise ConfigError(f"[remotes.{name}]: name {table['name']!r} differs from the key")
        remotes[name] = parse_endpoint(
            f"remotes.{name}", {**table, "name": name}, environ, base_dir
        )
    if local.name in remotes:
        raise ConfigError(f"[remotes.{local.name}] is the local cluster")
    for name, remote in remotes.items():
        for key in ("service_url", "admin_url"):
            if same_place(getattr(remote, key), getattr(local, key)):
                raise ConfigError(
                    f"[remotes.{name}] {key} {getattr(remote, key)!r} is the local"
                    " cluster's: a gateway would replicate a cluster into itself"
                )
    sync = parse_sync(values.table(document, "subscription_sync"))
    if local.kind is ClusterKind.PULSAR:
        for namespace, settings in [("", sync.default), *sync.namespaces.items()]:
            if settings.mode is SyncMode.PULSAR_COMPATIBLE:
                where = f'.namespaces."{namespace}"' if namespace else ""
                raise ConfigError(
                    f"[subscription_sync{where}] mode pulsar-compatible: beside a real Pulsar"
                    " cluster that is Pulsar's own replicated subscriptions; use full"
                )
    host, port = _listen(gateway.get("listen", DEFAULT_LISTEN))
    metadata = gateway.get("metadata")
    if metadata is None:
        metadata = f"sqlite:///{(base_dir / f'gateway-{local.name}.db').resolve()}"
    values.string("[gateway] metadata", metadata, limits.cluster_url_chars_max)
    rates = values.table(document, "rate_limits")
    check_keys(rates, _RATE_KEYS, "[rate_limits]")
    policies = values.table(document, "policies")
    check_keys(policies, {"namespaces", "topics"}, "[policies]")
    caps = values.table(document, "limits")
    check_keys(caps, _LIMIT_KEYS, "[limits]")
    metrics = values.table(document, "metrics")
    check_keys(metrics, {"topic_level"}, "[metrics]")
    topic_level = metrics.get("topic_level", False)
    if not isinstance(topic_level, bool):
        raise ConfigError(f"[metrics] topic_level must be true or false, got {topic_level!r}")
    admin_tokens = _tokens(environ.get(GATEWAY_TOKENS_ENV), gateway.get("token_file"), base_dir)
    read_only = _tokens(
        environ.get(GATEWAY_READ_ONLY_TOKENS_ENV), gateway.get("read_only_token_file"), base_dir
    )
    hosts = gateway.get("allowed_hosts", [])
    if not isinstance(hosts, list) or not all(isinstance(h, str) and h for h in hosts):
        raise ConfigError("[gateway] allowed_hosts must be a list of host names")
    hosts = [*hosts, *token_sources.split(environ.get(ALLOWED_HOSTS_ENV))]
    if read_only and not admin_tokens:
        raise ConfigError("read-only tokens are set but no admin token: mutations would be open")
    if admin_tokens & read_only:
        raise ConfigError("a token is both an admin and a read-only token")
    return GatewayConfig(
        local=local,
        remotes=remotes,
        metadata_url=metadata,
        listen_host=host,
        listen_port=port,
        admin_tokens=admin_tokens,
        read_only_tokens=read_only,
        discovery_interval_s=values.positive(
            "[gateway] discovery_interval_s",
            gateway.get("discovery_interval_s", limits.gateway_discovery_interval_s_default),
        ),
        retry_backoff_s_max=_backoff(gateway.get("retry_backoff_s_max")),
        stuck_after_s=_stuck_after(gateway.get("stuck_after_s")),
        messages_per_s=_rate("messages_per_s", rates.get("messages_per_s")),
        bytes_per_s=_rate("bytes_per_s", rates.get("bytes_per_s")),
        seed_namespace_policies=_seeds(policies, "namespaces", remotes, local.name),
        seed_topic_policies=_seeds(policies, "topics", remotes, local.name),
        sync=sync,
        allowed_hosts=tuple(hosts),
        replicators_max=_count(
            "[limits] replicators_max",
            caps.get("replicators_max", limits.gateway_replicators_count_max),
            limits.gateway_replicators_count_ceiling,
        ),
        sync_topics_max=_count(
            "[limits] sync_topics_max",
            caps.get("sync_topics_max", limits.sync_topics_count_max),
            limits.sync_topics_count_ceiling,
        ),
        instance=_instance(gateway.get("instance")),
        rest_tls=_rest_tls(gateway, base_dir),
        metrics_topic_level=topic_level,
        **_lease(gateway),
    )


def _rest_tls(gateway: Mapping[str, Any], base_dir: Path) -> TlsFiles | None:
    """``[gateway] tls_cert_file`` / ``tls_key_file``: the REST over https, checked now."""
    cert, key = gateway.get("tls_cert_file"), gateway.get("tls_key_file")
    if cert is None and key is None:
        return None
    if cert is None or key is None:
        raise ConfigError("[gateway] tls_cert_file and tls_key_file go together")
    files = TlsFiles(values.path("[gateway] tls_cert_file", cert, base_dir),
                     values.path("[gateway] tls_key_file", key, base_dir))  # fmt: skip
    try:
        files.server_context()
    except (OSError, ssl.SSLError) as error:
        raise ConfigError(
            f"[gateway] tls_cert_file / tls_key_file: {error.strerror or error}"
        ) from None
    return files


def with_overrides(
    config: GatewayConfig, *, listen: str | None = None, instance: str | None = None
) -> GatewayConfig:
    """``config`` with ``listen`` (``host:port``) and ``instance`` from the command line,
    so several instances run from one file (docs/ARCHITECTURE.md, several instances)."""
    changes: dict[str, Any] = {}
    if listen is not None:
        changes["listen_host"], changes["listen_port"] = _listen(listen)
    if instance is not None:
        changes["instance"] = _instance(instance)
    return dataclasses.replace(config, **changes)


def _instance(value: Any) -> str | None:
    if value is None:
        return None
    chars = limits.gateway_instance_chars_max
    if not isinstance(value, str) or not INSTANCE_NAME.fullmatch(value):
        raise ConfigError(f"[gateway] instance must be 1..{chars} letters, digits, '.', '_' or '-'")
    return value


#: An instance name: it appears in producer names and metric labels.
INSTANCE_NAME = re.compile(rf"[A-Za-z0-9._-]{{1,{limits.gateway_instance_chars_max}}}")


def _lease(gateway: Mapping[str, Any]) -> dict[str, float]:
    lease = values.positive(
        "[gateway] lease_s", gateway.get("lease_s", limits.gateway_lease_s_default)
    )
    low, high = limits.gateway_lease_s_min, limits.gateway_lease_s_max
    if not low <= lease <= high:
        raise ConfigError(f"[gateway] lease_s must be in [{low}, {high}], got {lease}")
    default = min(limits.gateway_heartbeat_s_default, lease / 4)
    heartbeat = values.positive("[gateway] heartbeat_s", gateway.get("heartbeat_s", default))
    if heartbeat > lease / 4:
        raise ConfigError(
            f"[gateway] heartbeat_s must be at most a quarter of lease_s ({lease / 4:g})"
        )
    return {"lease_s": lease, "heartbeat_s": heartbeat}


def _count(what: str, value: Any, count_max: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= count_max:
        raise ConfigError(f"{what} must be a whole number from 0 to {count_max}")
    return value


def _tokens(environment_value: str | None, path: Any, base_dir: Path) -> frozenset[Token]:
    found: list[str] = []
    if environment_value:
        found += [part for part in re.split(r"[\s,]+", environment_value) if part]
    if path is not None:
        found += values.read_lines(base_dir, path, "gateway")
    try:
        return token_sources.tokens(found)
    except TokenError as error:
        raise ConfigError(f"gateway token: {error}") from None


def _listen(value: Any) -> tuple[str, int]:
    text = values.string("[gateway] listen", value, 300)
    host, _, port_text = text.rpartition(":")
    port = parse_decimal(port_text)
    if not host or port is None or not 0 <= port <= 65_535:
        raise ConfigError(f"[gateway] listen {text!r}: use host:port (port 0: any free port)")
    return host.strip("[]"), port


def _backoff(value: Any) -> float:
    if value is None:
        return limits.replicator_retry_backoff_s_max
    seconds = values.positive("[gateway] retry_backoff_s_max", value)
    low, high = limits.replicator_retry_backoff_s_initial, limits.replicator_retry_backoff_s_max
    if not low < seconds <= high:
        raise ConfigError(f"[gateway] retry_backoff_s_max must be in ({low}, {high}]")
    return seconds


def _stuck_after(value: Any) -> float:
    if value is None:
        return limits.replicator_stuck_after_s_default
    seconds = values.positive("[gateway] stuck_after_s", value)
    low, high = limits.replicator_stuck_after_s_min, limits.replicator_stuck_after_s_max
    if not low <= seconds <= high:
        raise ConfigError(f"[gateway] stuck_after_s must be in [{low:g}, {high:g}]")
    return seconds


def _rate(key: str, value: Any) -> float | None:
    if value is None or (value == 0 and not isinstance(value, bool)):
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ConfigError(
            f"[rate_limits] {key} must be a number >= 0 (0: unlimited), got {value!r}"
        )
    return float(value)


def _seeds(
    policies: Mapping[str, Any], kind: str, remotes: Mapping[str, Any], local: str
) -> dict[str, tuple[str, ...]]:
    table = policies.get(kind, {})
    if not isinstance(table, Mapping):
        raise ConfigError(f"[policies.{kind}] must be a table")
    out = {}
    for name, clusters in table.items():
        try:
            if kind == "namespaces":
                check_namespace(name)
            else:
                name = str(TopicName.parse(name))
        except InvalidTopicName as error:
            raise ConfigError(f"[policies.{kind}] {name!r}: {error}") from None
        if not isinstance(clusters, list) or not all(isinstance(c, str) for c in clusters):
            raise ConfigError(f"[policies.{kind}] {name!r}: give a list of cluster names")
        unknown = sorted(set(clusters) - set(remotes) - {local})
        if unknown:
            raise ConfigError(
                f"[policies.{kind}] {name!r}: unknown cluster(s) {unknown}; [remotes] has"
                f" {sorted(remotes)}"
            )
        out[name] = tuple(sorted(set(clusters) - {local}))
    return out
