"""Replication benchmark: A→B through a gateway process, measured with the official client.

Prints one JSON object. Two ``georep cluster`` processes (A and B, three in-process
bookies each, E=3 Qw=2 Qa=2, fsync on unless ``--no-fsync``) and a ``georep gateway``
beside A, on this machine; 1 KiB messages.

- **Saturation**: ``--messages`` messages are published on A first (batched, the client's
  batching with a 5 ms delay; and a tenth as many unbatched, one entry each), then the
  namespace's policy is set to replicate to B over the gateway's REST and the gateway
  copies the backlog as fast as it can. Throughput is the messages the remote
  acknowledged per second, from the first to the last (the gateway's stats, polled
  every 0.1 s), with each process's CPU share over that time.
- **Lag at a steady rate**: a producer process publishes ``--rate`` msgs/s on A for
  ``--seconds`` (batching delay 1 ms) while a consumer process on B receives them; each
  message's lag is its receive time on B minus its publish time on A (the client's
  publish timestamp, carried over by replication; one machine, one clock). p50/p99/max
  over the messages published after a ``--warmup`` of seconds.

- **Pulsar's replicator at the same rate** (``--target both``, the default, or
  ``pulsar``): two Apache Pulsar standalones with the namespace geo-replicated, the
  same producer and consumer processes, the same lag measure; run after georep's, back
  to back, with ``lag_ratio_georep_to_pulsar``.

    python bench/replication.py [--messages 500000] [--rate 5000] [--seconds 30]
                                [--target both|georep|pulsar]

Progress goes to stderr; only the JSON goes to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import sys
import time
from pathlib import Path
from typing import Any

from harness import (
    SIZE,
    Cluster,
    add_scratch_arguments,
    cpu_seconds,
    cpu_shares,
    http,
    machine,
    progress,
    publish_backlog,
    replicator_of,
    run_in_scratch,
    start_clusters,
    start_gateway,
    steady_lag,
)

from georep.runtime.processes import ManagedProcess

NAMESPACE_SATURATION = "bench/saturation"
NAMESPACE_LAG = "bench/lag"


# --- the scenarios ------------------------------------------------------------------------------
async def saturation(
    a: Cluster,
    b: Cluster,
    gateway_url: str,
    messages: int,
    batching: bool,
    tag: str,
    pids: dict[str, int],
) -> dict[str, Any]:
    topic = f"persistent://{NAMESPACE_SATURATION}/{tag}"
    progress(f"saturation ({tag}): publishing {messages:,} messages on A")
    process = multiprocessing.Process(
        target=publish_backlog, args=(a.url, topic, messages, batching)
    )
    process.start()
    await asyncio.to_thread(process.join)
    http(
        "PUT",
        f"{gateway_url}/admin/georep/v1/persistent/{NAMESPACE_SATURATION}/{tag}/replication",
        {"clusters": ["B"]},
    )
    first = None
    cpu_before: dict[str, float] = {}
    while True:
        stats = await asyncio.to_thread(replicator_of, gateway_url, topic)
        out = stats["msgOutCounter"] if stats else 0
        now = time.monotonic()
        if out and first is None:
            first = (now, out)
            cpu_before = {name: cpu_seconds(pid) for name, pid in pids.items()}
        progress(f"saturation ({tag}): {out:,} / {messages:,} replicated")
        if out >= messages:
            break
        await asyncio.sleep(0.1)
    assert first is not None and stats is not None  # replicated: the loop saw it start
    elapsed = now - first[0]
    rate = (out - first[1]) / elapsed if elapsed > 0 else float("nan")
    return {
        "messages": messages,
        "batching": batching,
        "entries": stats["entriesOutCounter"],
        "msgs_per_s": round(rate),
        "mb_per_s": round(rate * SIZE / 1e6, 1),
        "seconds": round(elapsed, 2),
        "errors": stats["errorsCounter"],
        "cpu_share": cpu_shares(pids, cpu_before, elapsed),
    }


async def lag(
    a: Cluster, b: Cluster, gateway_url: str, rate: int, seconds: float, warmup_s: float
) -> dict[str, Any]:
    topic = f"persistent://{NAMESPACE_LAG}/steady"
    http(
        "PUT",
        f"{gateway_url}/admin/georep/v1/namespaces/{NAMESPACE_LAG}/replication",
        {"clusters": ["B"]},
    )

    def status() -> str:
        stats = replicator_of(gateway_url, topic)
        if not stats:
            return "no replicator yet"
        delay = stats["replicationDelayInSeconds"]
        return (
            f"{stats['msgOutCounter']:,} replicated, gateway delay"
            f" {delay if delay is not None else '?'} s"
        )

    return await steady_lag(a.url, b.url, topic, rate, seconds, warmup_s, status)


async def pulsar_lag(root: Path, rate: int, seconds: float, warmup_s: float) -> dict[str, Any]:
    """The same steady-rate lag through Pulsar's own replicator: two Pulsar standalones
    with the namespace geo-replicated (``docs/PULSAR.md``)."""
    from pulsar_tools.admin import PulsarAdmin, link_geo_replication
    from pulsar_tools.standalone import (
        PULSAR_VERSION,
        PulsarStandalone,
        StandaloneSpec,
        resolve_jars,
    )

    lib = await asyncio.to_thread(resolve_jars, say=progress)
    pair = [PulsarStandalone(StandaloneSpec(n, root / f"pulsar-{n}"), lib) for n in "AB"]
    try:
        for standalone in pair:
            progress(f"pulsar: starting standalone {standalone.name}")
            await asyncio.to_thread(standalone.start)
        tenant, namespace = NAMESPACE_LAG.split("/")
        await asyncio.to_thread(link_geo_replication, pair, tenant, namespace)
        topic = f"persistent://{NAMESPACE_LAG}/steady"
        admin_a = PulsarAdmin(pair[0].admin_url)

        def status() -> str:
            try:
                replication = admin_a.stats(topic).get("replication", {}).get("B", {})
            except Exception as error:  # the topic appears with the first message
                return f"no stats yet ({error})"
            return (
                f"Pulsar's replicator: {replication.get('msgRateOut', 0):,.0f} msgs/s out,"
                f" backlog {replication.get('replicationBacklog', '?')}"
            )

        result = await steady_lag(
            pair[0].service_url, pair[1].service_url, topic, rate, seconds, warmup_s, status
        )
        return {"target": f"Apache Pulsar {PULSAR_VERSION}, E=Qw=Qa=1, journal sync on", **result}
    finally:
        for standalone in pair:
            await asyncio.to_thread(standalone.stop)


async def main(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    result: dict[str, Any] = {"machine": machine(), "message_bytes": SIZE}
    if args.target in ("georep", "both"):
        result.update(await georep_run(args, root))
    if args.target in ("pulsar", "both"):
        result["lag_pulsar"] = await pulsar_lag(root, args.rate, args.seconds, args.warmup)
        progress("done")
        print(file=sys.stderr)
    if args.target == "both":
        georep_lag, pulsar = result["lag"], result["lag_pulsar"]
        result["lag_ratio_georep_to_pulsar"] = {
            key: round(georep_lag[key] / pulsar[key], 2)
            for key in ("lag_ms_p50", "lag_ms_p99", "lag_ms_max")
            if georep_lag[key] and pulsar[key]
        }
    return result


async def georep_run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    processes: list[ManagedProcess] = []
    try:
        a, b = await start_clusters(
            root, args.no_fsync, (NAMESPACE_SATURATION, NAMESPACE_LAG), processes
        )
        gateway, gateway_url = await start_gateway(root, a, b.url, b.admin_url)
        processes.append(gateway)
        pids = {"gateway": gateway.pid, "cluster_a": a.process.pid, "cluster_b": b.process.pid}

        result = {
            "fsync": not args.no_fsync,
            "saturation": {
                "batched": await saturation(
                    a, b, gateway_url, args.messages, True, "batched", pids
                ),
                "unbatched": await saturation(
                    a, b, gateway_url, args.messages // 10, False, "unbatched", pids
                ),
            },
            "lag": await lag(a, b, gateway_url, args.rate, args.seconds, args.warmup),
        }
        progress("done")
        print(file=sys.stderr)
        return result
    finally:
        for process in reversed(processes):
            await process.terminate()


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--messages", type=int, default=500_000, help="batched backlog (unbatched: a tenth)"
    )
    parser.add_argument("--rate", type=int, default=5_000)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--no-fsync", action="store_true")
    parser.add_argument(
        "--target",
        choices=("both", "georep", "pulsar"),
        default="both",
        help="georep's gateway, real Pulsar's replicator (lag only), or both back to back",
    )
    add_scratch_arguments(parser)
    run_in_scratch(parser.parse_args(), main)


if __name__ == "__main__":
    cli()
