"""How the gateway reaches one cluster: ``ClusterEndpoint``, read from a cluster table of
the gateway's file (``[local]`` or ``[remotes.NAME]``) by :func:`parse_endpoint`.

A table gives the cluster's name and ``kind`` (georep's own or real Apache Pulsar), its
two URLs (``pulsar[+ssl]://host:port``, ``http[s]://host:port``), at most one token
source (``token``, ``token_file``, ``token_env``; none: the first of
``GEOREP_ADMIN_TOKENS``), its TLS settings (``client/tls.py``; refused beside two
plaintext URLs, since they would protect nothing), the broker listener lookups answer
with, the keep-alive interval and, for a remote, the replication window. Example::

    [remotes.B]
    service_url = "pulsar+ssl://pulsar-b.example:6651"
    admin_url = "https://pulsar-b.example:8443"
    token_file = "/etc/georep/cluster-b-token"
    tls_trust_certs_file = "/etc/georep/ca-b.pem"
    replication_window_entries = 1000

Every error names the table and the key at fault (``[remotes.B] admin_url ...``).
"""

from __future__ import annotations

import enum
import logging
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yarl

from georep import limits
from georep.client.tls import ClientTls, TlsSettingsError, uses_tls
from georep.domain import names
from georep.gateway import config_values as values
from georep.rest import tokens as token_sources
from georep.rest.tokens import ADMIN_TOKENS_ENV, Token, TokenError
from georep.runtime.console import ConfigError, check_keys

#: The file's warnings (a literal token, TLS half off) under the name an operator knows
#: them by: the configuration's.
log = logging.getLogger("georep.gateway.config")

#: A cluster table's TLS keys (client/tls.py), named after Pulsar's client settings.
_TLS_KEYS = {
    "tls_trust_certs_file",
    "tls_hostname_verification",
    "tls_cert_file",
    "tls_key_file",
    "tls_allow_insecure_connection",
}
_CLUSTER_KEYS = {
    "name",
    "kind",
    "service_url",
    "admin_url",
    "token",
    "token_file",
    "token_env",
    "listener_name",
    "keepalive_interval_s",
    "replication_window_entries",
    "replication_window_bytes",
    *_TLS_KEYS,
}


class ClusterKind(enum.Enum):
    """What a cluster is (``kind`` of its table): georep's own, or real Apache Pulsar
    (docs/SUBSYNC.md). The gateway reaches each through a different subscription sync
    port (``manager.py``); checked when the file is read, so that nothing later meets a
    kind it does not know."""

    GEOREP = "georep"
    PULSAR = "pulsar"


@dataclass(frozen=True)
class ClusterEndpoint:
    """How the gateway reaches one cluster over its public interfaces."""

    name: str
    service_url: str
    admin_url: str
    token: Token | None = field(default=None, repr=False)
    #: ``georep`` (default) or ``pulsar``: a real Pulsar cluster, whose subscriptions are
    #: synced through admin v2 and an acknowledging consumer, markers on a side topic.
    kind: ClusterKind = ClusterKind.GEOREP
    #: How TLS links to it are checked; None when neither URL runs TLS.
    tls: ClientTls | None = None
    #: The one context every TLS connection to it shares, made from ``tls`` when the
    #: file is read (so a missing CA file stops the gateway at start, naming the key).
    ssl_context: ssl.SSLContext | None = field(default=None, repr=False, compare=False)
    #: The broker listener whose address lookups answer with (Pulsar's client setting
    #: ``listenerName``, matched against the brokers' ``advertisedListeners``): the one
    #: reachable from here, through a proxy, load balancer or NAT. None: the default.
    listener_name: str | None = None
    #: A link silent this long is sent a PING, and closed when a second interval passes
    #: without an answer; both are checked every half interval, so a black-holed link is
    #: noticed within three times this (docs/WAN.md).
    keepalive_interval_s: float = limits.link_keepalive_interval_s_default
    #: A replicator towards this cluster has at most this many entries, and bytes, sent
    #: and not yet answered (its window): over a link of round trip R it carries at most
    #: window / R a second per topic partition (docs/WAN.md sizes it).
    replication_window_entries: int = limits.replicator_pending_sends_count_max
    replication_window_bytes: int = limits.replicator_pending_sends_bytes_max

    @property
    def token_text(self) -> str | None:
        return self.token.reveal() if self.token is not None else None


def cluster_name(what: str, value: Any) -> str:
    try:
        return names.check("cluster", value)
    except names.InvalidName as error:
        raise ConfigError(f"{what}: {error}") from None


def parse_endpoint(
    where: str, table: Mapping[str, Any], environ: Mapping[str, str], base_dir: Path
) -> ClusterEndpoint:
    check_keys(table, _CLUSTER_KEYS, f"[{where}]")
    name = cluster_name(f"[{where}] name", table.get("name"))
    service_url = _url(f"[{where}] service_url", table.get("service_url"), ("pulsar", "pulsar+ssl"))
    admin_url = _url(f"[{where}] admin_url", table.get("admin_url"), ("http", "https"))
    sources = [key for key in ("token", "token_file", "token_env") if key in table]
    if len(sources) > 1:
        raise ConfigError(f"[{where}]: give one of token, token_file, token_env")
    token = None
    try:
        if "token" in table:
            log.warning("[%s] has a literal token; prefer token_file or token_env", where)
            token = Token(table["token"])
        elif "token_file" in table:
            token = Token(values.read_lines(base_dir, table["token_file"], where)[0])
        elif "token_env" in table:
            variable = table["token_env"]
            if not isinstance(variable, str) or variable not in environ:
                raise ConfigError(f"[{where}] token_env: environment variable {variable!r} unset")
            token = Token(environ[variable].strip())
        else:
            shared = token_sources.client_token(environ, ADMIN_TOKENS_ENV)
            token = Token(shared) if shared is not None else None
    except (TokenError, IndexError) as error:
        raise ConfigError(f"[{where}] token: {str(error) or 'empty file'}") from None
    client_tls = _client_tls(where, table, service_url, admin_url, base_dir)
    listener = table.get("listener_name")
    if listener is not None:
        listener = values.string(
            f"[{where}] listener_name", listener, limits.listener_name_chars_max
        )
    keepalive = values.positive(
        f"[{where}] keepalive_interval_s",
        table.get("keepalive_interval_s", limits.link_keepalive_interval_s_default),
    )
    if keepalive * 2 <= limits.link_request_timeout_s_default:
        raise ConfigError(
            f"[{where}] keepalive_interval_s must be over"
            f" {limits.link_request_timeout_s_default / 2} s (half the request timeout),"
            f" got {keepalive}"
        )
    return ClusterEndpoint(
        name,
        service_url,
        admin_url,
        token,
        _kind(where, table),
        tls=client_tls,
        ssl_context=_context(where, client_tls),
        listener_name=listener,
        keepalive_interval_s=keepalive,
        **_window(where, table),
    )


def _window(where: str, table: Mapping[str, Any]) -> dict[str, int]:
    """A remote's replication window, within ``limits.py``'s: a replicator's sends are
    held in memory until answered, and a remote broker takes at most so many at once."""
    given = {key: table[key] for key in ("replication_window_entries", "replication_window_bytes")
             if key in table}  # fmt: skip
    if given and where == "local":
        raise ConfigError(f"[local] {', '.join(given)}: a window is a remote's")
    out = {}
    bounds = {
        "replication_window_entries": (1, limits.replicator_pending_sends_count_max),
        "replication_window_bytes": (
            limits.pulsar_frame_bytes_max,  # the largest message fits
            limits.replicator_pending_sends_bytes_max,
        ),
    }
    for key, value in given.items():
        low, high = bounds[key]
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ConfigError(f"[{where}] {key} must be a whole number from {low} to {high}")
        out[key] = value
    return out


def _client_tls(
    where: str, table: Mapping[str, Any], service_url: str, admin_url: str, base_dir: Path
) -> ClientTls | None:
    """The cluster's TLS settings, where one of its URLs runs TLS."""
    given = sorted(_TLS_KEYS & set(table))
    tls_urls = [url for url in (service_url, admin_url) if uses_tls(url)]
    if not tls_urls:
        if given:
            raise ConfigError(
                f"[{where}] {', '.join(given)}: neither URL runs TLS; use pulsar+ssl:// and"
                " https:// (the settings would protect nothing)"
            )
        return None
    if len(tls_urls) == 1:
        plain = "admin_url" if uses_tls(service_url) else "service_url"
        log.warning(
            "[%s] %s is plaintext while the other URL runs TLS: what crosses it, the token"
            " too, is readable on the way",
            where,
            plain,
        )
    flags = {
        key: values.flag(f"[{where}] {key}", table.get(key, default))
        for key, default in (
            ("tls_hostname_verification", True),
            ("tls_allow_insecure_connection", False),
        )
    }
    if flags["tls_allow_insecure_connection"]:
        log.warning(
            "[%s] tls_allow_insecure_connection = true: the cluster's certificate is not"
            " checked, so anyone on the way can pose as it",
            where,
        )
    files = {
        key: values.path(f"[{where}] {key}", table[key], base_dir) if key in table else None
        for key in ("tls_trust_certs_file", "tls_cert_file", "tls_key_file")
    }
    try:
        return ClientTls(
            trust_certs_file=files["tls_trust_certs_file"],
            hostname_verification=flags["tls_hostname_verification"],
            cert_file=files["tls_cert_file"],
            key_file=files["tls_key_file"],
            allow_insecure_connection=flags["tls_allow_insecure_connection"],
        )
    except TlsSettingsError as error:
        raise ConfigError(f"[{where}] {error}") from None


def _context(where: str, client_tls: ClientTls | None) -> ssl.SSLContext | None:
    if client_tls is None:
        return None
    try:
        return client_tls.context()
    except TlsSettingsError as error:
        raise ConfigError(f"[{where}] {error}") from None


def _kind(where: str, table: Mapping[str, Any]) -> ClusterKind:
    value = table.get("kind", ClusterKind.GEOREP.value)
    try:
        return ClusterKind(value)
    except ValueError:
        known = ", ".join(kind.value for kind in ClusterKind)
        raise ConfigError(f"[{where}] kind {value!r}: use one of {known}") from None


def _url(what: str, value: Any, schemes: tuple[str, ...]) -> str:
    """A cluster URL: ``scheme://host:port``, the port 1..65535."""
    text = values.string(what, value, limits.cluster_url_chars_max)
    example = f"{schemes[0]}://host:port"
    try:
        url = yarl.URL(text)
        port = url.explicit_port
    except ValueError as error:
        raise ConfigError(f"{what} {text!r}: {error}; use {example}") from None
    if url.scheme not in schemes or not url.host or url.path not in ("", "/"):
        raise ConfigError(f"{what} {text!r}: use {example}")
    if url.query_string or url.fragment or url.user is not None:
        raise ConfigError(f"{what} {text!r}: use {example}, nothing more")
    if port is None or not 1 <= port <= 65_535:
        raise ConfigError(f"{what} {text!r}: the port must be 1..65535")
    return text


def same_place(one: str, other: str) -> bool:
    a, b = yarl.URL(one), yarl.URL(other)
    return (a.host, a.port) == (b.host, b.port)
