"""``georep cluster``: run the embedded cluster as a process (on uvloop).

Once the broker and the admin REST serve it prints one line to stdout,
``CLUSTER_READY pulsar://HOST:BROKER_PORT http://HOST:ADMIN_PORT``, so a parent process
(a test harness, ``georep up``) learns the ports it got with port 0. With
``--tls-cert-file`` and ``--tls-key-file`` the broker speaks TLS only on its port and the
admin REST https with the same certificate (unless ``--admin-tls-cert`` names another):
``CLUSTER_READY pulsar+ssl://HOST:PORT https://HOST:PORT``. ``--tls-trust-certs-file``
then asks every client of both for a certificate of that CA (mutual TLS). Admin tokens come
from the environment or files, never from a flag's value (``rest/tokens.py``).
SIGTERM and SIGINT stop it cleanly: connections closed, acknowledgements and
deduplication state persisted, ledgers closed, bookies checkpointed.

Before anything starts it checks what it was told (``runtime/console.py``): a bad flag, a host
that is not an address here, a port in use or given twice, a metadata URL it cannot
use, and a listener beyond loopback without admin tokens (unless ``--insecure``;
``rest/access.py``), and TLS files that make no server context, are one line on stderr
and exit code 2. The binary protocol authenticates nobody unless
``--tls-trust-certs-file`` asks for client certificates: beyond loopback, firewall it to
the clients and gateways that need it, or ask for their certificates.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import os
import ssl
from pathlib import Path

from georep.broker.admin import AdminSettings
from georep.broker.cluster import Cluster, ClusterConfig
from georep.invariant import InvariantViolation
from georep.rest.access import ExposureError, check_exposure
from georep.runtime import console
from georep.runtime.processes import exit_on_invariant, serve_until_signalled
from georep.runtime.tls_files import TlsFiles
from georep.storage.errors import InvalidArgument
from georep.storage.meta.migrate import database_url

log = logging.getLogger(__name__)

READY_PREFIX = "CLUSTER_READY"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--name", required=True, help="cluster name")
    parser.add_argument("--data", required=True, type=Path, help="data directory")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--broker-port", type=int, default=6650, help="Pulsar protocol port")
    AdminSettings.add_arguments(parser)  # --admin-port, --admin-host, tokens, TLS
    parser.add_argument(
        "--tls-cert-file",
        type=Path,
        default=None,
        metavar="PEM",
        help="certificate chain: serve the Pulsar protocol over TLS only (pulsar+ssl://),"
        " and the admin REST over https",
    )
    parser.add_argument(
        "--tls-key-file", type=Path, default=None, metavar="PEM", help="its private key"
    )
    parser.add_argument(
        "--tls-trust-certs-file",
        type=Path,
        default=None,
        metavar="PEM",
        help="CA bundle: over TLS, clients of the broker and the admin REST must present a"
        " certificate of it (mutual TLS)",
    )
    parser.add_argument(
        "--metadata",
        default=None,
        metavar="URL",
        help="metadata store URL (default: SQLite under --data)",
    )
    parser.add_argument(
        "--bookies",
        default="",
        metavar="HOST:PORT,...",
        help="external bookies (default: three in-process bookies under --data)",
    )
    parser.add_argument("--ensemble", type=int, default=3, help="ensemble size E")
    parser.add_argument("--write-quorum", type=int, default=2, help="write quorum Qw")
    parser.add_argument("--ack-quorum", type=int, default=2, help="ack quorum Qa")
    parser.add_argument(
        "--insecure",
        action="store_true",
        help="listen beyond loopback with no admin token (anyone who reaches the admin"
        " port may change anything)",
    )
    parser.add_argument(
        "--no-fsync",
        action="store_true",
        help="DANGER: in-process bookies never fsync; a power loss loses acknowledged "
        "messages (a process crash does not). For tests and benchmarks only.",
    )


def config_from_args(args: argparse.Namespace) -> ClusterConfig:
    bookies = [b.strip() for b in args.bookies.split(",") if b.strip()]
    if (args.tls_cert_file is None) != (args.tls_key_file is None):
        raise ValueError("TLS needs both --tls-cert-file and --tls-key-file")
    if args.tls_trust_certs_file is not None and args.tls_cert_file is None:
        raise ValueError("--tls-trust-certs-file needs --tls-cert-file and --tls-key-file")
    tls = None
    client_ca = args.tls_trust_certs_file.resolve() if args.tls_trust_certs_file else None
    if args.tls_cert_file is not None:
        tls = TlsFiles(args.tls_cert_file.resolve(), args.tls_key_file.resolve())
    config = ClusterConfig(
        name=args.name,
        data_dir=args.data,
        broker_host=args.host,
        broker_port=args.broker_port,
        metadata_url=args.metadata,
        bookies=bookies,
        ensemble_size=args.ensemble,
        write_quorum=args.write_quorum,
        ack_quorum=args.ack_quorum,
        fsync=not args.no_fsync,
        tls=tls,
        tls_client_ca_file=client_ca,
    )
    admin = AdminSettings.from_args(
        args, os.environ, cluster_name=args.name, metadata_url=config.metadata
    )
    if tls is not None and admin.tls_cert_file is None:
        admin = dataclasses.replace(
            admin, tls_cert_file=str(tls.cert_file), tls_key_file=str(tls.key_file)
        )
    if client_ca is not None:
        admin = dataclasses.replace(admin, tls_client_ca_file=str(client_ca))
    config.admin_settings = admin
    return config


async def serve(config: ClusterConfig) -> int:
    exit_on_invariant(asyncio.get_running_loop())
    try:
        cluster = await Cluster(config).start()
    except OSError as error:  # a port taken since the check, a data directory refused
        return console.config_error("cluster", f"did not start: {error}")
    await serve_until_signalled(f"{READY_PREFIX} {cluster.broker_url} {cluster.admin_url}")
    await cluster.stop()
    return 0


def run(args: argparse.Namespace) -> int:
    try:
        config = config_from_args(args)
        check(config, insecure=args.insecure)
    except (ValueError, console.BindError) as error:  # AdminSettingsError is one
        return console.config_error("cluster", error)
    import uvloop

    return uvloop.run(serve(config))


def check(config: ClusterConfig, *, insecure: bool) -> None:
    """What can be known wrong before anything starts (see the module docstring)."""
    admin = config.admin_settings
    if admin is None:
        raise InvariantViolation("a cluster from the command line has admin settings")
    try:
        database_url(config.metadata)
    except InvalidArgument as error:
        raise ValueError(str(error)) from None
    if config.tls is not None:
        _check_tls(config.tls, config.tls_client_ca_file)
    console.check_distinct({"--broker-port": config.broker_port, "--admin-port": admin.port})
    console.check_bind("--broker-port", config.broker_host, config.broker_port)
    console.check_bind("--admin-port", admin.host, admin.port)
    for what, host in (("--host", config.broker_host), ("--admin-host", admin.host)):
        try:
            check_exposure(
                f"cluster {config.name} ({what} {host})",
                host,
                tokens_required=not admin.open,
                insecure=insecure,
            )
        except ExposureError as error:
            raise ValueError(str(error)) from None


def _check_tls(files: TlsFiles, client_ca_file: Path | None) -> None:
    """Whether the TLS files make a server context: ValueError naming the flag at fault."""
    checks: list[tuple[str, Path | None]] = [
        (f"--tls-cert-file {files.cert_file} / --tls-key-file {files.key_file}", None)
    ]
    if client_ca_file is not None:
        checks.append((f"--tls-trust-certs-file {client_ca_file}", client_ca_file))
    for where, client_ca in checks:
        try:
            files.server_context(client_ca_file=client_ca)
        except ssl.SSLError as error:  # not PEM, or a key of another certificate
            reason = (error.reason or str(error)).replace("_", " ").lower()
            raise ValueError(f"{where}: {reason}") from None
        except OSError as error:  # a file missing or unreadable
            raise ValueError(f"{where}: {error.strerror or error}") from None
