"""Checks of single values of the gateway's TOML file, shared by ``config.py`` and
``cluster_endpoint.py``: a table, a bounded string, a flag, a path (relative to the
file's own directory), a positive number, the lines of a file. Each returns the value
typed, or raises ``ConfigError`` naming the key at fault (``what``), as in
``[gateway] lease_s must be a number > 0, got -1``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from georep.runtime.console import ConfigError


def table(document: Mapping[str, Any], key: str, *, required: bool = False) -> Mapping[str, Any]:
    value = document.get(key)
    if value is None:
        if required:
            raise ConfigError(f"[{key}] is required")
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"[{key}] must be a table")
    return value


def string(what: str, value: Any, chars_max: int) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= chars_max:
        raise ConfigError(f"{what} must be a string of 1..{chars_max} characters")
    return value


def flag(what: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{what} must be true or false, got {value!r}")
    return value


def path(what: str, value: Any, base_dir: Path) -> Path:
    """A file the configuration names, relative to the file's own directory."""
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{what} must be a path")
    return (base_dir / value).resolve()


def positive(what: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ConfigError(f"{what} must be a number > 0, got {value!r}")
    return float(value)


def read_lines(base_dir: Path, value: Any, where: str) -> list[str]:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"[{where}] token_file must be a path")
    file = base_dir / value
    try:
        lines = file.read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise ConfigError(f"[{where}] cannot read token file {file}: {error.strerror}") from None
    return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]
