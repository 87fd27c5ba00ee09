"""What every bench shares: figures (percentiles, CPU shares, RSS), the machine they ran
on, a blocking admin client, georep clusters as processes, the official client's
producers and consumers run in child processes (the client blocks), and the command-line
tail that prints one JSON object and cleans up.

A bench is run as a script (``python bench/x.py``), so this directory is on its import
path and each bench imports ``harness``; no bench imports another.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import platform
import shutil
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Coroutine, Iterable
from pathlib import Path
from typing import Any

from georep.runtime.processes import ManagedProcess, georep_command

#: Payload of the benches' messages.
SIZE = 1024
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


# --- figures ---------------------------------------------------------------------------
def progress(text: str) -> None:
    """One line on stderr, rewritten in place: stdout is for the JSON alone."""
    print(f"\r{text:<78}", end="", file=sys.stderr, flush=True)


def percentile(values: list[float], fraction: float) -> float:
    """The value at ``fraction`` (0.99: p99) of ``values``, nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def tree_cpu_seconds(pid: int) -> float:
    """A process and its children (a Pulsar standalone runs in one JVM; a cluster's
    bookies run inside it too)."""
    total = cpu_seconds(pid)
    children = Path(f"/proc/{pid}/task/{pid}/children")
    if children.exists():
        for child in children.read_text().split():
            total += tree_cpu_seconds(int(child))
    return total


def cpu_shares(pids: dict[str, int], before: dict[str, float], elapsed: float) -> dict[str, Any]:
    """Share of one core each process used over ``elapsed`` seconds."""
    return {
        name: round((cpu_seconds(pid) - before[name]) / elapsed, 2) for name, pid in pids.items()
    }


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def machine() -> dict[str, Any]:
    """What a figure ran on, recorded beside it."""
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_average_at_start": os.getloadavg(),
    }


# --- admin REST ------------------------------------------------------------------------
def http(method: str, url: str, body: Any = None, timeout_s: float = 60) -> Any:
    """One request; a JSON answer parsed, any other answer as bytes."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    if data is not None or method == "POST":  # every POST must say JSON (rest/access.py)
        request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=timeout_s) as answer:
        text = answer.read()
    return json.loads(text) if text and text[:1] in b"[{" else (text or None)


def put_quietly(url: str, body: Any = None) -> None:
    """PUT that takes 409 (it exists already) as done."""
    try:
        http("PUT", url, body)
    except urllib.error.HTTPError as error:
        if error.code != 409:
            raise


def create_namespace(admin_url: str, namespace: str, cluster: str) -> None:
    tenant = namespace.partition("/")[0]
    put_quietly(f"{admin_url}/admin/v2/tenants/{tenant}", {"allowedClusters": [cluster]})
    put_quietly(f"{admin_url}/admin/v2/namespaces/{namespace}")


def replicator_of(gateway_url: str, topic: str) -> dict[str, Any] | None:
    stats = http("GET", f"{gateway_url}/admin/georep/v1/stats")
    found = [r for r in stats["replicators"] if r["topic"] == topic]
    return found[0] if found else None


# --- georep clusters -------------------------------------------------------------------
class Cluster:
    """A ``georep cluster`` process and its URLs (from its ready line)."""

    def __init__(self, process: ManagedProcess) -> None:
        self.process = process
        self.url, self.admin_url = process.detail.split()


async def start_cluster(root: Path, name: str, fsync: bool) -> Cluster:
    """One ``georep cluster`` on ports of its own choosing; its data under ``root/name``."""
    extra = [] if fsync else ["--no-fsync"]
    process = ManagedProcess(
        georep_command(
            "cluster", "--name", name, "--data", str(root / name), "--broker-port", "0",
            "--admin-port", "0", *extra,
        ),
        "CLUSTER_READY",
        log_path=root / f"cluster-{name}.log",
    )  # fmt: skip
    await process.start(timeout_s=120)
    return Cluster(process)


async def start_clusters(
    root: Path, no_fsync: bool, namespaces: Iterable[str], processes: list[ManagedProcess]
) -> tuple[Cluster, Cluster]:
    """Clusters A and B as processes (appended to ``processes``), with ``namespaces``."""
    clusters = {}
    for name in ("A", "B"):
        cluster = await start_cluster(root, name, fsync=not no_fsync)
        processes.append(cluster.process)
        clusters[name] = cluster
        for namespace in namespaces:
            create_namespace(cluster.admin_url, namespace, name)
    return clusters["A"], clusters["B"]


async def start_gateway(
    root: Path, a: Cluster, b_service_url: str, b_admin_url: str, extra: Iterable[str] = ()
) -> tuple[ManagedProcess, str]:
    """A ``georep gateway`` beside A whose remote B is at the URLs given (B's own, or a
    link's); ``extra`` lines end its configuration. Returns the process and its URL."""
    config = root / "gateway.toml"
    lines = [
        "[gateway]",
        'listen = "127.0.0.1:0"',
        f'metadata = "sqlite:///{root / "gateway.db"}"',
        "discovery_interval_s = 0.5",
        "[local]",
        'name = "A"',
        f'service_url = "{a.url}"',
        f'admin_url = "{a.admin_url}"',
        "[remotes.B]",
        f'service_url = "{b_service_url}"',
        f'admin_url = "{b_admin_url}"',
        *extra,
    ]
    config.write_text("\n".join(lines) + "\n")
    gateway = ManagedProcess(
        georep_command("gateway", "--config", str(config)),
        "GATEWAY_READY",
        log_path=root / "gateway.log",
    )
    return gateway, await gateway.start()


# --- the official client, in child processes (it blocks) -------------------------------
def quiet_logger() -> Any:
    """The C++ client logs to stdout by default; keep stdout for the JSON."""
    import pulsar

    return pulsar.FileLogger(pulsar.LoggerLevel.Error, os.devnull)


def publish_backlog(service_url: str, topic: str, count: int, batching: bool) -> None:
    import pulsar

    client = pulsar.Client(service_url, operation_timeout_seconds=60, logger=quiet_logger())
    producer = client.create_producer(
        topic,
        batching_enabled=batching,
        batching_max_messages=1000,
        batching_max_publish_delay_ms=5,
        max_pending_messages=20000,
        block_if_queue_full=True,
        send_timeout_millis=0,
    )
    payload = os.urandom(SIZE)
    for _ in range(count):
        producer.send_async(payload, None)
    producer.flush()
    client.close()


def publish_at_rate(
    service_url: str, topic: str, rate: int, seconds: float, result: Any, batching: bool = True
) -> None:
    import pulsar

    client = pulsar.Client(service_url, operation_timeout_seconds=60, logger=quiet_logger())
    producer = client.create_producer(
        topic,
        batching_enabled=batching,
        batching_max_publish_delay_ms=1,
        max_pending_messages=20000,
        block_if_queue_full=True,
    )
    payload = os.urandom(SIZE)
    tick_s = 0.01
    per_tick = max(1, int(rate * tick_s))
    started = time.monotonic()
    sent = 0
    while (elapsed := time.monotonic() - started) < seconds:
        due = int(elapsed / tick_s) * per_tick + per_tick
        while sent < due:
            producer.send_async(payload, None)
            sent += 1
        time.sleep(max(0.0, started + (sent // per_tick) * tick_s - time.monotonic()))
    producer.flush()
    result.put((sent, time.monotonic() - started))
    client.close()


def consume_lags(service_url: str, topic: str, ready: Any, result: Any, quiet_s: float) -> None:
    import pulsar

    client = pulsar.Client(service_url, operation_timeout_seconds=60, logger=quiet_logger())
    consumer = client.subscribe(
        topic, "bench", receiver_queue_size=5000, initial_position=pulsar.InitialPosition.Earliest
    )
    ready.set()
    samples: list[tuple[int, float]] = []
    received = 0
    timeout_ms = 120_000  # until the first message; then ``quiet_s`` ends it
    while True:
        try:
            message = consumer.receive(timeout_millis=timeout_ms)
        except pulsar.Timeout:
            break
        now_ms = time.time() * 1000
        published = message.publish_timestamp()
        samples.append((published, now_ms - published))
        received += 1
        timeout_ms = int(quiet_s * 1000)
        if received % 1000 == 0:
            consumer.acknowledge_cumulative(message)
    result.put(samples)
    client.close()


async def steady_lag(
    a_url: str,
    b_url: str,
    topic: str,
    rate: int,
    seconds: float,
    warmup_s: float,
    status: Callable[[], str],
    batching: bool = True,
) -> dict[str, Any]:
    """Publish ``rate`` msgs/s on A for ``seconds`` while B's consumer measures each
    message's publish-to-receive lag; whatever replicates A to B. ``batching``: the
    client's batching with a 1 ms delay, else one message per entry."""
    ready = multiprocessing.Event()
    samples_queue: multiprocessing.Queue[list[tuple[int, float]]] = multiprocessing.Queue()
    sent_queue: multiprocessing.Queue[tuple[int, float]] = multiprocessing.Queue()
    consumer = multiprocessing.Process(
        target=consume_lags, args=(b_url, topic, ready, samples_queue, 5.0)
    )
    consumer.start()
    await asyncio.to_thread(ready.wait, 60)
    progress(f"lag: publishing {rate:,} msgs/s on A for {seconds:.0f} s")
    producer = multiprocessing.Process(
        target=publish_at_rate, args=(a_url, topic, rate, seconds, sent_queue, batching)
    )
    started_ms = time.time() * 1000
    producer.start()
    while producer.is_alive():
        progress(f"lag: {await asyncio.to_thread(status)}")
        await asyncio.sleep(0.5)
    sent, publish_s = await asyncio.to_thread(sent_queue.get, True, 120)
    samples = await asyncio.to_thread(samples_queue.get, True, 300)
    await asyncio.to_thread(consumer.join, 60)
    after_warmup_ms = started_ms + warmup_s * 1000
    steady = sorted(lag_ms for published, lag_ms in samples if published >= after_warmup_ms)
    return {
        "rate_msgs_per_s": rate,
        "batching": batching,
        "achieved_publish_msgs_per_s": round(sent / publish_s),
        "seconds": seconds,
        "warmup_s": warmup_s,
        "published": sent,
        "received_on_b": len(samples),
        "lag_ms_p50": round(percentile(steady, 0.50), 1) if steady else None,
        "lag_ms_p99": round(percentile(steady, 0.99), 1) if steady else None,
        "lag_ms_max": round(steady[-1], 1) if steady else None,
    }


# --- the command line's tail -----------------------------------------------------------
def print_figures(figures: dict[str, Any]) -> None:
    """A bench's one JSON object, on stdout (progress goes to stderr)."""
    print(json.dumps(figures, indent=2))


def add_scratch_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dir", default="bench/out")
    parser.add_argument("--keep", action="store_true", help="keep the data directories")


def run_in_scratch(
    args: argparse.Namespace,
    main: Callable[[argparse.Namespace, Path], Coroutine[Any, Any, dict[str, Any]]],
) -> None:
    """Run ``main`` in a new directory under ``--dir``, print its JSON on stdout, and
    remove the directory unless ``--keep``."""
    base = Path(args.dir).resolve()
    base.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(dir=base))
    try:
        print_figures(asyncio.run(main(args, root)))
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
