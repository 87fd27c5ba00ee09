"""A Pulsar standalone secured as production runs one: TLS-only client ports, token
authentication and authorization.

:class:`PulsarSecurity` holds what a secured standalone and its clients share: the CA
(``ca.pem`` of a :class:`~georep.runtime.loopback_ca.LoopbackCa`), the broker's certificate,
and an HS256 secret key from which tokens are minted (``sub`` is the role, which is what
Pulsar's ``AuthenticationProviderToken`` takes). :meth:`PulsarSecurity.broker_settings`
is the part of ``standalone.conf`` that turns it on; each key was checked on 4.0.7:

- ``brokerServicePortTls`` / ``webServicePortTls`` carry the ports, and
  ``brokerServicePort`` / ``webServicePort`` are written empty: Pulsar reads an empty
  value as "no such port" (a missing key would mean the defaults 6650 and 8080).
- ``tlsCertificateFilePath``, ``tlsKeyFilePath`` (PKCS#8), ``tlsTrustCertsFilePath``.
- ``authenticationEnabled``, ``authenticationProviders`` = the token provider,
  ``tokenSecretKey=file://<key>`` (the key's raw bytes), ``authorizationEnabled``,
  ``superUserRoles``, and ``authenticateMetricsEndpoint`` (the Prometheus page asks
  for a token too).
- ``brokerClient*``: the broker's own clients (its admin client, and the replicator
  of Pulsar's geo-replication) speak TLS, verify host names against the same CA, and
  authenticate as the superuser with a token read from a file.

Worked example::

    ca = LoopbackCa.create(Path("/tmp/tls"))
    security = PulsarSecurity.create(Path("/tmp/a-secrets"), ca, "A")
    spec = StandaloneSpec("A", Path("/tmp/a"), security=security)
    security.token("georep-gateway")         # a token for the gateway's role
"""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass
from pathlib import Path

import jwt

from georep.runtime.loopback_ca import LoopbackCa
from georep.runtime.tls_files import TlsFiles

#: The role every secured standalone treats as its superuser (its own clients use it).
SUPERUSER_ROLE = "pulsar-superuser"
#: HS256 key bytes: jjwt, which Pulsar verifies tokens with, refuses keys under 256 bits.
SECRET_KEY_BYTES = 32
TOKEN_PROVIDER = "org.apache.pulsar.broker.authentication.AuthenticationProviderToken"
TOKEN_CLIENT_PLUGIN = "org.apache.pulsar.client.impl.auth.AuthenticationToken"


@dataclass(frozen=True)
class PulsarSecurity:
    """TLS files and the token key of one secured standalone (or several sharing them)."""

    ca_file: Path
    server: TlsFiles
    secret_key_file: Path
    superuser_token_file: Path

    @classmethod
    def create(cls, directory: Path, ca: LoopbackCa, name: str) -> PulsarSecurity:
        """A server certificate for ``name`` from ``ca``, a new secret key and the
        superuser's token, written into ``directory`` (readable by their owner only)."""
        directory.mkdir(parents=True, exist_ok=True)
        secret_key_file = directory / "token-secret.key"
        _write_private(secret_key_file, os.urandom(SECRET_KEY_BYTES))
        security = cls(
            ca_file=ca.ca_file,
            server=ca.server_files(name),
            secret_key_file=secret_key_file,
            superuser_token_file=directory / "superuser.token",
        )
        _write_private(security.superuser_token_file, security.token(SUPERUSER_ROLE).encode())
        return security

    def token(self, role: str) -> str:
        """A token (HS256, no expiry) whose subject is ``role``."""
        return jwt.encode({"sub": role}, self.secret_key_file.read_bytes(), algorithm="HS256")

    @property
    def superuser_token(self) -> str:
        return self.superuser_token_file.read_text()

    def client_context(self) -> ssl.SSLContext:
        """What a client of ours verifies the standalone with: the CA, the host name."""
        return ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(self.ca_file))

    def broker_settings(self, broker_port: int, web_port: int) -> dict[str, str]:
        """``standalone.conf`` keys: TLS-only client ports, tokens, authorization."""
        return {
            "brokerServicePort": "",
            "webServicePort": "",
            "brokerServicePortTls": str(broker_port),
            "webServicePortTls": str(web_port),
            "tlsCertificateFilePath": str(self.server.cert_file),
            "tlsKeyFilePath": str(self.server.key_file),
            "tlsTrustCertsFilePath": str(self.ca_file),
            "authenticationEnabled": "true",
            "authenticationProviders": TOKEN_PROVIDER,
            "tokenSecretKey": f"file://{self.secret_key_file}",
            "authorizationEnabled": "true",
            "superUserRoles": SUPERUSER_ROLE,
            "authenticateMetricsEndpoint": "true",
            "brokerClientTlsEnabled": "true",
            "brokerClientTrustCertsFilePath": str(self.ca_file),
            "tlsHostnameVerificationEnabled": "true",
            "brokerClientAuthenticationPlugin": TOKEN_CLIENT_PLUGIN,
            "brokerClientAuthenticationParameters": f"file://{self.superuser_token_file}",
        }


def _write_private(path: Path, content: bytes) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as file:
        file.write(content)
