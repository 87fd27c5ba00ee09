"""What ``georep up`` runs (``up/supervisor.py``): the clusters and gateways of one topology, as
``up.load_config`` reads them from its TOML file. Kept apart so that what runs on a
started topology (``up/demo.py``, ``drill/``) reads it without importing the supervisor.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from georep.runtime.tls_files import TlsFiles


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
    #: ``[gateway] discovery_interval_s``; None: the gateway's default.
    discovery_interval_s: float | None = None


@dataclass(frozen=True)
class UpConfig:
    data_dir: Path
    clusters: dict[str, ClusterSpec]
    gateways: dict[str, GatewaySpec]
    host: str = "127.0.0.1"
    #: Token files ([tokens] admin_file, gateway_file), absolute; None: the environment.
    admin_token_file: Path | None = None
    gateway_token_file: Path | None = None
    #: ``[tls] enabled``: every link runs TLS, from a CA up makes under ``tls_dir``.
    tls: bool = False

    @property
    def tls_dir(self) -> Path:
        """Where up's CA (``runtime/loopback_ca.py``) writes its files: the CA certificate and one
        certificate and key per server, named after the process (``cluster-A``)."""
        return self.data_dir / "tls"

    @property
    def ca_file(self) -> Path | None:
        """What every client trusts (``tls_trust_certs_file``); None without TLS."""
        return self.tls_dir / "ca.pem" if self.tls else None

    def server_files(self, process: str) -> TlsFiles | None:
        """The certificate and key ``process`` (``cluster-A``, ``gateway-A``) serves TLS
        with, as ``LoopbackCa.server_files(process)`` writes them; None without TLS."""
        if not self.tls:
            return None
        return TlsFiles(self.tls_dir / f"{process}.cert.pem", self.tls_dir / f"{process}.key.pem")
