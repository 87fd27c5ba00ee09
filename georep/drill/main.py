"""``georep drill``: a failover drill, its delivery log and its report.

Example::

    georep drill --scenario shared-out-of-order --messages 2000 --at 0.5 --fail kill \\
        --mode both --out drill-out

stands up clusters A and B with their gateways (twice: once per mode), runs the
scenario, fails A, moves the consumers to B, and writes ``drill-out/deliveries.jsonl``,
``report.json`` and ``report.html``; a progress bar runs on stderr, a summary goes to
stdout (the report itself with ``--json``). See docs/DRILL.md for the semantics.

Exit codes: 0 when the drill ran (whatever it found), 2 for bad flags, 1 when it could
not run (the message says why; a temporary data directory is then kept for its logs).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from georep import limits
from georep.drill.beside_pulsar import BesidePulsarTopology
from georep.drill.delivery_log import RETURN, write_jsonl
from georep.drill.drill_op import DrillOp, ModeRun
from georep.drill.errors import DrillError, DrillUsageError
from georep.drill.failback import failback_verdict
from georep.drill.progress import Progress
from georep.drill.pulsar_topology import PulsarTopology
from georep.drill.report_page import ordered, render, target_name
from georep.drill.scenarios import SCENARIOS
from georep.drill.settings import (
    FAILURES,
    MODE_CHOICES,
    PULSAR,
    DrillSettings,
    settings_from_args,
)
from georep.drill.topology import ManagedTopology, RunningTopology, StartFailure, Topology
from georep.drill.traffic import log_client_to, pulsar_module
from georep.drill.verdict import verdict
from georep.invariant import present

REPORT_VERSION = 1
#: The gateways' [subscription_sync] in a managed drill, besides the mode: short periods,
#: so that the default settle (limits.drill_settle_s_default) covers a snapshot and a poll.
SYNC_PERIODS = {"subscriptions": "flagged", "snapshot_interval_s": 1.0, "poll_interval_s": 0.2}


def configure(parser: argparse.ArgumentParser) -> None:
    # The scenarios, each in a line of its own under the flags (docs/DRILL.md, Scenarios).
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    width = max(len(name) for name in SCENARIOS)
    parser.epilog = "scenarios (--scenario):\n" + "\n".join(
        f"  {name:<{width}}  {scenario.summary}" for name, scenario in SCENARIOS.items()
    )
    parser.add_argument(
        "--scenario",
        default="shared-out-of-order",
        metavar="NAME",
        help=f"how consumers on A consume: {', '.join(SCENARIOS)} (default: %(default)s)",
    )
    parser.add_argument(
        "--messages",
        type=int,
        default=2000,
        metavar="N",
        help="messages produced on A (default: %(default)s)",
    )
    parser.add_argument(
        "--keys",
        type=int,
        default=16,
        metavar="K",
        help="distinct message keys (default: %(default)s)",
    )
    parser.add_argument(
        "--at",
        type=float,
        default=0.5,
        metavar="FRACTION",
        help="fail A once this fraction of the messages was delivered on A (default: %(default)s)",
    )
    parser.add_argument(
        "--fail",
        default="kill",
        metavar="HOW",
        help=f"{' or '.join(FAILURES)}: SIGKILL A's cluster and gateway, or"
        " both gateways (default: %(default)s)",
    )
    parser.add_argument(
        "--mode",
        default="full",
        metavar="MODE",
        help=f"subscription sync mode: {', '.join(MODE_CHOICES)}; 'pulsar' is real Apache"
        " Pulsar with its own geo-replication, 'both' the two georep modes, 'all' the three"
        " (default: %(default)s)",
    )
    parser.add_argument(
        "--settle",
        type=float,
        default=limits.drill_settle_s_default,
        metavar="S",
        help="seconds from the consumers' stop on A (and the last message produced) to the"
        " failure (default: %(default)s)",
    )
    parser.add_argument(
        "--produce-rate",
        type=float,
        default=limits.drill_produce_rate_per_s_default,
        metavar="R",
        help="messages a second produced on A, 0: no limit (default: %(default)s)",
    )
    parser.add_argument(
        "--consume-rate",
        type=float,
        default=limits.drill_consume_rate_per_s_default,
        metavar="R",
        help="messages a second the consumers on A handle together, 0: no limit"
        " (default: %(default)s)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="DIR",
        help="output directory (default: a new drill-* directory here)",
    )
    parser.add_argument("--json", action="store_true", help="print the report JSON on stdout")
    parser.add_argument(
        "--data",
        type=Path,
        default=None,
        metavar="DIR",
        help="keep the clusters' data here (default: a temporary directory, removed afterwards)",
    )
    parser.add_argument(
        "--namespace",
        default="public/default",
        metavar="TENANT/NS",
        help="namespace of the drill's topic (default: %(default)s)",
    )
    parser.add_argument(
        "--failback",
        action="store_true",
        help="after the failover, consumers on B acknowledge about half, A comes back, B's"
        " state is synced to A and the consumers move home: what comes twice on A",
    )
    parser.add_argument(
        "--beside-pulsar",
        action="store_true",
        help="georep's gateways beside two real Apache Pulsar standalones (Pulsar's"
        " geo-replication off; the gateways replicate and sync, full mode only) instead of"
        " georep's own clusters; 'all' is then 'pulsar' and 'full' beside Pulsar",
    )
    parser.add_argument("--seed", type=int, default=1, help="seed of keys and ack orders")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    running = parser.add_argument_group(
        "running clusters (instead of standing up A and B; --fail cut-link only)"
    )
    for cluster in ("a", "b"):
        upper = cluster.upper()
        running.add_argument(
            f"--{cluster}-service-url", metavar="URL", help=f"{upper}'s broker, pulsar://host:port"
        )
        running.add_argument(
            f"--{cluster}-admin-url", metavar="URL", help=f"{upper}'s admin REST, http://host:port"
        )
        running.add_argument(f"--{cluster}-gateway-url", metavar="URL",
                             help=f"{upper}'s gateway REST, http://host:port")  # fmt: skip


def run(args: argparse.Namespace) -> int:
    try:
        settings = settings_from_args(args)
    except DrillUsageError as error:
        print(f"georep drill: error: {error}", file=sys.stderr)
        return 2
    progress = Progress(enabled=settings.progress)
    try:
        pulsar_module()
        out = output_directory(settings)
        report = asyncio.run(drill(settings, out, progress))
    except (DrillError, OSError) as error:
        progress.close()
        print(f"georep drill: could not run: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        progress.close()
        print("georep drill: interrupted", file=sys.stderr)
        return 130
    progress.close()
    if settings.json:
        print(json.dumps(report, indent=2))
    else:
        print(summary(report, out))
    return 0


def output_directory(settings: DrillSettings) -> Path:
    if settings.out is not None:
        settings.out.mkdir(parents=True, exist_ok=True)
        return settings.out
    base = f"drill-{settings.scenario}-{time.strftime('%Y%m%d-%H%M%S')}"
    for suffix in ["", *(f"-{n}" for n in range(2, 100))]:
        path = Path.cwd() / f"{base}{suffix}"
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue
    raise DrillError(f"cannot make an output directory {base}-N here")


async def drill(settings: DrillSettings, out: Path, progress: Progress) -> dict[str, Any]:
    """Run every mode; write deliveries.jsonl, report.json and report.html under ``out``."""
    started = time.time()
    stamp = time.strftime("%Y%m%d%H%M%S") + "-" + secrets.token_hex(2)
    temporary = settings.managed and settings.data is None
    data_root = Path(tempfile.mkdtemp(prefix="georep-drill-")) if temporary else settings.data

    def data_of(mode: str) -> Path:
        return present(data_root, "clusters the drill starts have a data directory") / mode

    log_client_to(out / "pulsar-client.log")
    runs: dict[str, ModeRun] = {}
    try:
        for mode in settings.modes:
            topology: Topology
            if mode == PULSAR:
                topology = PulsarTopology(data_of(mode), settings.namespace)
            elif settings.beside_pulsar:
                sync = {"mode": mode, **SYNC_PERIODS}
                topology = BesidePulsarTopology(data_of(mode), settings.namespace, sync)
            elif settings.managed:
                sync = {"mode": mode, **SYNC_PERIODS}
                topology = ManagedTopology(data_of(mode), settings.namespace, sync)
            else:
                topology = RunningTopology(present(settings.running, "running clusters"))
            progress.phase(
                f"{mode}: start A and B" if settings.managed else f"{mode}: check A and B"
            )
            begun = time.monotonic()
            try:
                await topology.start()
                started_s = time.monotonic() - begun
                retried = keep_start_failures(topology.start_failures, out, mode)
                runs[mode] = await DrillOp(settings, mode, topology, progress, stamp).run()
                runs[mode].report["timings_s"] = {
                    "start": round(started_s, 3),
                    **runs[mode].report["timings_s"],
                }
                runs[mode].report["warnings"][:0] = retried
                runs[mode].report["beside_pulsar"] = topology.beside_pulsar
            finally:
                progress.phase(f"{mode}: stop")
                await topology.stop()
                progress.close()
    except DrillError as error:
        if temporary:
            raise DrillError(f"{error} (data and logs kept in {data_root})") from None
        raise
    finally:
        log_client_to(None)
    if temporary and data_root is not None:
        shutil.rmtree(data_root, ignore_errors=True)
    report = assemble(settings, runs, started, time.time())
    write_outputs(out, report, runs)
    return report


def keep_start_failures(failures: Sequence[StartFailure], out: Path, mode: str) -> list[str]:
    """Copy the logs of each failed start attempt into ``out`` (the data directory may be
    temporary) and say, for the report's warnings, what failed and where its logs are."""
    warnings = []
    for failure in failures:
        kept = out / f"start-{mode}-attempt-{failure.attempt}"
        error = failure.error
        for log_path in failure.logs:
            kept.mkdir(parents=True, exist_ok=True)
            copy = kept / log_path.name
            shutil.copyfile(log_path, copy)
            error = error.replace(str(log_path), str(copy))
        where = f"; logs in {kept}" if failure.logs else ""
        warnings.append(
            f"start attempt {failure.attempt} failed and was retried on fresh ports: {error}{where}"
        )
    return warnings


def assemble(
    settings: DrillSettings, runs: dict[str, ModeRun], started: float, finished: float
) -> dict[str, Any]:
    scenario = SCENARIOS[settings.scenario]
    return {
        "report_version": REPORT_VERSION,
        "scenario": scenario.name,
        "scenario_summary": scenario.summary,
        "subscription_type": scenario.subscription_type,
        "consumers": scenario.consumers,
        "messages": settings.messages,
        "keys": settings.keys,
        "at": settings.at,
        "target_on_A": settings.target_on_a,
        "fail": settings.fail,
        "settle_s": settings.settle_s,
        "produce_rate_per_s": settings.produce_rate_per_s,
        "consume_rate_per_s": settings.consume_rate_per_s,
        "seed": settings.seed,
        "failback": settings.failback,
        "beside_pulsar": settings.beside_pulsar,
        "namespace": settings.namespace,
        "clusters": "managed" if settings.managed else "running",
        "started_at": _iso(started),
        "finished_at": _iso(finished),
        "modes": {mode: run.report for mode, run in runs.items()},
    }


def write_outputs(out: Path, report: dict[str, Any], runs: dict[str, ModeRun]) -> None:
    """deliveries.jsonl (before and after the failure: a ``georep reconcile`` input),
    deliveries-failback.jsonl (on A again, with ``--failback``), report.json and .html."""
    failover = {
        mode: [d for d in run.deliveries if d.phase != RETURN] for mode, run in runs.items()
    }
    write_jsonl(out / "deliveries.jsonl", (d for ds in failover.values() for d in ds))
    if report.get("failback"):
        write_jsonl(
            out / "deliveries-failback.jsonl",
            (d for run in runs.values() for d in run.deliveries if d.phase == RETURN),
        )
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    page = render(report, failover)
    (out / "report.html").write_text(page, encoding="utf-8")


def summary(report: dict[str, Any], out: Path) -> str:
    lines = [
        f"georep drill: {report['scenario']}, --fail {report['fail']} after"
        f" {report['target_on_A']} of {report['messages']} messages delivered on A"
    ]
    names = {mode: target_name(mode, report["modes"][mode]) for mode in report["modes"]}
    width = max([18, *(len(name) for name in names.values())])
    for mode in ordered(report["modes"]):
        block = report["modes"][mode]
        lag = block["sync_lag_at_failure_ms"]
        resume = block["time_to_resume_on_B_s"]
        lines.append(
            f"  {names[mode]:<{width}} duplicates {block['duplicates']['count']:<5}"
            f" exposure {_count_text(block.get('exposure_before_failure')):<5}"
            f" lost {block['lost']['count']:<4}"
            f" redelivered {block['redelivered']['count']:<5}"
            f" replicated {block['replicated_before_failure']}/{block['produced']}"
            f"  sync lag {'n/a' if lag is None else f'{lag:.0f} ms'}"
            f"  resume on B {'n/a' if resume is None else f'{resume:.2f} s'}"
            + _undecodable_text(block)
        )
        lines.append(f"    {verdict(mode, block).headline()}")
        if block.get("failback") is not None:
            lines.append(f"    {failback_text(block['failback'])}")
            lines.append(f"    {failback_verdict(mode, block['failback']).headline()}")
        lines += [f"    warning: {w}" for w in block["warnings"]]
    lines.append(f"  report: {out / 'report.html'} (report.json, deliveries.jsonl)")
    return "\n".join(lines)


def _count_text(figure: dict[str, Any] | None) -> str:
    return "n/a" if figure is None else str(figure["count"])


def failback_text(block: dict[str, Any]) -> str:
    """``failback: twice on A 0 (acked on A 0, on B 0)  lost 0  redelivered 75 ...``."""
    twice = block["twice"]
    settle = block["sync_settle_s"]
    resume = block["time_to_resume_on_A_s"]
    return (
        f"failback: twice on A {twice['count']} (acked on A {twice['acked_on_A']},"
        f" on B {twice['acked_on_B']})  lost {block['lost']['count']}"
        f"  redelivered {block['redelivered']['count']}"
        f"  delivered {block['delivered_on_return']}/{block['expected_on_return']} expected"
        f"  sync back {'n/a' if settle is None else f'{settle:.1f} s'}"
        f"{'' if block['sync_settled'] else ' (not settled)'}"
        f"  resume on A {'n/a' if resume is None else f'{resume:.2f} s'}"
    )


def _undecodable_text(block: dict[str, Any]) -> str:
    """``  undecodable on B 0 (versions 0: 150, 1: 150)``; "" for a scenario without a
    schema."""
    undecodable = block.get("undecodable_on_B")
    if undecodable is None:
        return ""
    versions = ", ".join(f"{v}: {n}" for v, n in (block["schema_versions_on_B"] or {}).items())
    return f"  undecodable on B {undecodable['count']} (versions {versions or 'none'})"


def _iso(epoch_s: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch_s))
