"""TLS for the gateway's links to a cluster: the binary protocol (``pulsar+ssl://``) and
the admin REST (``https://``), with Python's ``ssl`` (no hand-written crypto).

The settings are named after Pulsar's own client settings, so an operator who has
configured a Pulsar client reads them at once:

============================== ==================================== ================
key (a cluster's table)        Pulsar client                        default
============================== ==================================== ================
``tls_trust_certs_file``       ``tlsTrustCertsFilePath``            the system's CAs
``tls_hostname_verification``  ``tlsHostnameVerificationEnable``    true
``tls_cert_file``              ``tlsCertificateFilePath`` (mTLS)    none
``tls_key_file``               ``tlsKeyFilePath`` (mTLS)            none
``tls_allow_insecure_connection`` ``tlsAllowInsecureConnection``    false
============================== ==================================== ================

Whether a link runs TLS is said by its URL's scheme alone: ``pulsar+ssl://`` and
``https://`` always do, and a failed handshake is an error, never a reason to try
plaintext. A lookup that sends a TLS link to another broker follows that broker's TLS
URL (``broker_service_url_tls``); a broker that names none is an error too.

One :class:`ClientTls` makes one ``ssl.SSLContext`` (:meth:`ClientTls.context`), built
when the configuration is read, so a missing or unreadable file stops the gateway at
start with the key at fault, and shared by every connection to that cluster.

Example: ``ClientTls(trust_certs_file=Path("ca.pem")).context()`` verifies the broker's
certificate against ``ca.pem`` and its name against the URL's host; a broker presenting
a certificate of another CA fails the handshake with
``TLS: certificate verify failed: unable to get local issuer certificate``
(:func:`describe`).
"""

from __future__ import annotations

import logging
import ssl
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

#: URL schemes that run TLS: the binary protocol's and the admin REST's.
TLS_SCHEMES = frozenset({"pulsar+ssl", "https"})


class TlsSettingsError(ValueError):
    """A TLS setting cannot be used (a missing file, a key that does not match)."""


@dataclass(frozen=True)
class ClientTls:
    """How a client side of a TLS link checks the server and proves itself."""

    #: PEM CA bundle the server's certificate must chain to; None: the system's store.
    trust_certs_file: Path | None = None
    hostname_verification: bool = True
    #: A client certificate and its key (mutual TLS; Pulsar's ``AuthenticationTls``).
    cert_file: Path | None = None
    key_file: Path | None = None
    #: Accept any server certificate. For experiments only: a WARNING says so.
    allow_insecure_connection: bool = False

    def __post_init__(self) -> None:
        if (self.cert_file is None) != (self.key_file is None):
            raise TlsSettingsError("tls_cert_file and tls_key_file go together")

    def context(self) -> ssl.SSLContext:
        """A client context for these settings; TlsSettingsError names what is wrong."""
        try:
            context = ssl.create_default_context(
                ssl.Purpose.SERVER_AUTH,
                cafile=str(self.trust_certs_file) if self.trust_certs_file else None,
            )
        except (OSError, ssl.SSLError) as error:
            raise TlsSettingsError(
                f"tls_trust_certs_file {self.trust_certs_file}: {_reason(error)}"
            ) from None
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        if self.cert_file is not None and self.key_file is not None:
            try:
                context.load_cert_chain(str(self.cert_file), str(self.key_file))
            except (OSError, ssl.SSLError) as error:
                raise TlsSettingsError(
                    f"tls_cert_file {self.cert_file} / tls_key_file {self.key_file}:"
                    f" {_reason(error)}"
                ) from None
        if self.allow_insecure_connection:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        elif not self.hostname_verification:
            context.check_hostname = False
        return context


def uses_tls(url: str) -> bool:
    """Whether ``url``'s scheme runs TLS."""
    return url.partition("://")[0].lower() in TLS_SCHEMES


def describe(error: BaseException) -> str:
    """One line for a failed TLS handshake or connection, the reason first: what an
    operator reads in the log and in ``/health``.

    >>> describe(ssl.SSLCertVerificationError(1, "[SSL: CERTIFICATE_VERIFY_FAILED] x"))
    'TLS: certificate verify failed: [SSL: CERTIFICATE_VERIFY_FAILED] x'
    """
    if isinstance(error, ssl.SSLCertVerificationError):
        reason = error.verify_message or _reason(error)
        return f"TLS: certificate verify failed: {reason}"
    if isinstance(error, ssl.SSLError):
        reason = (error.reason or _reason(error)).replace("_", " ").lower()
        if "alert" in reason:  # the server refused us: a client certificate it rejects
            return f"TLS: the server refused the handshake ({reason})"
        return f"TLS: {reason}"
    return _reason(error)


def _reason(error: BaseException) -> str:
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return str(error) or type(error).__name__
