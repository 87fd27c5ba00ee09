"""The embedded-default demo: the storage layer end to end, in about a minute.

Starts four bookie processes and a metadata store, writes a ledger with E=3 Qw=3 Qa=2,
reads it back, kills (SIGKILL) one bookie of the ensemble and shows writes continuing
on a new ensemble, closes the ledger, lets a second client recover and read it, and
finally lets auto-recovery restore the lost copies on the spare bookie.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
import time
from pathlib import Path

from georep.runtime.processes import ManagedProcess, start_bookie
from georep.storage.client.bookkeeper import BookKeeper
from georep.storage.meta.store import MetadataStore
from georep.storage.replication.autorecovery import AutoRecovery

LEASE_S = 3.0


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data",
        type=Path,
        default=None,
        help="directory for the demo's data (default: a temporary one, removed afterwards)",
    )
    parser.add_argument(
        "--entries",
        type=int,
        default=2000,
        help="entries written before and after the bookie is killed",
    )


def run(args: argparse.Namespace) -> int:
    import uvloop

    keep = args.data is not None
    data = args.data or Path(tempfile.mkdtemp(prefix="georep-demo-"))
    data.mkdir(parents=True, exist_ok=True)
    try:
        uvloop.run(_demo(data, args.entries))
    finally:
        if not keep:
            shutil.rmtree(data, ignore_errors=True)
    return 0


def step(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


async def _demo(data: Path, count: int) -> None:
    url = f"sqlite:///{data / 'metadata.db'}"
    store = await MetadataStore.open(url)
    bookies: list[ManagedProcess] = []
    try:
        step(f"starting 4 bookies (metadata: {url})")
        for n in range(4):
            bookies.append(
                await start_bookie(
                    data / f"bookie-{n}", metadata_url=url, extra=["--lease-s", str(LEASE_S)]
                )
            )
        by_address = {b.detail: b for b in bookies}
        step("bookies up: " + ", ".join(by_address))

        bk = BookKeeper(store.ledgers, store.bookies, request_timeout_ms=2000)
        writer = await bk.create_ledger(ensemble_size=3, write_quorum=3, ack_quorum=2)
        step(f"ledger {writer.ledger_id} created on {list(writer.ensemble)} (E=3 Qw=3 Qa=2)")
        started = time.perf_counter()
        futures = [await writer.add_async(f"entry {i}".encode()) for i in range(count)]
        await asyncio.gather(*futures)
        elapsed = time.perf_counter() - started
        step(
            f"wrote {count} entries in {elapsed:.2f} s ({count / elapsed:,.0f}/s), "
            f"LAC {writer.last_add_confirmed}"
        )

        victim = writer.ensemble[1]
        step(f"kill -9 bookie {victim} (pid {by_address[victim].pid})")
        by_address[victim].kill()
        await by_address[victim].wait()
        for start in range(count, 2 * count, 100):  # writes go on while it dies
            batch = [
                await writer.add_async(f"entry {i}".encode())
                for i in range(start, min(start + 100, 2 * count))
            ]
            await asyncio.gather(*batch)
        step(
            f"wrote {count} more entries: LAC {writer.last_add_confirmed}; the writer replaced "
            f"the dead bookie: {[(first, list(e)) for first, e in writer.metadata.ensembles]}"
        )
        await writer.close()

        reader_bk = BookKeeper(store.ledgers, store.bookies)
        reader = await reader_bk.open_ledger(writer.ledger_id)
        entries = await reader.read(0, reader.last_add_confirmed)
        if [e.payload for e in entries] != [f"entry {i}".encode() for i in range(2 * count)]:
            raise SystemExit("read back different entries than were written")
        step(f"a second client opened the ledger and read all {len(entries)} entries back")

        step(f"auto-recovery: waiting for {victim}'s lease ({LEASE_S:.0f} s) to lapse")
        service = AutoRecovery.of(store, audit_interval_s=1.0, auditor_lease_s=5.0, grace_s=5.0)
        await service.start()
        metadata = await store.ledgers.get_ledger(writer.ledger_id)
        for _ in range(120):
            metadata = await store.ledgers.get_ledger(writer.ledger_id)
            if victim not in metadata.bookies():
                break
            await asyncio.sleep(0.5)
        await service.stop()
        step(
            f"re-replicated: ensembles now {[(f, list(e)) for f, e in metadata.ensembles]}; "
            f"{service.worker.stats['entries_copied']} entries copied"
        )
        await reader_bk.close()
        await bk.close()
        step("done")
    finally:
        for bookie in bookies:
            await bookie.terminate()
        await store.close()
