"""What a gateway's operators' reads cost beside many topic partitions: ``/health`` (its
replication summary and its problems, the watchdog's stalled parts among them), one
``/metrics`` scrape of the replication collector, and one watchdog pass with nothing
stuck, at ``--partitions`` replicators towards one remote.

The replicators are real ``Replicator`` objects, not started: what is measured is the
gateway's own reading of them, the part that grows with the partition count. Prints
one JSON object: the median of ``--repeat`` runs of each, in milliseconds, and per
partition in microseconds.

    python bench/gateway_health.py [--partitions 10000] [--repeat 7]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable
from typing import Any

from harness import print_figures

from georep.gateway.cluster_endpoint import ClusterEndpoint
from georep.gateway.manager import ReplicationManager
from georep.gateway.metrics import ReplicationCollector
from georep.replicator.replicator import Replicator


class _NoPolicies:
    async def list_replication_policies(self) -> list[Any]:
        return []


def _endpoint(name: str) -> ClusterEndpoint:
    return ClusterEndpoint(name, "pulsar://127.0.0.1:1", "http://127.0.0.1:1")


def _median_ms(run: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


async def measure(partitions: int, repeat: int) -> dict[str, Any]:
    manager = ReplicationManager(
        local=_endpoint("A"),
        remotes={"B": _endpoint("B")},
        store=_NoPolicies(),  # type: ignore[arg-type]
    )
    try:
        for index in range(partitions):
            topic = f"persistent://t/ns/orders-partition-{index}"
            manager.replicators[topic, "B"] = Replicator(
                topic=topic,
                local_cluster="A",
                remote_cluster="B",
                local_link=manager.local_link,
                remote_link=manager.remote_links["B"],
            )
        collector = ReplicationCollector(manager)
        figures = {
            "health_ms": _median_ms(
                lambda: (manager.replication_summary(), manager.problems()), repeat
            ),
            "metrics_scrape_ms": _median_ms(lambda: list(collector.collect()), repeat),
            "watchdog_pass_ms": _median_ms(manager.stalled, repeat),
        }
    finally:
        await manager.stop()
    out: dict[str, Any] = {"partitions": partitions, "repeat": repeat}
    for name, ms in figures.items():
        out[name] = round(ms, 1)
        out[name.replace("_ms", "_us_per_partition")] = round(ms * 1000 / partitions, 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    print_figures(asyncio.run(measure(args.partitions, args.repeat)))


if __name__ == "__main__":
    main()
