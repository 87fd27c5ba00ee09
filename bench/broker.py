"""Broker benchmark through the official pulsar-client: publish and end-to-end consume,
the embedded cluster beside a real Apache Pulsar standalone.

Prints one JSON object. Each target serves in turn, back to back, the same work: a
`georep cluster` process (three in-process bookies, ledgers E=1 Qw=1 Qa=1 like the
standalone's, fsync on), and a Pulsar 4.0.7 standalone (one in-process bookie,
E=Qw=Qa=1, journal sync on; `docs/PULSAR.md`). `ratio_georep_to_pulsar` divides
georep's figures by Pulsar's (above 1: georep is faster, or its latency higher).

Producers (two processes by default: one Python producer is
bound by the GIL its send loop shares with the client's receipt callbacks) and a
consumer (one process, subscribed before the first send) use the official client.
1 KiB messages, batching on with the client's default 128 KiB batch limit
(BENCH_BATCH_BYTES_MAX overrides it). For one topic and for a topic of four
partitions: publish throughput (msgs/s, MB/s) and latency (send to receipt, sampled)
p50/p99, end-to-end throughput (first send to last message received), and each
process's CPU share.

    python bench/broker.py [--messages 200000] [--producers 2] [--target both|georep|pulsar]
                           [--ensemble 3 --write-quorum 2 --ack-quorum 2] [--dir bench/out]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import multiprocessing
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness import cpu_seconds, http, machine, percentile, print_figures, quiet_logger

from georep.runtime.processes import ManagedProcess, georep_command

if TYPE_CHECKING:
    from multiprocessing.queues import Queue
    from multiprocessing.synchronize import Event

SIZE = 1024
BATCH_BYTES_MAX = int(os.environ.get("BENCH_BATCH_BYTES_MAX", 128 * 1024))


def consume(
    service_url: str, topic: str, count: int, ready: Event, result: Queue[tuple[float, float]]
) -> None:
    import pulsar

    client = pulsar.Client(service_url, operation_timeout_seconds=30, logger=quiet_logger())
    consumer = client.subscribe(
        topic, "bench", receiver_queue_size=5000, initial_position=pulsar.InitialPosition.Earliest
    )
    ready.set()
    received = 0
    last = None
    while received < count:
        message = consumer.receive(timeout_millis=60000)
        received += 1
        last = message
        if received % 1000 == 0:
            consumer.acknowledge_cumulative(message)
    consumer.acknowledge_cumulative(last)
    result.put((time.time(), time.process_time()))
    client.close()


def publish(service_url: str, topic: str, count: int) -> dict[str, Any]:
    import pulsar

    client = pulsar.Client(service_url, operation_timeout_seconds=30, logger=quiet_logger())
    producer = client.create_producer(
        topic,
        batching_enabled=True,
        batching_max_messages=1000,
        batching_max_publish_delay_ms=5,
        batching_max_allowed_size_in_bytes=BATCH_BYTES_MAX,
        max_pending_messages=20000,
        max_pending_messages_across_partitions=20000,
        block_if_queue_full=True,
        send_timeout_millis=60000,
    )
    payload = os.urandom(SIZE)
    latencies: list[float] = []
    failures = []
    done = threading.Event()
    # Receipts arrive on the client's one callback thread, in order per partition: a
    # plain counter is safe there. Latency is sampled (1 message in 64) so that timing
    # does not cost every send a closure.
    received = [0]
    ok = pulsar.Result.Ok

    def receipt(result: pulsar.Result, _message_id: pulsar.MessageId) -> None:
        if result != ok:
            failures.append(str(result))
        received[0] += 1
        if received[0] == count:
            done.set()

    def timed_receipt(started: float, result: pulsar.Result, message_id: pulsar.MessageId) -> None:
        latencies.append(time.perf_counter() - started)
        receipt(result, message_id)

    first_send = time.time()
    cpu_before = time.process_time()
    send = producer.send_async
    for index in range(count):
        if index & 63:
            send(payload, receipt)
        else:
            send(payload, functools.partial(timed_receipt, time.perf_counter()))
    producer.flush()
    done.wait(120)
    last_receipt = time.time()
    cpu = time.process_time() - cpu_before
    client.close()
    return {
        "first_send": first_send,
        "last_receipt": last_receipt,
        "latencies": latencies,
        "failures": len(failures),
        "cpu_s": cpu,
    }


def publish_in_child(
    service_url: str, topic: str, count: int, go: Event, results: Queue[dict[str, Any]]
) -> None:
    go.wait()
    results.put(publish(service_url, topic, count))


def publish_all(service_url: str, topic: str, count: int, producers: int) -> dict[str, Any]:
    """``producers`` processes share ``count`` messages: one Python producer is bound by
    the GIL shared between its send loop and the client's receipt callbacks."""
    context = multiprocessing.get_context("spawn")
    go, results = context.Event(), context.Queue()
    share = count // producers
    children = [
        context.Process(target=publish_in_child, args=(service_url, topic, share, go, results))
        for _ in range(producers)
    ]
    for child in children:
        child.start()
    time.sleep(2)  # let the children import pulsar before the clock starts
    go.set()
    parts = [results.get(timeout=300) for _ in children]
    for child in children:
        child.join(30)
    first = min(part["first_send"] for part in parts)
    wall = max(part["last_receipt"] for part in parts) - first
    latencies = sorted(x for part in parts for x in part["latencies"])
    sent = share * producers
    return {
        "messages": sent,
        "producers": producers,
        "failures": sum(part["failures"] for part in parts),
        "wall_s": round(wall, 3),
        "msgs_per_s": round(sent / wall),
        "mb_per_s": round(sent * SIZE / wall / 1e6, 2),
        "publish_latency_ms_p50": round(percentile(latencies, 0.5) * 1000, 2),
        "publish_latency_ms_p99": round(percentile(latencies, 0.99) * 1000, 2),
        "producers_cpu_fraction": round(sum(part["cpu_s"] for part in parts) / wall, 2),
        "first_send_epoch": first,
    }


def scenario(
    service_url: str,
    admin_url: str,
    cluster_pid: int,
    name: str,
    partitions: int,
    count: int,
    producers: int,
) -> dict[str, Any]:
    topic = f"persistent://public/default/{name}"
    if partitions:
        http("PUT", f"{admin_url}/admin/v2/persistent/public/default/{name}/partitions", partitions)
    context = multiprocessing.get_context("spawn")
    ready, result = context.Event(), context.Queue()
    count -= count % producers
    consumer = context.Process(target=consume, args=(service_url, topic, count, ready, result))
    consumer.start()
    if not ready.wait(60):
        raise SystemExit("consumer did not subscribe")
    broker_cpu_before = cpu_seconds(cluster_pid)
    published = publish_all(service_url, topic, count, producers)
    count = published["messages"]
    last_received, consumer_cpu = result.get(timeout=300)
    broker_cpu = cpu_seconds(cluster_pid) - broker_cpu_before
    consumer.join(30)
    end_to_end = last_received - published.pop("first_send_epoch")
    return {
        "partitions": partitions or 1,
        "publish": published,
        "consume": {
            "msgs_per_s": round(count / end_to_end),
            "mb_per_s": round(count * SIZE / end_to_end / 1e6, 2),
            "wall_s": round(end_to_end, 3),
            "consumer_cpu_fraction": round(consumer_cpu / end_to_end, 2),
        },
        "broker_cpu_fraction": round(broker_cpu / end_to_end, 2),
    }


async def start_cluster(root: Path, quorum: tuple[int, int, int]) -> ManagedProcess:
    ensemble, write_quorum, ack_quorum = quorum
    process = ManagedProcess(
        georep_command(
            "cluster", "--name", "bench", "--data", str(root / "cluster"),
            "--broker-port", "0", "--admin-port", "0", "--ensemble", str(ensemble),
            "--write-quorum", str(write_quorum), "--ack-quorum", str(ack_quorum),
        ),
        "CLUSTER_READY",
        log_path=root / "cluster.log",
    )  # fmt: skip
    await process.start()
    return process


def scenarios(
    service_url: str, admin_url: str, pid: int, args: argparse.Namespace
) -> dict[str, Any]:
    if args.warmup_messages:  # JIT (Pulsar's JVM) and caches warm before anything counts
        scenario(service_url, admin_url, pid, "warmup", 0, args.warmup_messages, args.producers)
    return {
        "one_topic": scenario(
            service_url, admin_url, pid, "bench-1", 0, args.messages, args.producers
        ),
        "four_partitions": scenario(
            service_url, admin_url, pid, "bench-4", 4, args.messages, args.producers
        ),
    }


def run_georep(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    loop = asyncio.new_event_loop()
    quorum = (args.ensemble, args.write_quorum, args.ack_quorum)
    cluster = loop.run_until_complete(start_cluster(root, quorum))
    service_url, admin_url = cluster.detail.split()
    try:
        return {
            "config": f"E={quorum[0]} Qw={quorum[1]} Qa={quorum[2]}, three in-process bookies,"
            " fsync on",
            **scenarios(service_url, admin_url, cluster.pid, args),
        }
    finally:
        loop.run_until_complete(cluster.terminate())
        loop.close()


def run_pulsar(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    from pulsar_tools.standalone import (
        PULSAR_VERSION,
        PulsarStandalone,
        StandaloneSpec,
        resolve_jars,
    )

    lib = resolve_jars(say=lambda line: print(line, file=sys.stderr))
    standalone = PulsarStandalone(StandaloneSpec("bench", root / "pulsar", heap_mb=1024), lib)
    standalone.start()
    try:
        return {
            "config": f"Apache Pulsar {PULSAR_VERSION} standalone, E=Qw=Qa=1, one bookie,"
            " journalSyncData=true",
            **scenarios(standalone.service_url, standalone.admin_url, standalone.pid, args),
        }
    finally:
        standalone.stop()


def ratios(georep: dict[str, Any], pulsar: dict[str, Any]) -> dict[str, Any]:
    """georep / Pulsar for each figure both have."""
    out = {}
    for name in ("one_topic", "four_partitions"):
        g, p = georep[name], pulsar[name]
        out[name] = {
            "publish_msgs_per_s": round(g["publish"]["msgs_per_s"] / p["publish"]["msgs_per_s"], 2),
            "consume_msgs_per_s": round(g["consume"]["msgs_per_s"] / p["consume"]["msgs_per_s"], 2),
            "publish_latency_ms_p50": round(
                g["publish"]["publish_latency_ms_p50"] / p["publish"]["publish_latency_ms_p50"], 2
            ),
            "publish_latency_ms_p99": round(
                g["publish"]["publish_latency_ms_p99"] / p["publish"]["publish_latency_ms_p99"], 2
            ),
        }
    return out


def main(args: argparse.Namespace) -> dict[str, Any]:
    args.dir.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="broker-", dir=args.dir))
    results: dict[str, Any] = {
        "benchmark": "broker",
        "config": {
            "message_bytes": SIZE,
            "batching": True,
            "batch_bytes_max": BATCH_BYTES_MAX,
            "messages": args.messages,
            "producers": args.producers,
            "warmup_messages": args.warmup_messages,
            "fsync": True,
        },
        "machine": machine(),
    }
    try:
        if args.target in ("georep", "both"):
            results["georep"] = run_georep(root, args)
        if args.target in ("pulsar", "both"):
            results["pulsar"] = run_pulsar(root, args)
        if args.target == "both":
            results["ratio_georep_to_pulsar"] = ratios(results["georep"], results["pulsar"])
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--producers", type=int, default=2, help="producer processes")
    parser.add_argument(
        "--warmup-messages",
        type=int,
        default=50_000,
        help="an unreported run on each target first (0: none)",
    )
    parser.add_argument("--target", choices=("both", "georep", "pulsar"), default="both")
    parser.add_argument("--ensemble", type=int, default=1, help="georep's E (Pulsar's is 1)")
    parser.add_argument("--write-quorum", type=int, default=1)
    parser.add_argument("--ack-quorum", type=int, default=1)
    parser.add_argument("--dir", type=Path, default=Path("bench/out"))
    print_figures(main(parser.parse_args()))
