"""The ``georep`` command (georep/cli.py): every subcommand listed, and a process loads
the code of the command it runs only."""

from __future__ import annotations

import subprocess
import sys

import pytest

from georep.cli import COMMANDS, build_parser, chosen_command


@pytest.mark.parametrize(
    ("argv", "chosen"),
    [
        (["bookie", "--dir", "d"], "bookie"),
        (["--log-level", "WARNING", "gateway", "--config", "gateway.toml"], "gateway"),
        (["drill", "--scenario", "failover", "--out", "cluster"], "drill"),  # the first word
        (["--help"], None),
        ([], None),
        (["bookies"], None),
    ],
)
def test_the_chosen_command_is_the_first_word_that_names_one(argv, chosen) -> None:
    assert chosen_command(argv) == chosen


def test_the_help_lists_every_command_and_each_configures_its_own_options() -> None:
    full = build_parser().format_help()
    assert all(name in full for name in COMMANDS)
    args = build_parser("bookie").parse_args(["bookie", "--dir", "d", "--port", "0"])
    assert args.command == "bookie" and args._module == COMMANDS["bookie"][0]


def test_a_bookie_process_loads_neither_the_broker_nor_the_gateway_nor_spark() -> None:
    probe = (
        "import sys\n"
        "from georep.cli import build_parser\n"
        "build_parser('bookie').parse_args(['bookie', '--dir', 'd'])\n"
        "print(sorted(m for m in sys.modules if m.startswith(('georep.broker', "
        "'georep.gateway', 'georep.spark_reconcile', 'georep.drill', 'pyarrow', 'pyspark'))))\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert loaded == "[]"


def test_an_unknown_command_is_refused_with_the_list() -> None:
    process = subprocess.run(
        [sys.executable, "-m", "georep", "bookies"], capture_output=True, text=True
    )
    assert process.returncode == 2
    assert "invalid choice: 'bookies'" in process.stderr and "gateway" in process.stderr
