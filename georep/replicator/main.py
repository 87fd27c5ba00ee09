"""``georep gateway --config FILE``: run the gateway beside one cluster (on uvloop).

Once its REST admin serves it prints one line to stdout, ``GATEWAY_READY
http://HOST:PORT``, so a parent process (a test harness, ``georep up``) learns the port it
got with port 0. SIGTERM and SIGINT stop it cleanly: replicators stop with their
acknowledgements persisted (their subscriptions stay, and replication resumes from them
at the next start), links close, the metadata store closes. Exit code 2 means the
configuration is unusable (the log says why).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from pathlib import Path

from georep.processes import exit_on_invariant, serve_until_signalled
from georep.replicator.config import GatewayConfig, load
from georep.replicator.errors import ConfigError
from georep.replicator.gateway import Gateway
from georep.storage.errors import StorageError

log = logging.getLogger(__name__)

READY_PREFIX = "GATEWAY_READY"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", required=True, type=Path, help="gateway TOML file (see examples/)"
    )


async def serve(config: GatewayConfig) -> int:
    exit_on_invariant(asyncio.get_running_loop())
    try:
        gateway = await Gateway(config).start()
    except (StorageError, OSError) as error:
        log.error("gateway did not start: %s", error)
        return 1
    await serve_until_signalled(f"{READY_PREFIX} {gateway.url}")
    await gateway.stop()
    return 0


def run(args: argparse.Namespace) -> int:
    try:
        config = load(args.config)
    except ConfigError as error:
        log.error("%s", error)
        return 2
    import uvloop

    return uvloop.run(serve(config))
