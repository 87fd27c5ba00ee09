"""A party's TLS certificate chain and private key, as PEM files, and the server context
they make: what the broker, the cluster's admin REST and the gateway's REST serve TLS
with (``georep/runtime/loopback_ca.py`` makes such files for one machine; a deployment brings its
own). A leaf of the house: it imports nothing of georep."""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class TlsFiles:
    """One party's certificate chain and private key (PEM files)."""

    cert_file: Path
    key_file: Path

    def server_context(self, *, client_ca_file: Path | None = None) -> ssl.SSLContext:
        """A server context presenting this certificate (TLS 1.2 at least); with
        ``client_ca_file``, a client must present a certificate of that CA (mutual TLS).
        OSError or ssl.SSLError when a file cannot be read or the key does not match."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(self.cert_file, self.key_file)
        if client_ca_file is not None:
            context.load_verify_locations(client_ca_file)
            context.verify_mode = ssl.CERT_REQUIRED
        return context
