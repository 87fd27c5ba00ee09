"""A certificate authority for a TLS topology on one machine: ``georep up --tls``, the
tests and the benches.

A production deployment brings its own CA; on one machine something must make one, so
that every link of a loopback topology can run TLS exactly as it would across regions.
The certificates are made by ``trustme`` (on ``cryptography``), never by parsing a
tool's text output, and written as PEM files that every party reads:

- ``ca.pem``: the CA certificate, what a client trusts (``tls_trust_certs_file``);
- ``<name>.cert.pem`` / ``<name>.key.pem``: a leaf certificate and its private key. The
  key is PKCS#8 (``BEGIN PRIVATE KEY``), the one form both Python's ``ssl`` and
  Pulsar's brokers (Netty) read; the key file is readable by its owner only.

A server's certificate names ``127.0.0.1``, ``::1`` and ``localhost`` (hostname
verification holds on loopback); a client's certificate carries the role as its common
name, which Pulsar's ``AuthenticationProviderTls`` takes as the role.

Example::

    ca = LoopbackCa.create(Path("/tmp/tls"))
    broker = ca.server_files("A")       # /tmp/tls/A.cert.pem, /tmp/tls/A.key.pem
    gateway = ca.client_files("gateway-a")
    ca.ca_file                          # /tmp/tls/ca.pem
"""

from __future__ import annotations

import datetime
import os
from pathlib import Path

import trustme
from cryptography.hazmat.primitives import serialization

from georep.runtime.tls_files import TlsFiles

#: What a loopback server's certificate names.
LOOPBACK_NAMES = ("127.0.0.1", "::1", "localhost")

__all__ = ["LOOPBACK_NAMES", "LoopbackCa", "TlsFiles"]


class LoopbackCa:
    """A CA whose files live in ``directory``."""

    def __init__(self, directory: Path, ca: trustme.CA) -> None:
        self.directory = directory
        self._ca = ca
        self.ca_file = directory / "ca.pem"

    @classmethod
    def create(cls, directory: Path) -> LoopbackCa:
        """A new CA (RSA keys: what every TLS stack takes), its certificate written."""
        directory.mkdir(parents=True, exist_ok=True)
        ca = cls(directory, trustme.CA(key_type=trustme.KeyType.RSA))
        ca._ca.cert_pem.write_to_path(str(ca.ca_file))
        return ca

    def server_files(
        self,
        name: str,
        *,
        names: tuple[str, ...] = LOOPBACK_NAMES,
        not_after: datetime.datetime | None = None,
    ) -> TlsFiles:
        """A server certificate for ``names`` (default: loopback), written as ``name``'s
        files. ``not_after`` in the past makes an expired one (for tests)."""
        leaf = self._ca.issue_cert(
            *names, common_name=name, not_after=not_after, key_type=trustme.KeyType.RSA
        )
        return self._write(name, leaf)

    def client_files(self, role: str) -> TlsFiles:
        """A client certificate whose common name is ``role``."""
        leaf = self._ca.issue_cert(role, common_name=role, key_type=trustme.KeyType.RSA)
        return self._write(role, leaf)

    def _write(self, name: str, leaf: trustme.LeafCert) -> TlsFiles:
        files = TlsFiles(self.directory / f"{name}.cert.pem", self.directory / f"{name}.key.pem")
        chain = b"".join(blob.bytes() for blob in leaf.cert_chain_pems)
        files.cert_file.write_bytes(chain)
        key = serialization.load_pem_private_key(leaf.private_key_pem.bytes(), password=None)
        pkcs8 = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        descriptor = os.open(files.key_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "wb") as out:
            out.write(pkcs8)
        return files
