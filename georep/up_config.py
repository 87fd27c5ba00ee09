"""What ``georep up`` runs (``up.py``): the clusters and gateways of one topology, as
``up.load_config`` reads them from its TOML file. Kept apart so that what runs on a
started topology (``up_demo.py``, ``drill/``) reads it without importing the supervisor.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class ClusterSpec:
    name: str
    broker_port: int
    admin_port: int
    fsync: bool = True


@dataclass(frozen=True)
class GatewaySpec:
    cluster: str
    port: int
    replicate: dict[str, list[str]] = field(default_factory=dict)
    #: The gateway's [subscription_sync] table, written as given (checked by the gateway).
    subscription_sync: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class UpConfig:
    data_dir: Path
    clusters: dict[str, ClusterSpec]
    gateways: dict[str, GatewaySpec]
    host: str = "127.0.0.1"
    #: Token files ([tokens] admin_file, gateway_file), absolute; None: the environment.
    admin_token_file: Path | None = None
    gateway_token_file: Path | None = None
