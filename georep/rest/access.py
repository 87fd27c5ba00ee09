"""Who may reach a REST server at all, before any token is looked at.

A browser on the operator's machine is the attacker to keep out: any page it opens may
send requests to ``127.0.0.1``, and by DNS rebinding a page's own name may come to point
at ``127.0.0.1`` too. So every request to either server must:

- name an allowed host in ``Host`` (403 otherwise; this defeats rebinding, whose
  requests carry the attacker's name). Allowed by default: the loopback names
  (``localhost``, ``127.0.0.1``, ``::1``) and the address the server listens on; more
  with ``GEOREP_ALLOWED_HOSTS`` (names separated by commas or white space, ``*``: any).
  A server that listens on every address (``0.0.0.0``) with tokens required allows any
  name: tokens guard it, and its clients reach it by names it cannot know;
- be same-origin when it says where it comes from: an ``Origin`` header must be the
  server's own ``scheme://host:port``, and ``Sec-Fetch-Site`` (sent by browsers) must
  be ``same-origin`` or ``none`` (403 otherwise);
- when it is a POST, say ``Content-Type: application/json``, with or without a body
  (415 otherwise). A browser sends a cross-site POST without asking first only as a
  form or text; PUT and DELETE it never sends cross-site without a preflight, which
  neither server answers.

And a server that listens beyond loopback must require tokens: :func:`check_exposure`
refuses to start one that would not, unless the operator passed ``--insecure``.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass, field

from aiohttp import web

from georep.rest.errors import Forbidden, UnsupportedMediaType
from georep.rest.json_io import JSON, media_type
from georep.rest.tokens import Token

ALLOWED_HOSTS_ENV = "GEOREP_ALLOWED_HOSTS"
ANY_HOST = "*"
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
_EVERY_ADDRESS = frozenset({"0.0.0.0", "::", ""})


class ExposureError(ValueError):
    """A server would listen beyond loopback with no token to guard it."""


@dataclass(frozen=True)
class Access:
    """What a server checks of every request: tokens (``auth.py``) and allowed hosts."""

    admin_tokens: frozenset[Token] = field(default=frozenset(), repr=False)
    read_only_tokens: frozenset[Token] = field(default=frozenset(), repr=False)
    allowed_hosts: frozenset[str] = LOOPBACK_NAMES

    @property
    def open(self) -> bool:
        return not self.admin_tokens


def is_loopback(host: str) -> bool:
    name = host.strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def allowed_hosts(
    listen_host: str, configured: Iterable[str], *, tokens_required: bool
) -> frozenset[str]:
    names = {name.strip("[]").lower() for name in configured}
    listen = listen_host.strip("[]").lower()
    if listen in _EVERY_ADDRESS:
        if tokens_required:
            names.add(ANY_HOST)
    else:
        names.add(listen)
    return frozenset(names | LOOPBACK_NAMES)


def check_exposure(what: str, listen_host: str, *, tokens_required: bool, insecure: bool) -> str:
    """Refuse (ExposureError) a server on ``listen_host`` beyond loopback without
    tokens unless ``insecure``; the warning to print when it starts open anyway, or ''."""
    if tokens_required:
        return ""
    if is_loopback(listen_host):
        return (
            f"{what} is OPEN (no admin token): any local process may change it;"
            " set tokens to require them"
        )
    if not insecure:
        raise ExposureError(
            f"{what} would listen on {listen_host or 'every address'} with no admin token:"
            " anyone who can reach it could change anything; set tokens"
            " (docs: README, Tokens) or pass --insecure to accept that"
        )
    return (
        f"{what} is OPEN on {listen_host or 'every address'} (--insecure): anyone who can"
        " reach it may change anything"
    )


def check_request(request: web.BaseRequest, access: Access) -> None:
    """Host, Origin and Sec-Fetch-Site of any request (see the module's docstring)."""
    host = _host_name(request.headers.get("Host", ""))
    if ANY_HOST not in access.allowed_hosts and host not in access.allowed_hosts:
        raise Forbidden(
            f"Host {printable(host)!s} is not one this server answers to;"
            f" allowed: {sorted(access.allowed_hosts)} (set {ALLOWED_HOSTS_ENV} to add names)"
        )
    origin = request.headers.get("Origin")
    if origin is not None:
        own = f"{request.scheme}://{request.headers.get('Host', '')}".lower()
        if origin.lower() != own:
            raise Forbidden(f"cross-origin request from {printable(origin)} refused")
    fetch_site = request.headers.get("Sec-Fetch-Site")
    if fetch_site is not None and fetch_site.lower() not in ("same-origin", "none"):
        raise Forbidden(f"a {printable(fetch_site)} request from a browser is refused")


def check_mutation(request: web.BaseRequest) -> None:
    """A POST must be ``application/json``, body or not."""
    if request.method == "POST" and media_type(request) != JSON:
        raise UnsupportedMediaType(
            f"a POST must say Content-Type: {JSON} (even without a body);"
            f" got {printable(media_type(request) or 'none')}"
        )


def _host_name(header: str) -> str:
    """The name of a Host header without its port: ``[::1]:8080`` -> ``::1``."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:].split("]", 1)[0]
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def printable(text: str, chars_max: int = 200) -> str:
    """``text`` safe for one log line or error message: control and other unprintable
    characters as escapes (``\\n`` cannot start a forged line, NUL cannot make a log
    binary), cut at ``chars_max``."""
    out = "".join(
        char if char.isprintable() and char != "\\" else char.encode("unicode_escape").decode()
        for char in text[:chars_max]
    )
    return out + ("..." if len(text) > chars_max else "")
