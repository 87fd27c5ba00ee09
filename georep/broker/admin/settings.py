"""Settings of the cluster's admin REST, from flags and environment, in one typed object.

Tokens (``rest/tokens.py``) come from ``GEOREP_ADMIN_TOKENS`` and
``GEOREP_ADMIN_READ_ONLY_TOKENS``, or from ``--admin-token-file F`` and
``--admin-read-only-token-file F``; both sources are merged. With no admin token at all
the REST is open (``AdminSettings.open`` is True) and the process says so at start; it
then refuses to listen beyond loopback unless ``--insecure`` (``rest/access.py``).
Allowed ``Host`` names come from ``GEOREP_ALLOWED_HOSTS``.

Example::

    parser = argparse.ArgumentParser()
    AdminSettings.add_arguments(parser)
    args = parser.parse_args(["--admin-port", "8080"])
    settings = AdminSettings.from_args(args, os.environ, cluster_name="A",
                                       metadata_url="sqlite:////data/meta.db")
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from georep import limits
from georep.domain import names
from georep.rest import tokens as token_sources
from georep.rest.access import ALLOWED_HOSTS_ENV, Access, allowed_hosts
from georep.rest.tokens import (
    ADMIN_READ_ONLY_TOKENS_ENV,
    ADMIN_TOKENS_ENV,
    Token,
    TokenError,
    tokens_from,
)

#: Pulsar's default web service port.
DEFAULT_PORT = 8080
DEFAULT_HOST = "127.0.0.1"


class AdminSettingsError(ValueError):
    """A setting is missing or invalid; the message says which and why (never a token)."""


@dataclass(frozen=True)
class AdminSettings:
    """Everything the admin app and its server need; checked when constructed."""

    #: This cluster's name: the default tenant's allowed cluster, ``GET /admin/v2/clusters``.
    cluster_name: str
    #: The metadata store holding tenants and namespaces (see ``storage/meta/migrate.py``).
    metadata_url: str
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    admin_tokens: frozenset[Token] = field(default=frozenset(), repr=False)
    read_only_tokens: frozenset[Token] = field(default=frozenset(), repr=False)
    #: PEM files; both or neither. With them the server speaks HTTPS only.
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    #: PEM CA bundle: over TLS, a client must present a certificate of it (mutual TLS).
    tls_client_ca_file: str | None = None
    request_body_bytes_max: int = limits.admin_request_body_bytes_max
    #: ``Host`` names allowed beside the defaults (``rest/access.py``); ``*``: any.
    allowed_hosts: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        try:
            names.check("cluster", self.cluster_name)
        except names.InvalidName as error:
            raise AdminSettingsError(str(error)) from None
        if not isinstance(self.metadata_url, str) or not self.metadata_url:
            raise AdminSettingsError("a metadata URL is required")
        if not isinstance(self.port, int) or isinstance(self.port, bool):
            raise AdminSettingsError(f"admin port must be an integer, got {self.port!r}")
        if not 0 <= self.port <= 65_535:
            raise AdminSettingsError(f"admin port {self.port} is not 0..65535")
        try:
            object.__setattr__(self, "admin_tokens", token_sources.tokens(self.admin_tokens))
            object.__setattr__(
                self, "read_only_tokens", token_sources.tokens(self.read_only_tokens)
            )
        except TokenError as error:
            raise AdminSettingsError(str(error)) from None
        if self.read_only_tokens and not self.admin_tokens:
            raise AdminSettingsError(
                "read-only tokens are set but no admin token: the REST would stay open to"
                f" mutations; set {ADMIN_TOKENS_ENV} or --admin-token-file too"
            )
        if self.admin_tokens & self.read_only_tokens:
            raise AdminSettingsError("a token is both an admin and a read-only token")
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            raise AdminSettingsError("TLS needs both --admin-tls-cert and --admin-tls-key")
        if self.tls_client_ca_file is not None and self.tls_cert_file is None:
            raise AdminSettingsError("client certificates are asked for over TLS only")
        if not 1 <= self.request_body_bytes_max <= limits.admin_request_body_bytes_max:
            raise AdminSettingsError(
                f"request body limit {self.request_body_bytes_max} is not"
                f" 1..{limits.admin_request_body_bytes_max}"
            )

    @property
    def open(self) -> bool:
        """True when no token is configured: anyone who reaches the port may change
        anything."""
        return not self.admin_tokens

    @property
    def access(self) -> Access:
        """What the REST checks of every request (``rest/access.py``)."""
        return Access(
            self.admin_tokens,
            self.read_only_tokens,
            allowed_hosts(self.host, self.allowed_hosts, tokens_required=not self.open),
        )

    def replace(self, **changes: Any) -> AdminSettings:
        return dataclasses.replace(self, **changes)

    # --- flags and environment ------------------------------------------------------
    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        group = parser.add_argument_group("admin REST")
        group.add_argument("--admin-host", default=DEFAULT_HOST, help="address to listen on")
        group.add_argument(
            "--admin-port", type=int, default=DEFAULT_PORT, help="port (0: any free port)"
        )
        group.add_argument(
            "--admin-token-file",
            help=f"file of admin tokens, one a line (or set {ADMIN_TOKENS_ENV})",
        )
        group.add_argument(
            "--admin-read-only-token-file",
            help=f"file of read-only tokens, one a line (or set {ADMIN_READ_ONLY_TOKENS_ENV})",
        )
        group.add_argument("--admin-tls-cert", help="PEM certificate chain: serve HTTPS")
        group.add_argument("--admin-tls-key", help="PEM private key of --admin-tls-cert")

    @classmethod
    def from_args(
        cls,
        args: argparse.Namespace,
        environ: Mapping[str, str] = os.environ,
        *,
        cluster_name: str,
        metadata_url: str,
    ) -> AdminSettings:
        """Settings from parsed :meth:`add_arguments` flags and the environment: tokens
        from both sources are merged."""
        try:
            admin = tokens_from(environ.get(ADMIN_TOKENS_ENV), args.admin_token_file)
            read_only = tokens_from(
                environ.get(ADMIN_READ_ONLY_TOKENS_ENV), args.admin_read_only_token_file
            )
        except TokenError as error:
            raise AdminSettingsError(str(error)) from None
        return cls(
            cluster_name=cluster_name,
            metadata_url=metadata_url,
            host=args.admin_host,
            port=args.admin_port,
            admin_tokens=admin,
            read_only_tokens=read_only,
            tls_cert_file=args.admin_tls_cert,
            tls_key_file=args.admin_tls_key,
            allowed_hosts=tuple(token_sources.split(environ.get(ALLOWED_HOSTS_ENV))),
        )
