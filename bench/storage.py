"""Storage benchmark: ledger adds through three bookie processes, against the raw disk.

Prints one JSON object. For each entry size: entries/s, MB/s (payload) and add latency
p50/p99 for E=3 Qw=3 Qa=2 with fsync on, three bookies as separate processes on this
machine; and the raw reference measured in the same run on the same disk: the same
entry bytes appended to Qw files with one fdatasync per as many entries as the bookies'
journals covered with one fdatasync (their mean), the Qw copies written one after
another (so "times Qw"). ``ratio`` is ours / raw in entries per second.

    python bench/storage.py [--entries-1k 40000] [--entries-64k 3000] [--dir bench/out]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from harness import machine, percentile, print_figures

from georep.runtime.processes import start_bookie
from georep.storage import bookie_protocol
from georep.storage import entry as entry_format
from georep.storage.client.bookie_client import BookieClient
from georep.storage.client.bookkeeper import BookKeeper
from georep.storage.meta.store import MetadataStore

IN_FLIGHT_MAX = 2000


async def journal_stats(addresses: list[str]) -> dict[str, dict[str, Any]]:
    stats: dict[str, dict[str, Any]] = {}
    for address in addresses:
        client = BookieClient(address)
        answer = await client.request(bookie_protocol.HealthRequest(0))
        assert isinstance(answer, bookie_protocol.HealthResponse)  # a bookie answers in kind
        stats[address] = json.loads(answer.stats_json)["journal"]
        await client.close()
    return stats


async def run_ours(bk: BookKeeper, addresses: list[str], size: int, count: int) -> dict[str, Any]:
    before = await journal_stats(addresses)
    writer = await bk.create_ledger(ensemble_size=3, write_quorum=3, ack_quorum=2)
    payload = os.urandom(size)
    latencies: list[float] = []
    gate = asyncio.Semaphore(IN_FLIGHT_MAX)
    loop = asyncio.get_running_loop()

    def done(started: float, future: asyncio.Future[int]) -> None:
        gate.release()
        if not future.cancelled() and future.exception() is None:
            latencies.append(loop.time() - started)

    started_all = time.perf_counter()
    cpu_before = time.process_time()
    futures = []
    for _ in range(count):
        await gate.acquire()
        future = await writer.add_async(payload)
        future.add_done_callback(functools.partial(done, loop.time()))
        futures.append(future)
    await asyncio.gather(*futures)
    wall = time.perf_counter() - started_all
    client_cpu = time.process_time() - cpu_before
    await writer.close()
    after = await journal_stats(addresses)
    syncs = sum(after[a]["fsyncs"] - before[a]["fsyncs"] for a in addresses)
    records = sum(after[a]["records"] - before[a]["records"] for a in addresses)
    latencies.sort()
    return {
        "entries": count,
        "wall_s": round(wall, 3),
        "entries_per_s": round(count / wall),
        "mb_per_s": round(count * size / wall / 1e6, 2),
        "add_latency_ms_p50": round(percentile(latencies, 0.50) * 1000, 2),
        "add_latency_ms_p99": round(percentile(latencies, 0.99) * 1000, 2),
        "client_cpu_fraction": round(client_cpu / wall, 2),
        "journal_fdatasyncs": syncs,
        "journal_records_per_fdatasync_mean": round(records / max(syncs, 1), 1),
    }


def run_raw(
    directory: Path, size: int, count: int, records_per_group: float, copies: int
) -> dict[str, Any]:
    """The same bytes (entry header + payload per entry), ``copies`` times, appended with
    one fdatasync per group of ``records_per_group`` entries."""
    data = entry_format.encode(1, 0, -1, size, os.urandom(size))
    group = max(1, round(records_per_group))
    chunk = data * group
    started = time.perf_counter()
    for copy in range(copies):
        path = directory / f"raw-{copy}.bin"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
        try:
            written = 0
            while written < count:
                n = min(group, count - written)
                os.write(fd, chunk if n == group else data * n)
                os.fdatasync(fd)
                written += n
        finally:
            os.close(fd)
        path.unlink()
    wall = time.perf_counter() - started
    return {
        "entries_per_s": round(count / wall),
        "mb_per_s": round(count * size / wall / 1e6, 2),
        "records_per_fdatasync": group,
        "wall_s": round(wall, 3),
    }


async def main(args: argparse.Namespace) -> dict[str, Any]:
    args.dir.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="storage-", dir=args.dir))
    store = await MetadataStore.open(f"sqlite:///{root / 'metadata.db'}")
    bookies = [
        await start_bookie(root / f"bookie-{n}", metadata_url=store.engine.url) for n in range(3)
    ]
    addresses = [b.detail for b in bookies]
    bk = BookKeeper(store.ledgers, store.bookies)
    results: dict[str, Any] = {
        "benchmark": "storage",
        "config": {
            "ensemble_size": 3,
            "write_quorum": 3,
            "ack_quorum": 2,
            "fsync": True,
            "bookies": "3 processes",
            "in_flight_max": IN_FLIGHT_MAX,
        },
        "machine": machine(),
        "sizes": {},
    }
    try:
        for size, count in ((1024, args.entries_1k), (65536, args.entries_64k)):
            await run_ours(bk, addresses, size, min(count, 500))  # warm-up
            ours = await run_ours(bk, addresses, size, count)
            raw = run_raw(root, size, count, ours["journal_records_per_fdatasync_mean"], 3)
            results["sizes"][f"{size // 1024}KiB"] = {
                "ours": ours,
                "raw_reference": raw,
                "ratio": round(ours["entries_per_s"] / raw["entries_per_s"], 3),
            }
    finally:
        await bk.close()
        for bookie in bookies:
            await bookie.terminate()
        await store.close()
        shutil.rmtree(root, ignore_errors=True)
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries-1k", type=int, default=40000)
    parser.add_argument("--entries-64k", type=int, default=3000)
    parser.add_argument("--dir", type=Path, default=Path("bench/out"))
    import uvloop

    print_figures(uvloop.run(main(parser.parse_args())))
