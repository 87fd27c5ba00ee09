"""The bookie's index: (ledger, entry) -> location, and each ledger's state.

Stored in SQLite (stdlib ``sqlite3``, one file ``index.db``, WAL mode,
``synchronous=FULL``): our choice, as BookKeeper's DbLedgerStorage chose RocksDB — an
embedded ordered key-value store with atomic multi-row commits. Only the checkpoint
writes, one transaction per checkpoint, so the index moves from one checkpoint's state to
the next's and never shows half of one. Reads use their own connection on the event
loop's thread; WAL lets them run while a checkpoint commits.

Tables::

    entries(ledger, entry, log_id, offset, length)   -- where an entry's bytes are
    ledgers(ledger, fenced, lac, last_entry)         -- per-ledger state
    ledger_logs(ledger, log_id)                      -- logs a ledger has entries in

``ledger_logs`` lets garbage collection find dead entry logs without scanning
``entries``: a log is live while some ledger still lists it. Ledger ids are u64 on the
wire and SQLite integers are signed, so ids at or above 2**63 are stored shifted into the
negative range (:func:`to_sql` / :func:`from_sql`); the order of rows is never relied on.

Example: after ledger 7's entries 0..2 were checkpointed into log 3, ``entries`` holds
``(7, 0, 3, 12, 1060) (7, 1, 3, 1076, 1060) (7, 2, 3, 2140, 1060)``, ``ledgers`` holds
``(7, 0, 1, 2)`` (not fenced, LAC 1 from entry 2's header, last entry 2) and
``ledger_logs`` holds ``(7, 3)``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from georep.invariant import present
from georep.storage.bookie.disk_io import DiskWriter
from georep.storage.bookie.entry_log import Location
from georep.storage.bookie.write_cache import EntryKey

_SIGN = 1 << 63
_WRAP = 1 << 64


def to_sql(ledger_id: int) -> int:
    return ledger_id - _WRAP if ledger_id >= _SIGN else ledger_id


def from_sql(value: int) -> int:
    return value + _WRAP if value < 0 else value


@dataclass(slots=True)
class LedgerState:
    """What a bookie knows about one ledger besides its entries."""

    fenced: bool = False
    #: Highest LAC carried in any stored entry's header; -1 when none.
    lac: int = -1
    #: Highest entry id stored; -1 when none.
    last_entry: int = -1


_SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    ledger INTEGER NOT NULL, entry INTEGER NOT NULL,
    log_id INTEGER NOT NULL, offset INTEGER NOT NULL, length INTEGER NOT NULL,
    PRIMARY KEY (ledger, entry)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS ledgers (
    ledger INTEGER PRIMARY KEY, fenced INTEGER NOT NULL,
    lac INTEGER NOT NULL, last_entry INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS ledger_logs (
    ledger INTEGER NOT NULL, log_id INTEGER NOT NULL,
    PRIMARY KEY (ledger, log_id)) WITHOUT ROWID;
"""


def _connect(path: Path, *, fsync: bool, check_same_thread: bool) -> sqlite3.Connection:
    connection = sqlite3.connect(path, isolation_level=None, check_same_thread=check_same_thread)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute(f"PRAGMA synchronous={'FULL' if fsync else 'OFF'}")
    return connection


class LedgerIndex:
    """The SQLite index. ``lookup`` on the loop thread; writes on the storage thread."""

    def __init__(self, path: Path, *, fsync: bool = True, disk: DiskWriter | None = None) -> None:
        self.path = path
        self.disk = disk or DiskWriter()
        self.fsync = fsync
        self._reader: sqlite3.Connection | None = None
        self._writer: sqlite3.Connection | None = None

    def open(self) -> None:
        writer = _connect(self.path, fsync=self.fsync, check_same_thread=False)
        writer.executescript(_SCHEMA)
        self._writer = writer
        self._reader = _connect(self.path, fsync=self.fsync, check_same_thread=False)

    def close(self) -> None:
        for connection in (self._reader, self._writer):
            if connection is not None:
                connection.close()
        self._reader = self._writer = None

    # -- reads (event loop thread) --

    def lookup(self, ledger_id: int, entry_id: int) -> Location | None:
        reader = present(self._reader, "index not open")
        row = reader.execute(
            "SELECT log_id, offset, length FROM entries WHERE ledger = ? AND entry = ?",
            (to_sql(ledger_id), entry_id),
        ).fetchone()
        return None if row is None else (row[0], row[1], row[2])

    def load_states(self) -> dict[int, LedgerState]:
        reader = present(self._reader, "index not open")
        return {
            from_sql(ledger): LedgerState(bool(fenced), lac, last_entry)
            for ledger, fenced, lac, last_entry in reader.execute(
                "SELECT ledger, fenced, lac, last_entry FROM ledgers"
            )
        }

    def live_log_ids(self) -> set[int]:
        reader = present(self._reader, "index not open")
        return {row[0] for row in reader.execute("SELECT DISTINCT log_id FROM ledger_logs")}

    # -- writes (storage thread) --

    def commit_checkpoint(
        self, keys: list[EntryKey], locations: list[Location], states: dict[int, LedgerState]
    ) -> None:
        """One transaction: the entries' locations and the ledgers' states.

        A failed commit (``sqlite3.OperationalError``: the disk is full) rolls back whole:
        the index keeps the previous checkpoint's rows.
        """
        writer = present(self._writer, "index not open")
        self.disk.check("index")
        writer.execute("BEGIN IMMEDIATE")
        try:
            writer.executemany(
                "INSERT OR REPLACE INTO entries VALUES (?, ?, ?, ?, ?)",
                [
                    (to_sql(ledger), entry, log_id, offset, length)
                    for (ledger, entry), (log_id, offset, length) in zip(
                        keys, locations, strict=True
                    )
                ],
            )
            writer.executemany(
                "INSERT OR IGNORE INTO ledger_logs VALUES (?, ?)",
                {
                    (to_sql(ledger), location[0])
                    for (ledger, _), location in zip(keys, locations, strict=True)
                },
            )
            writer.executemany(
                "INSERT OR REPLACE INTO ledgers VALUES (?, ?, ?, ?)",
                [
                    (to_sql(ledger), int(state.fenced), state.lac, state.last_entry)
                    for ledger, state in states.items()
                ],
            )
            writer.execute("COMMIT")
        except BaseException:
            # SQLite may already have rolled back (a full disk does that): roll back only
            # what is still open, so the original error is the one raised.
            if writer.in_transaction:
                writer.execute("ROLLBACK")
            raise

    def delete_ledgers(self, ledger_ids: Iterable[int]) -> None:
        """Forget ledgers entirely, in one transaction (garbage collection)."""
        writer = present(self._writer, "index not open")
        rows = [(to_sql(ledger),) for ledger in ledger_ids]
        writer.execute("BEGIN IMMEDIATE")
        try:
            writer.executemany("DELETE FROM entries WHERE ledger = ?", rows)
            writer.executemany("DELETE FROM ledger_logs WHERE ledger = ?", rows)
            writer.executemany("DELETE FROM ledgers WHERE ledger = ?", rows)
            writer.execute("COMMIT")
        except BaseException:
            if writer.in_transaction:
                writer.execute("ROLLBACK")
            raise
