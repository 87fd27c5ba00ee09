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
import json
import multiprocessing
import os
import platform
import shutil
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from georep.processes import ManagedProcess, georep_command

SIZE = 1024
NAMESPACE_SATURATION = "bench/saturation"
NAMESPACE_LAG = "bench/lag"


def progress(text: str) -> None:
    print(f"\r{text:<78}", end="", file=sys.stderr, flush=True)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_shares(pids: dict[str, int], before: dict[str, float], elapsed: float) -> dict:
    """Share of one core each process used over ``elapsed`` seconds."""
    return {
        name: round((cpu_seconds(pid) - before[name]) / elapsed, 2) for name, pid in pids.items()
    }


def percentile(values: list[float], fraction: float) -> float:
    return values[min(len(values) - 1, int(fraction * len(values)))]


def quiet_logger():
    import pulsar

    return pulsar.FileLogger(pulsar.LoggerLevel.Error, os.devnull)


def http(method: str, url: str, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    if data is not None or method != "GET":
        request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=30) as response:
        text = response.read().decode()
    return json.loads(text) if text else None


def create_namespace(admin_url: str, namespace: str, cluster: str) -> None:
    tenant = namespace.partition("/")[0]
    for url, body in (
        (f"{admin_url}/admin/v2/tenants/{tenant}", {"allowedClusters": [cluster]}),
        (f"{admin_url}/admin/v2/namespaces/{namespace}", None),
    ):
        try:
            http("PUT", url, body)
        except urllib.error.HTTPError as error:
            if error.code != 409:
                raise


# --- child processes (pulsar-client blocks; each runs in its own process) --------------------
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


def publish_at_rate(service_url: str, topic: str, rate: int, seconds: float, result) -> None:
    import pulsar

    client = pulsar.Client(service_url, operation_timeout_seconds=60, logger=quiet_logger())
    producer = client.create_producer(
        topic,
        batching_enabled=True,
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


def consume_lags(service_url: str, topic: str, ready, result, quiet_s: float) -> None:
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


# --- the scenarios ------------------------------------------------------------------------------
def replicator_of(gateway_url: str, topic: str) -> dict | None:
    stats = http("GET", f"{gateway_url}/admin/georep/v1/stats")
    found = [r for r in stats["replicators"] if r["topic"] == topic]
    return found[0] if found else None


async def saturation(
    a, b, gateway_url: str, messages: int, batching: bool, tag: str, pids: dict[str, int]
) -> dict:
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


async def lag(a, b, gateway_url: str, rate: int, seconds: float, warmup_s: float) -> dict:
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


async def steady_lag(
    a_url: str, b_url: str, topic: str, rate: int, seconds: float, warmup_s: float, status
) -> dict:
    """Publish ``rate`` msgs/s on A for ``seconds`` while B's consumer measures each
    message's publish-to-receive lag; whatever replicates A to B."""
    ready = multiprocessing.Event()
    samples_queue: multiprocessing.Queue = multiprocessing.Queue()
    sent_queue: multiprocessing.Queue = multiprocessing.Queue()
    consumer = multiprocessing.Process(
        target=consume_lags, args=(b_url, topic, ready, samples_queue, 5.0)
    )
    consumer.start()
    await asyncio.to_thread(ready.wait, 60)
    progress(f"lag: publishing {rate:,} msgs/s on A for {seconds:.0f} s")
    producer = multiprocessing.Process(
        target=publish_at_rate, args=(a_url, topic, rate, seconds, sent_queue)
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
        "achieved_publish_msgs_per_s": round(sent / publish_s),
        "seconds": seconds,
        "warmup_s": warmup_s,
        "published": sent,
        "received_on_b": len(samples),
        "lag_ms_p50": round(percentile(steady, 0.50), 1) if steady else None,
        "lag_ms_p99": round(percentile(steady, 0.99), 1) if steady else None,
        "lag_ms_max": round(steady[-1], 1) if steady else None,
    }


async def pulsar_lag(root: Path, rate: int, seconds: float, warmup_s: float) -> dict:
    """The same steady-rate lag through Pulsar's own replicator: two Pulsar standalones
    with the namespace geo-replicated (``docs/PULSAR.md``)."""
    from georep.pulsar.admin import PulsarAdmin, link_geo_replication
    from georep.pulsar.standalone import (
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


class Cluster:
    def __init__(self, process: ManagedProcess) -> None:
        self.process = process
        self.url, self.admin_url = process.detail.split()


async def start_clusters(
    root: Path, no_fsync: bool, namespaces, processes: list[ManagedProcess]
) -> tuple[Cluster, Cluster]:
    """Clusters A and B as processes (appended to ``processes``), with ``namespaces``."""
    clusters = {}
    for name in ("A", "B"):
        extra = ["--no-fsync"] if no_fsync else []
        process = ManagedProcess(
            georep_command(
                "cluster", "--name", name, "--data", str(root / name), "--broker-port", "0",
                "--admin-port", "0", *extra,
            ),
            "CLUSTER_READY",
            log_path=root / f"cluster-{name}.log",
        )  # fmt: skip
        await process.start()
        processes.append(process)
        clusters[name] = Cluster(process)
        for namespace in namespaces:
            create_namespace(clusters[name].admin_url, namespace, name)
    return clusters["A"], clusters["B"]


async def main(args: argparse.Namespace, root: Path) -> dict:
    machine = {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_average_at_start": os.getloadavg(),
    }
    result: dict = {"machine": machine, "message_bytes": SIZE}
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


async def georep_run(args: argparse.Namespace, root: Path) -> dict:
    processes: list[ManagedProcess] = []
    try:
        a, b = await start_clusters(
            root, args.no_fsync, (NAMESPACE_SATURATION, NAMESPACE_LAG), processes
        )
        config = root / "gateway.toml"
        config.write_text(
            "\n".join(
                [
                    "[gateway]",
                    'listen = "127.0.0.1:0"',
                    f'metadata = "sqlite:///{root / "gateway.db"}"',
                    "discovery_interval_s = 0.5",
                    "[local]",
                    'name = "A"',
                    f'service_url = "{a.url}"',
                    f'admin_url = "{a.admin_url}"',
                    "[remotes.B]",
                    f'service_url = "{b.url}"',
                    f'admin_url = "{b.admin_url}"',
                ]
            )
            + "\n"
        )
        gateway = ManagedProcess(
            georep_command("gateway", "--config", str(config)),
            "GATEWAY_READY",
            log_path=root / "gateway.log",
        )
        gateway_url = await gateway.start()
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
    parser.add_argument("--dir", default="bench/out")
    parser.add_argument("--keep", action="store_true", help="keep the data directories")
    args = parser.parse_args()
    base = Path(args.dir).resolve()
    base.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(dir=base))
    try:
        print(json.dumps(asyncio.run(main(args, root)), indent=2))
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    cli()
