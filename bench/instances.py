"""Several gateway instances for one cluster: takeover after kill -9, shares, idle cost.

Two ``georep cluster`` processes A and B (``--no-fsync``), ``--partitions`` topic
partitions on A (partitioned topics of 8, one namespace replicated to B), and
``--instances`` instances of A's gateway sharing one SQLite metadata store
(gateway/ownership.py), each with a fixed instance name and the default lease (3 s) and
heartbeat (0.5 s). A producer sends ``--rate`` messages a second round the partitions
the whole time. Then:

1. **shares**: once every partition runs on exactly one instance, how many each runs
   (the spread is the largest deviation from 1/N, in percent of 1/N);
2. **takeover**, ``--kills`` times: kill -9 of the instance running the most partitions;
   seconds until every partition it ran has a connected replicator on a survivor (polled
   every 50 ms); the killed instance is started again and the shares settle before the
   next kill;
3. **idle**: traffic stopped, ``--idle-seconds`` s: each instance's CPU share of one
   core and the log lines it wrote (at its default level, INFO);
4. **exactly once**: every message the producer had acknowledged is read back from B:
   the counts lost and stored twice.

    python bench/instances.py --instances 3 --partitions 48 --kills 10

Progress goes to stderr; only the JSON goes to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import logging
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pulsar
from harness import (
    cpu_seconds,
    http,
    machine,
    percentile,
    print_figures,
    progress,
    put_quietly,
    start_cluster,
)

from georep.invariant import present
from georep.runtime.processes import ManagedProcess, georep_command

#: The tenant of bench/scale.py, whose layout this bench follows.
TENANT = "scale"
NAMESPACE = f"{TENANT}/instances"
PER_TOPIC = 8


def instance_toml(root: Path, name: str, a: dict[str, Any], b: dict[str, Any]) -> Path:
    lines = [
        "[gateway]",
        'listen = "127.0.0.1:0"',
        f'metadata = "sqlite:///{root / "gateway-A-shared.db"}"',
        f'instance = "{name}"',
        "discovery_interval_s = 2.0",
        "",
        "[local]",
        'name = "A"',
        f'service_url = "{a["url"]}"',
        f'admin_url = "{a["admin"]}"',
        "",
        "[remotes.B]",
        f'service_url = "{b["url"]}"',
        f'admin_url = "{b["admin"]}"',
        "",
        "[policies.namespaces]",
        f'"{NAMESPACE}" = ["B"]',
    ]
    path = root / f"gateway-{name}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


class Instance:
    def __init__(self, root: Path, name: str, a: dict[str, Any], b: dict[str, Any]) -> None:
        self.name = name
        self.config = instance_toml(root, name, a, b)
        self.log_path = root / f"gateway-{name}.log"
        self.process: ManagedProcess | None = None
        self.url = ""

    async def start(self) -> None:
        self.process = ManagedProcess(
            georep_command("gateway", "--config", str(self.config)),
            "GATEWAY_READY",
            log_path=self.log_path,
        )
        self.url = (await self.process.start(timeout_s=120)).split()[0]

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.running

    def log_lines(self) -> int:
        return len(self.log_path.read_text(errors="replace").splitlines())


def connected_partitions(instance: Instance) -> set[str]:
    stats = http("GET", f"{instance.url}/admin/georep/v1/stats?limit=10000", timeout_s=10)
    return {r["topic"] for r in stats["replicators"] if r["connected"]}


def shares(instances: list[Instance], partitions: set[str]) -> dict[str, set[str]] | None:
    """Instance -> its partitions, once each partition is on exactly one live instance."""
    running: dict[str, set[str]] = {}
    alive = sorted(i.name for i in instances if i.alive)
    for instance in instances:
        if instance.alive:
            try:
                ownership = http("GET", f"{instance.url}/admin/georep/v1/ownership", timeout_s=10)
                running[instance.name] = connected_partitions(instance)
            except OSError:
                return None
            members = sorted(m["instance"] for m in ownership["members"])
            views = [sorted(m["view"]) for m in ownership["members"]]
            if members != alive or any(v != alive for v in views):
                return None  # not every instance has seen every other yet
            if ownership["partitions"]["pending"]:
                return None  # a handover half done
    counted = collections.Counter(p for topics in running.values() for p in topics)
    if set(counted) != partitions or any(n > 1 for n in counted.values()):
        return None
    return running


async def wait_shares(instances: list[Instance], partitions: set[str]) -> dict[str, set[str]]:
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        found = await asyncio.to_thread(shares, instances, partitions)
        if found is not None:
            return found
        await asyncio.sleep(0.25)
    raise SystemExit("partitions never settled on one instance each")


class Traffic(threading.Thread):
    """``rate`` messages a second round the partitioned topics; acknowledged payloads
    recorded."""

    def __init__(self, url: str, topics: list[str], rate: int) -> None:
        super().__init__(daemon=True)
        self.url, self.topics, self.rate = url, topics, rate
        self.acked: list[bytes] = []
        self.halt = threading.Event()
        self._lock = threading.Lock()

    def run(self) -> None:
        client = pulsar.Client(self.url, operation_timeout_seconds=60, logger=_quiet())
        producers = [client.create_producer(t, batching_enabled=False) for t in self.topics]
        sequence = 0

        def done(result: pulsar.Result, _message_id: pulsar.MessageId, payload: bytes) -> None:
            if result == pulsar.Result.Ok:
                with self._lock:
                    self.acked.append(payload)

        try:
            while not self.halt.is_set():
                started = time.monotonic()
                for producer in producers:
                    payload = f"m-{sequence:09d}".encode()
                    producer.send_async(payload, lambda r, m, p=payload: done(r, m, p))
                    sequence += 1
                time.sleep(max(0.0, len(producers) / self.rate - (time.monotonic() - started)))
            for producer in producers:
                producer.flush()
        finally:
            client.close()


def _quiet() -> logging.Logger:
    logger = logging.getLogger("pulsar-bench")
    logger.setLevel(logging.ERROR)
    return logger


def read_back(url: str, partitions: list[str]) -> collections.Counter[bytes]:
    client = pulsar.Client(url, logger=_quiet())
    seen: collections.Counter[bytes] = collections.Counter()
    try:
        for topic in partitions:
            reader = client.create_reader(topic, pulsar.MessageId.earliest)
            while True:
                try:
                    seen[reader.read_next(timeout_millis=2000).data()] += 1
                except pulsar.Timeout:
                    break
            reader.close()
    finally:
        client.close()
    return seen


async def run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    processes: list[ManagedProcess] = []
    instances: list[Instance] = []
    try:
        clusters = {}
        for name in ("A", "B"):
            progress(f"starting cluster {name}")
            cluster = await start_cluster(root, name, fsync=False)
            process, url, admin = cluster.process, cluster.url, cluster.admin_url
            processes.append(process)
            clusters[name] = {"name": name, "url": url, "admin": admin}
            put_quietly(f"{admin}/admin/v2/tenants/{TENANT}", {"allowedClusters": [name]})
            put_quietly(f"{admin}/admin/v2/namespaces/{NAMESPACE}")
        a, b = clusters["A"], clusters["B"]
        bases = [f"persistent://{NAMESPACE}/t{i}" for i in range(-(-args.partitions // PER_TOPIC))]
        for base in bases:
            put_quietly(f"{a['admin']}/admin/v2/persistent/{base[13:]}/partitions", PER_TOPIC)
        partitions = {f"{base}-partition-{i}" for base in bases for i in range(PER_TOPIC)}

        for index in range(args.instances):
            instance = Instance(root, f"gw-{index + 1}", a, b)
            await instance.start()
            instances.append(instance)
        traffic = Traffic(a["url"], bases, args.rate)
        traffic.start()
        progress("waiting for the shares to settle")
        settled = await wait_shares(instances, partitions)
        counts = {name: len(topics) for name, topics in settled.items()}
        fair = len(partitions) / len(counts)
        spread = max(abs(n - fair) for n in counts.values()) / fair

        takeovers: list[float] = []
        for kill in range(args.kills):
            current = await wait_shares(instances, partitions)
            victim_name = max(current, key=lambda n: (len(current[n]), n))
            victim = next(i for i in instances if i.name == victim_name)
            orphans = current[victim_name]
            progress(f"kill {kill + 1}/{args.kills}: kill -9 of {victim_name}")
            assert victim.process is not None
            killed = time.monotonic()
            victim.process.kill()
            await victim.process.wait()
            while True:
                survivors = [i for i in instances if i.alive]
                taken: set[str] = set()
                for survivor in survivors:
                    try:
                        taken |= await asyncio.to_thread(connected_partitions, survivor)
                    except OSError:
                        pass
                if orphans <= taken:
                    break
                if time.monotonic() - killed > 120:
                    raise SystemExit(f"{victim_name}'s partitions never taken over")
                await asyncio.sleep(0.05)
            takeovers.append(time.monotonic() - killed)
            await victim.start()  # back under its name: it takes its share again

        await wait_shares(instances, partitions)
        traffic.halt.set()
        await asyncio.to_thread(traffic.join, 120)
        progress(f"idle for {args.idle_seconds:.0f} s")
        await asyncio.sleep(5)  # the last messages replicated
        before = {i.name: (cpu_seconds(present(i.process).pid), i.log_lines()) for i in instances}
        idle_started = time.monotonic()
        await asyncio.sleep(args.idle_seconds)
        elapsed = time.monotonic() - idle_started
        idle = {
            i.name: {
                "cpu_cores": round(
                    (cpu_seconds(present(i.process).pid) - before[i.name][0]) / elapsed, 4
                ),
                "log_lines_per_minute": round(
                    (i.log_lines() - before[i.name][1]) * 60 / elapsed, 2
                ),
            }
            for i in instances
        }
        progress("reading every message back from B")
        on_b = await asyncio.to_thread(read_back, b["url"], sorted(partitions))
        acked = set(traffic.acked)
        return {
            "instances": args.instances,
            "partitions": len(partitions),
            "rate_messages_per_s": args.rate,
            "shares": counts,
            "share_spread_percent_of_fair": round(100 * spread, 1),
            "kills": len(takeovers),
            "takeover_s": {
                "p50": round(percentile(takeovers, 0.5), 2),
                "p99": round(percentile(takeovers, 0.99), 2),
                "max": round(max(takeovers), 2),
                "all": [round(t, 2) for t in takeovers],
            },
            "idle": idle,
            "acknowledged": len(acked),
            "lost": len(acked - set(on_b)),
            "stored_twice": sum(1 for n in on_b.values() if n > 1),
        }
    finally:
        for instance in instances:
            if instance.alive:
                await present(instance.process).terminate()
        for process in reversed(processes):
            if process.running:
                await process.terminate()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--instances", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=48)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--rate", type=int, default=200, help="messages a second in all")
    parser.add_argument("--idle-seconds", type=float, default=60.0)
    parser.add_argument("--keep", action="store_true", help="keep the data directory")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="georep-instances-"))
    try:
        result = asyncio.run(run(args, root))
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    print(file=sys.stderr)
    result["machine"] = machine()
    print_figures(result)


if __name__ == "__main__":
    main()
