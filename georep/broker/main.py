"""``georep cluster``: run the embedded cluster as a process (on uvloop).

Once the broker and the admin REST serve it prints one line to stdout,
``CLUSTER_READY pulsar://HOST:BROKER_PORT http://HOST:ADMIN_PORT``, so a parent process
(a test harness, ``georep up``) learns the ports it got with port 0. Admin tokens come
from the environment or files, never from a flag's value (``broker/admin/settings.py``).
SIGTERM and SIGINT stop it cleanly: connections closed, acknowledgements and
deduplication state persisted, ledgers closed, bookies checkpointed.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
from pathlib import Path

from georep.broker.admin import AdminSettings
from georep.broker.cluster import Cluster, ClusterConfig
from georep.processes import exit_on_invariant, serve_until_signalled

log = logging.getLogger(__name__)

READY_PREFIX = "CLUSTER_READY"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--name", required=True, help="cluster name")
    parser.add_argument("--data", required=True, type=Path, help="data directory")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--broker-port", type=int, default=6650, help="Pulsar protocol port")
    AdminSettings.add_arguments(parser)  # --admin-port, --admin-host, tokens, TLS
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
        "--no-fsync",
        action="store_true",
        help="DANGER: in-process bookies never fsync; a power loss loses acknowledged "
        "messages (a process crash does not). For tests and benchmarks only.",
    )


def config_from_args(args: argparse.Namespace) -> ClusterConfig:
    bookies = [b.strip() for b in args.bookies.split(",") if b.strip()]
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
    )
    config.admin_settings = AdminSettings.from_args(
        args, os.environ, cluster_name=args.name, metadata_url=config.metadata
    )
    return config


async def serve(config: ClusterConfig) -> int:
    exit_on_invariant(asyncio.get_running_loop())
    cluster = await Cluster(config).start()
    await serve_until_signalled(f"{READY_PREFIX} {cluster.broker_url} {cluster.admin_url}")
    await cluster.stop()
    return 0


def run(args: argparse.Namespace) -> int:
    try:
        config = config_from_args(args)
    except ValueError as error:  # AdminSettingsError is one
        log.error("%s", error)
        return 2
    import uvloop

    return uvloop.run(serve(config))
