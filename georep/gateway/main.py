"""``georep gateway --config FILE``: run the gateway beside one cluster (on uvloop).

Once its REST admin serves it prints one line to stdout, ``GATEWAY_READY
http://HOST:PORT`` (``https://`` with ``[gateway] tls_cert_file``), so a parent process
(a test harness, ``georep up``) learns the port it got with port 0. SIGTERM and SIGINT
stop it cleanly: replicators stop with their acknowledgements persisted (their
subscriptions stay, and replication resumes from them at the next start), links close,
the metadata store closes.

Several instances for one cluster run from one file and one metadata store
(``ownership.py``): ``--listen`` and ``--instance`` give each its own address and name.

Exit code 2 means the configuration is unusable, said in one line on stderr
(``runtime/console.py``): the file, a host that is not an address here, a port in use, a
metadata URL it cannot use, or a REST listening beyond loopback without tokens unless
``--insecure`` (``rest/access.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from pathlib import Path

from georep.gateway.config import GatewayConfig, load, with_overrides
from georep.gateway.gateway import Gateway
from georep.rest.access import ExposureError, check_exposure
from georep.runtime import console
from georep.runtime.console import ConfigError
from georep.runtime.processes import exit_on_invariant, serve_until_signalled
from georep.storage.errors import InvalidArgument, StorageError
from georep.storage.meta.migrate import database_url

log = logging.getLogger(__name__)

READY_PREFIX = "GATEWAY_READY"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", required=True, type=Path, help="gateway TOML file (see examples/)"
    )
    parser.add_argument(
        "--listen",
        metavar="HOST:PORT",
        help="the REST admin's address, instead of the file's (several instances, one file)",
    )
    parser.add_argument(
        "--instance",
        metavar="NAME",
        help="this instance's name among the gateways of its cluster (default: generated)",
    )
    parser.add_argument(
        "--insecure",
        action="store_true",
        help="listen beyond loopback with no token (anyone who reaches the port may change"
        " replication policies)",
    )


async def serve(config: GatewayConfig) -> int:
    exit_on_invariant(asyncio.get_running_loop())
    try:
        gateway = await Gateway(config).start()
    except OSError as error:  # the port taken since the check
        return console.config_error("gateway", f"did not start: {error}")
    except StorageError as error:
        log.error("gateway did not start: %s", error)
        return 1
    await serve_until_signalled(f"{READY_PREFIX} {gateway.url}")
    await gateway.stop()
    return 0


def run(args: argparse.Namespace) -> int:
    try:
        config = with_overrides(load(args.config), listen=args.listen, instance=args.instance)
        check(config, insecure=args.insecure)
    except (ConfigError, console.BindError) as error:
        return console.config_error("gateway", error)
    import uvloop

    return uvloop.run(serve(config))


def check(config: GatewayConfig, *, insecure: bool) -> None:
    """What can be known wrong before anything starts (see the module docstring)."""
    try:
        database_url(config.metadata_url)
    except InvalidArgument as error:
        raise ConfigError(f"[gateway] metadata: {error}") from None
    console.check_bind("[gateway] listen", config.listen_host, config.listen_port)
    try:
        check_exposure(
            f"gateway {config.local.name} (listen {config.listen_host})",
            config.listen_host,
            tokens_required=not config.open,
            insecure=insecure,
        )
    except ExposureError as error:
        raise ConfigError(str(error)) from None
