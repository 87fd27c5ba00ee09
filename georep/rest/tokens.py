"""Bearer tokens: where they come from, and how they are kept.

Tokens are the only secrets. They come from the environment or from files, never from a
flag's value (a flag shows in ``ps`` and shell history). One set of variables serves
every georep process; a server accepts any token of its list, a client (the gateway
calling its clusters, ``georep drill``, ``georep export``, ``georep up``) sends the first:

======================================  ================================================
variable                                what it holds
======================================  ================================================
``GEOREP_ADMIN_TOKENS``                 admin tokens of the clusters' admin REST
``GEOREP_ADMIN_READ_ONLY_TOKENS``       read-only tokens of the clusters' admin REST
``GEOREP_GATEWAY_TOKENS``               admin tokens of the gateways' REST
``GEOREP_GATEWAY_READ_ONLY_TOKENS``     read-only tokens of the gateways' REST
======================================  ================================================

Values are separated by commas or white space. A token file holds one token a line;
blank lines and lines starting with ``#`` are skipped.

A token is kept as a :class:`Token`, whose ``repr`` and ``str`` are ``***``, so that
logging a configuration (or an exception holding one) shows no secret.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping

from georep import limits

ADMIN_TOKENS_ENV = "GEOREP_ADMIN_TOKENS"
ADMIN_READ_ONLY_TOKENS_ENV = "GEOREP_ADMIN_READ_ONLY_TOKENS"
GATEWAY_TOKENS_ENV = "GEOREP_GATEWAY_TOKENS"
GATEWAY_READ_ONLY_TOKENS_ENV = "GEOREP_GATEWAY_READ_ONLY_TOKENS"

# RFC 6750 b64token: what a Bearer credential may contain.
_TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")


class TokenError(ValueError):
    """A token (or a token file) is unusable; the message never holds a token."""


class Token:
    """A bearer token. Compared by its SHA-256 digest; never printed."""

    __slots__ = ("_value", "digest")

    def __init__(self, value: str) -> None:
        if not isinstance(value, str):
            raise TokenError("a token must be a string")
        if not limits.admin_token_chars_min <= len(value) <= limits.admin_token_chars_max:
            raise TokenError(
                f"a token has {len(value)} characters; it needs"
                f" {limits.admin_token_chars_min}..{limits.admin_token_chars_max}"
            )
        if not _TOKEN.fullmatch(value):
            raise TokenError("a token may use only letters, digits and -._~+/ (and trailing =)")
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
    found = frozenset(value if isinstance(value, Token) else Token(value) for value in values)
    if len(found) > limits.admin_tokens_count_max:
        raise TokenError(f"{len(found)} tokens; at most {limits.admin_tokens_count_max}")
    return found


def split(environment_value: str | None) -> list[str]:
    """The tokens of a variable's value, in order."""
    return [part for part in re.split(r"[\s,]+", environment_value or "") if part]


def read_file(path: str) -> list[str]:
    """The tokens of a token file, in order."""
    try:
        with open(path, encoding="utf-8") as file:
            lines = file.read().splitlines()
    except OSError as error:
        raise TokenError(f"cannot read token file {path}: {error.strerror}") from None
    except UnicodeDecodeError:
        raise TokenError(f"token file {path} is not UTF-8 text") from None
    return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]


def tokens_from(environment_value: str | None, path: str | None) -> frozenset[Token]:
    """Tokens from a variable's value and a token file, merged."""
    found = split(environment_value)
    if path:
        found += read_file(path)
    return tokens(found)


def client_token(environ: Mapping[str, str], variable: str) -> str | None:
    """The token a client sends to a server that reads ``variable``: its first."""
    found = split(environ.get(variable))
    if not found:
        return None
    return Token(found[0]).reveal()  # checked like a server would, so a typo fails here
