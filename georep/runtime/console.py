"""What a georep command says to the operator on the console, beside its log.

A configuration error is one line on stderr, ``georep <command>: <what is wrong>``, and
exit code :data:`EXIT_CONFIG` (2), with no traceback, timestamp or logger name: the
operator fixes the line and runs again. Checks that need the machine (is the host an
address here, is the port free) run before anything starts, so a mistake never leaves
half a topology running or a process restarting forever.

"""

from __future__ import annotations

import errno
import socket
import sys
from collections.abc import Iterable

#: Exit status of a command whose configuration is unusable.
EXIT_CONFIG = 2


class ConfigError(ValueError):
    """A configuration (file, flags, environment) is missing something or invalid; the
    message says what, and where (never a token)."""


class BindError(ConfigError):
    """An address a server was told to listen on cannot be had."""


def check_keys(table: Iterable[str], allowed: set[str], where: str) -> None:
    """ConfigError naming every key of ``table`` that is not in ``allowed``: a typo in a
    key must not silently mean its default."""
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {sorted(allowed)}")


def config_error(command: str, message: object) -> int:
    print(f"georep {command}: error: {message}", file=sys.stderr, flush=True)
    return EXIT_CONFIG


def check_bind(what: str, host: str, port: int) -> None:
    """Bind ``host:port`` once and let go: BindError in one line if the host is not an
    address of this machine or the port is taken. Port 0 checks the host only."""
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as error:
        raise BindError(f"{what}: host {host!r} is not an address ({error})") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                raise BindError(f"{what}: port {port} on {host} is in use") from None
            if error.errno == errno.EADDRNOTAVAIL:
                raise BindError(f"{what}: {host} is not an address of this machine") from None
            raise BindError(f"{what}: cannot listen on {host}:{port}: {error.strerror}") from None


def check_distinct(ports: dict[str, int]) -> None:
    """BindError naming two uses of one port (0s excepted)."""
    seen: dict[int, str] = {}
    for what, port in ports.items():
        if port and port in seen:
            raise BindError(f"{seen[port]} and {what} both want port {port}")
        seen[port] = what
