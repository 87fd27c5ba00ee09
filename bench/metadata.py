"""The metadata store's write rate: what bounds opening thousands of topics.

Loading a topic on an embedded cluster writes its metadata in several short
transactions: a new ledger for writes, the managed ledger's list of ledgers, and a
cursor for a new durable subscription. On SQLite (the default) every write transaction
takes the one write lock at ``BEGIN IMMEDIATE`` and syncs the WAL at commit
(``synchronous = FULL``, ``storage/meta/migrate.py``); the writes that arrive together
share one transaction and its sync (group commit, ``storage/meta/engine.py``). This
bench creates ``--count`` managed ledgers and a ledger for each, ``--concurrency`` at a
time, on a fresh store, and prints the rate. ``--synchronous NORMAL`` is a what-if, not
a setting the product offers: the same run with no sync at commit.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import time
from pathlib import Path
from typing import Any

from harness import add_scratch_arguments, machine, run_in_scratch
from sqlalchemy import Engine, event

from georep.storage.meta import migrate
from georep.storage.meta.store import MetadataStore


def _syncing(synchronous: str) -> None:
    """Make every engine the store opens sync as ``synchronous`` says (after the store's
    own settings, which this listener runs after)."""
    create = migrate.create_engine

    def create_engine(url: str, **options: Any) -> Engine:
        engine = create(url, **options)

        @event.listens_for(engine, "connect")
        def _on_connect(connection: sqlite3.Connection, _record: object) -> None:
            cursor = connection.cursor()
            cursor.execute(f"PRAGMA synchronous = {synchronous}")
            cursor.close()

        return engine

    migrate.create_engine = create_engine


async def main(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    if args.synchronous != "FULL":
        _syncing(args.synchronous)
    store = await MetadataStore.open(f"sqlite:///{root / 'metadata.db'}")
    room = asyncio.Semaphore(args.concurrency)

    async def topic(index: int) -> None:
        async with room:
            await store.managed_ledgers.create_managed_ledger(f"t/ns/persistent/topic-{index}")
            await store.ledgers.create_ledger(
                ensemble_size=1, write_quorum=1, ack_quorum=1, ensemble=["bookie-1"]
            )

    try:
        started = time.monotonic()
        await asyncio.gather(*(topic(i) for i in range(args.count)))
        elapsed = time.monotonic() - started
        operations = store.engine.stats()["operations"]
    finally:
        await store.close()
    return {
        "bench": "metadata",
        "machine": machine(),
        "synchronous": args.synchronous,
        "concurrency": args.concurrency,
        "topics": args.count,
        "seconds": round(elapsed, 2),
        "topics_per_s": round(args.count / elapsed, 1),
        "transactions_per_s": round(operations / elapsed, 1),
    }


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=6)
    parser.add_argument("--synchronous", choices=("FULL", "NORMAL"), default="FULL")
    add_scratch_arguments(parser)
    run_in_scratch(parser.parse_args(), main)


if __name__ == "__main__":
    cli()
