"""Settings of the cluster's admin REST, from flags and environment, in one typed object.

Tokens are the only secrets. They come from the environment or from files, never from a
flag's value (a flag shows in ``ps`` and shell history):

- ``GEOREP_ADMIN_TOKENS``, ``GEOREP_ADMIN_READ_ONLY_TOKENS``: tokens separated by commas
  or white space;
- ``--admin-token-file F``, ``--admin-read-only-token-file F``: one token per line; blank
  lines and lines starting with ``#`` are skipped.

A token is kept as a :class:`Token`, whose ``repr`` and ``str`` are ``***``, so that
logging the settings (or an exception holding them) shows no secret. With no admin token
at all the REST is open (``AdminSettings.open`` is True) and the app says so at start.

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
import hashlib
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from georep import limits

ADMIN_TOKENS_ENV = "GEOREP_ADMIN_TOKENS"
READ_ONLY_TOKENS_ENV = "GEOREP_ADMIN_READ_ONLY_TOKENS"
#: Pulsar's default web service port.
DEFAULT_PORT = 8080
DEFAULT_HOST = "127.0.0.1"

# RFC 6750 b64token: what a Bearer credential may contain.
_TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
_CLUSTER = re.compile(r"[-=:.\w]+", re.ASCII)


class AdminSettingsError(ValueError):
    """A setting is missing or invalid; the message says which and why (never a token)."""


class Token:
    """A bearer token. Compared by its SHA-256 digest; never printed."""

    __slots__ = ("_value", "digest")

    def __init__(self, value: str) -> None:
        if not isinstance(value, str):
            raise AdminSettingsError("a token must be a string")
        if not limits.admin_token_chars_min <= len(value) <= limits.admin_token_chars_max:
            raise AdminSettingsError(
                f"a token has {len(value)} characters; it needs"
                f" {limits.admin_token_chars_min}..{limits.admin_token_chars_max}"
            )
        if not _TOKEN.fullmatch(value):
            raise AdminSettingsError(
                "a token may use only letters, digits and -._~+/ (and trailing =)"
            )
        self._value = value
        self.digest = hashlib.sha256(value.encode()).digest()

    def reveal(self) -> str:
        """The token itself, for a client that must send it."""
        return self._value

    def __repr__(self) -> str:
        return "Token(***)"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Token) and other.digest == self.digest

    def __hash__(self) -> int:
        return hash(self.digest)


def tokens(values: Iterable[str | Token]) -> frozenset[Token]:
    return frozenset(value if isinstance(value, Token) else Token(value) for value in values)


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
    request_body_bytes_max: int = limits.admin_request_body_bytes_max

    def __post_init__(self) -> None:
        if not isinstance(self.cluster_name, str) or not _CLUSTER.fullmatch(self.cluster_name):
            raise AdminSettingsError(
                f"cluster name {self.cluster_name!r} may use only letters, digits and -=:._"
            )
        if len(self.cluster_name) > limits.cluster_name_chars_max:
            raise AdminSettingsError(
                f"cluster name has {len(self.cluster_name)} characters;"
                f" at most {limits.cluster_name_chars_max}"
            )
        if not isinstance(self.metadata_url, str) or not self.metadata_url:
            raise AdminSettingsError("a metadata URL is required")
        if not isinstance(self.port, int) or isinstance(self.port, bool):
            raise AdminSettingsError(f"admin port must be an integer, got {self.port!r}")
        if not 0 <= self.port <= 65_535:
            raise AdminSettingsError(f"admin port {self.port} is not 0..65535")
        object.__setattr__(self, "admin_tokens", tokens(self.admin_tokens))
        object.__setattr__(self, "read_only_tokens", tokens(self.read_only_tokens))
        for role, found in (("admin", self.admin_tokens), ("read-only", self.read_only_tokens)):
            if len(found) > limits.admin_tokens_count_max:
                raise AdminSettingsError(
                    f"{len(found)} {role} tokens; at most {limits.admin_tokens_count_max}"
                )
        if self.read_only_tokens and not self.admin_tokens:
            raise AdminSettingsError(
                "read-only tokens are set but no admin token: the REST would stay open to"
                f" mutations; set {ADMIN_TOKENS_ENV} or --admin-token-file too"
            )
        if self.admin_tokens & self.read_only_tokens:
            raise AdminSettingsError("a token is both an admin and a read-only token")
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            raise AdminSettingsError("TLS needs both --admin-tls-cert and --admin-tls-key")
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

    def replace(self, **changes: object) -> AdminSettings:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

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
            help=f"file of read-only tokens, one a line (or set {READ_ONLY_TOKENS_ENV})",
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
        admin = _tokens_from(environ.get(ADMIN_TOKENS_ENV), args.admin_token_file)
        read_only = _tokens_from(environ.get(READ_ONLY_TOKENS_ENV), args.admin_read_only_token_file)
        return cls(
            cluster_name=cluster_name,
            metadata_url=metadata_url,
            host=args.admin_host,
            port=args.admin_port,
            admin_tokens=admin,
            read_only_tokens=read_only,
            tls_cert_file=args.admin_tls_cert,
            tls_key_file=args.admin_tls_key,
        )


def _tokens_from(environment_value: str | None, path: str | None) -> frozenset[Token]:
    found: list[str] = []
    if environment_value:
        found.extend(part for part in re.split(r"[\s,]+", environment_value) if part)
    if path:
        try:
            with open(path, encoding="utf-8") as file:
                lines = file.read().splitlines()
        except OSError as error:
            raise AdminSettingsError(f"cannot read token file {path}: {error.strerror}") from None
        found.extend(
            line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")
        )
    return tokens(found)
