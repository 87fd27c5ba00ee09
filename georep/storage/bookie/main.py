"""``georep bookie``: run one bookie as a process (on uvloop).

Once listening it prints one line to stdout, ``BOOKIE_READY host:port``, so a parent
process (a test harness, ``georep up``) can learn the port it got with ``--port 0``.
SIGTERM and SIGINT stop it cleanly (journal committed, checkpoint written).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from pathlib import Path

from georep import limits
from georep.runtime import console
from georep.runtime.processes import exit_on_invariant, serve_until_signalled
from georep.storage.bookie.bookie import Bookie, BookieConfig
from georep.storage.errors import InvalidArgument

log = logging.getLogger(__name__)

READY_PREFIX = "BOOKIE_READY"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dir", required=True, type=Path, help="data directory")
    parser.add_argument("--port", type=int, default=0, help="TCP port (0: any free port)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument(
        "--metadata",
        default=None,
        metavar="URL",
        help="metadata store URL (registration and garbage collection)",
    )
    parser.add_argument(
        "--no-fsync",
        action="store_true",
        help="DANGER: never fsync the journal, entry logs or index. "
        "Acknowledged adds can be LOST on a crash or power loss. "
        "For tests and benchmarks only.",
    )
    parser.add_argument(
        "--journal-group-wait-ms",
        type=float,
        default=limits.journal_group_wait_ms_default,
        help="close a journal group this long after its first record (default %(default)s)",
    )
    parser.add_argument(
        "--checkpoint-interval-s",
        type=float,
        default=limits.checkpoint_interval_s_default,
        help="seconds between checkpoints (default %(default)s)",
    )
    parser.add_argument(
        "--gc-interval-s",
        type=float,
        default=limits.gc_interval_s_default,
        help="seconds between garbage-collection passes (default %(default)s)",
    )
    parser.add_argument(
        "--lease-s",
        type=float,
        default=limits.bookie_lease_s_default,
        help="registration lease (default %(default)s)",
    )
    parser.add_argument(
        "--fault-injection", action="store_true", help="accept FAULT requests (tests only)"
    )
    parser.add_argument(
        "--disk-usage-warn",
        type=float,
        default=limits.disk_usage_warn_fraction_default,
        help="warn at this disk usage fraction (default %(default)s)",
    )
    parser.add_argument(
        "--disk-usage-read-only",
        type=float,
        default=limits.disk_usage_read_only_fraction_default,
        help="refuse adds at this disk usage fraction (default %(default)s)",
    )
    parser.add_argument(
        "--disk-usage-writable",
        type=float,
        default=limits.disk_usage_writable_fraction_default,
        help="take adds again below this disk usage fraction (default %(default)s)",
    )
    parser.add_argument(
        "--disk-check-interval-s",
        type=float,
        default=limits.disk_check_interval_s_default,
        help="seconds between disk checks and write retries (default %(default)s)",
    )
    parser.add_argument(
        "--autorecovery",
        action="store_true",
        help="also run an auditor candidate and a replication worker in this process "
        "(needs --metadata)",
    )


def config_from_args(args: argparse.Namespace) -> BookieConfig:
    return BookieConfig(
        data_dir=args.dir,
        host=args.host,
        port=args.port,
        metadata_url=args.metadata,
        journal_group_wait_ms=args.journal_group_wait_ms,
        fsync=not args.no_fsync,
        checkpoint_interval_s=args.checkpoint_interval_s,
        gc_interval_s=args.gc_interval_s,
        lease_s=args.lease_s,
        fault_injection=args.fault_injection,
        disk_usage_warn_fraction=args.disk_usage_warn,
        disk_usage_read_only_fraction=args.disk_usage_read_only,
        disk_usage_writable_fraction=args.disk_usage_writable,
        disk_check_interval_s=args.disk_check_interval_s,
    )


async def serve(config: BookieConfig, *, autorecovery: bool = False) -> int:
    exit_on_invariant(asyncio.get_running_loop())
    if not config.fsync:
        log.warning("bookie running WITHOUT fsync: acknowledged adds may be lost on a crash")
    bookie = Bookie(config)
    await bookie.start()
    recovery = store = None
    if autorecovery:
        from georep.storage.meta.store import MetadataStore
        from georep.storage.replication.autorecovery import AutoRecovery

        if config.metadata_url is None:
            raise InvalidArgument("--autorecovery needs --metadata")
        store = await MetadataStore.open(config.metadata_url)
        recovery = AutoRecovery.of(store, holder=f"bookie {bookie.address}")
        await recovery.start()
    await serve_until_signalled(f"{READY_PREFIX} {bookie.address}")
    if recovery is not None:
        await recovery.stop()
    if store is not None:
        await store.close()
    await bookie.stop()
    return 0


def run(args: argparse.Namespace) -> int:
    try:
        config = config_from_args(args)
        if args.autorecovery and not args.metadata:
            raise console.ConfigError("--autorecovery needs --metadata URL")
        console.check_bind("--port", config.host, config.port)
    except ValueError as error:  # ConfigError, BindError, a bad BookieConfig
        return console.config_error("bookie", error)
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency
        return asyncio.run(serve(config, autorecovery=args.autorecovery))
    return uvloop.run(serve(config, autorecovery=args.autorecovery))
