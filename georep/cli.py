"""The ``georep`` command: one subcommand per process or job of
docs/ARCHITECTURE.md's map (cluster, bookie, gateway, up, drill, export, reconcile, ...).

Each subcommand lives beside the subsystem it runs, in a module exposing
``configure(parser)`` and ``run(args) -> int``; this file only lists them, so adding a
command is one line here.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

#: subcommand -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "bookie": ("georep.storage.bookie.main", "run one storage node (bookie)"),
    "autorecovery": (
        "georep.storage.replication.autorecovery",
        "run an auditor candidate and a replication worker",
    ),
    "cluster": ("georep.broker.main", "run the embedded cluster: broker, bookies, metadata"),
    "demo": ("georep.storage.demo", "end-to-end demo on the embedded default"),
    "gateway": ("georep.gateway.main", "run the replication gateway beside one cluster"),
    "up": ("georep.up.supervisor", "run clusters and gateways from one TOML file, supervised"),
    "export": ("georep.spark_reconcile.export", "export a cluster's message index as Parquet"),
    "reconcile": ("georep.spark_reconcile.job", "Spark job: duplicates and gaps across clusters"),
    "drill": ("georep.drill.main", "failover drill: fail A mid-consumption, move consumers to B"),
}


def chosen_command(argv: list[str]) -> str | None:
    """The subcommand ``argv`` names: the first word that is one (the global options
    before it take only fixed choices), or None (``--help``, a mistake)."""
    return next((word for word in argv if word in COMMANDS), None)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """Every subcommand listed; its own options configured for ``only``, or for all when
    None. A process imports the module of the command it runs and no other: a bookie
    does not load the broker's, the gateway's or Spark's code (which cost each process
    started about two seconds)."""
    parser = argparse.ArgumentParser(prog="georep", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"]
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module_name, help_text) in COMMANDS.items():
        command = sub.add_parser(name, help=help_text, description=help_text)
        command.set_defaults(_module=module_name)
        if only is None or name == only:
            importlib.import_module(module_name).configure(command)
    return parser


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    args = build_parser(chosen_command(words)).parse_args(words)
    logging.basicConfig(
        level=args.log_level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("alembic").setLevel(logging.WARNING)
    return int(importlib.import_module(args._module).run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
