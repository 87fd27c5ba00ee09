"""Ledger storage: the write cache, the entry logs and the index, tied by checkpoints.

Adds land in the write cache (and in the journal, which the bookie drives). A
checkpoint makes the cache durable without the journal:

1. note the journal's synced position P (the *mark*) and, in the same event-loop step,
   freeze the write cache and copy the dirty ledger states. Every record before P was
   applied to the cache before P was synced, so the frozen cache holds all of them
   (perhaps a few more: harmless, they are re-applied from the journal on replay);
2. in the storage thread: append the frozen entries sorted by (ledger, entry) to the
   entry log and fsync it; write their locations and the ledger states to the index in
   one transaction;
3. write the mark atomically (temp file, fsync, rename, fsync of the directory);
4. drop the frozen generation; the caller then deletes journal files wholly before P.

A kill -9 between any two steps is safe: before 3, the old mark still points at journal
records that hold everything since, and replaying them over the index is idempotent
(an entry simply gets a newer location); entry log bytes no index row points to are
dead space, never read.

A step that fails (the disk is full, an I/O error) fails the whole checkpoint: the frozen
generation goes back into the cache, the ledgers stay dirty, the mark stays where it
was, and no journal file is removed; the entry log and the index have cut off or rolled
back whatever the failed step wrote (see their docstrings). So the mark never moves past
what the entry log, the index and the mark file hold durably, and the next checkpoint
simply tries again.

Example: mark ``(3, 4096)`` on disk means "everything in journal file 3 before offset
4096, and in files 1 and 2, is in the index"; replay starts there.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from georep import limits
from georep.storage.bookie import journal as journal_module
from georep.storage.bookie.disk_io import DiskWriter
from georep.storage.bookie.entry_log import EntryLog
from georep.storage.bookie.journal import EntryRecord, JournalOffset, Record
from georep.storage.bookie.ledger_index import LedgerIndex, LedgerState
from georep.storage.bookie.write_cache import EntryKey, WriteCache
from georep.storage.entry import peek_ids
from georep.storage.errors import CorruptEntry

log = logging.getLogger(__name__)

MARK_FILE = "checkpoint.mark"


@dataclass(slots=True)
class StorageStats:
    checkpoints: int = 0
    checkpoint_failures: int = 0
    checkpoint_entries: int = 0
    checkpoint_seconds_last: float = 0.0
    reads_from_cache: int = 0
    reads_from_log: int = 0
    ledgers_collected: int = 0
    entry_logs_deleted: int = 0


class LedgerStorage:
    def __init__(
        self,
        data_dir: Path,
        *,
        fsync: bool = True,
        cache_bytes_max: int = limits.write_cache_bytes_max,
        entry_log_file_bytes_max: int = limits.entry_log_file_bytes_max,
        disk: DiskWriter | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.fsync = fsync
        self.disk = disk = disk or DiskWriter()
        self.cache = WriteCache(cache_bytes_max)
        self.entry_log = EntryLog(
            data_dir / "entrylog",
            fsync=fsync,
            file_bytes_max=entry_log_file_bytes_max,
            disk=disk,
        )
        self.index = LedgerIndex(data_dir / "index.db", fsync=fsync, disk=disk)
        self.stats = StorageStats()
        self._states: dict[int, LedgerState] = {}
        self._dirty: set[int] = set()
        self._lock = asyncio.Lock()
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="ledger-storage"
        )

    # -- lifecycle --

    def open(self) -> JournalOffset:
        """Open the index and entry logs; return the checkpoint mark to replay from."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.index.open()
        self.entry_log.open()
        self._states = self.index.load_states()
        return self.read_mark()

    def close(self) -> None:
        self._executor.shutdown(wait=True)
        self.entry_log.close()
        self.index.close()

    # -- the data path (event loop thread) --

    def state(self, ledger_id: int) -> LedgerState | None:
        return self._states.get(ledger_id)

    def add(self, ledger_id: int, entry_id: int, data: bytes, lac: int) -> None:
        """Store a verified entry (``lac`` from its header) in the cache; update state."""
        self.cache.put(ledger_id, entry_id, data)
        state = self._states.get(ledger_id)
        if state is None:
            state = self._states[ledger_id] = LedgerState()
        if lac > state.lac:
            state.lac = lac
        if entry_id > state.last_entry:
            state.last_entry = entry_id
        self._dirty.add(ledger_id)

    def fence(self, ledger_id: int) -> None:
        state = self._states.get(ledger_id)
        if state is None:
            state = self._states[ledger_id] = LedgerState()
        state.fenced = True
        self._dirty.add(ledger_id)

    def read(self, ledger_id: int, entry_id: int) -> bytes | None:
        """The stored bytes, unverified (the caller verifies), or None if absent."""
        data = self.cache.get(ledger_id, entry_id)
        if data is not None:
            self.stats.reads_from_cache += 1
            return data
        location = self.index.lookup(ledger_id, entry_id)
        if location is None:
            return None
        self.stats.reads_from_log += 1
        return self.entry_log.read(location)

    def apply(self, record: Record) -> None:
        """Re-apply one journal record (replay)."""
        if isinstance(record, EntryRecord):
            try:
                _, _, lac = peek_ids(record.data)
            except CorruptEntry:
                log.warning(
                    "journal entry %d/%d too short to carry a header; skipped",
                    record.ledger_id,
                    record.entry_id,
                )
                return
            self.add(record.ledger_id, record.entry_id, record.data, lac)
        else:
            self.fence(record.ledger_id)

    def ledger_ids(self) -> list[int]:
        return list(self._states)

    # -- checkpoint --

    @property
    def checkpoint_wanted(self) -> bool:
        """The active cache generation is half full."""
        return self.cache.active_bytes * 2 >= self.cache.bytes_max

    async def checkpoint(self, mark_now: Callable[[], JournalOffset]) -> JournalOffset:
        """Run steps 1-4 of the module docstring; return the mark written."""
        async with self._lock:
            started = time.monotonic()
            loop = asyncio.get_running_loop()
            mark = mark_now()
            frozen = self.cache.freeze()
            dirty, self._dirty = self._dirty, set()
            states = {
                ledger: replace(self._states[ledger]) for ledger in dirty if ledger in self._states
            }
            try:
                await loop.run_in_executor(self._executor, self._flush, frozen, states)
                await loop.run_in_executor(self._executor, self.write_mark, mark)
            except BaseException:
                self.cache.thaw()
                self._dirty |= dirty
                self.stats.checkpoint_failures += 1
                raise
            self.cache.release()
            self.stats.checkpoints += 1
            self.stats.checkpoint_entries += len(frozen)
            self.stats.checkpoint_seconds_last = time.monotonic() - started
            return mark

    def _flush(self, frozen: dict[EntryKey, bytes], states: dict[int, LedgerState]) -> None:
        keys = sorted(frozen)
        locations = self.entry_log.append_batch([frozen[key] for key in keys])
        self.index.commit_checkpoint(keys, locations, states)

    def read_mark(self) -> JournalOffset:
        path = self.data_dir / MARK_FILE
        try:
            mark = json.loads(path.read_text())
            return JournalOffset(int(mark["journal_file_id"]), int(mark["journal_offset"]))
        except FileNotFoundError:
            return JournalOffset(0, 0)

    def write_mark(self, mark: JournalOffset) -> None:
        path = self.data_dir / MARK_FILE
        temp = path.with_suffix(".tmp")
        text = json.dumps({"journal_file_id": mark.file_id, "journal_offset": mark.offset})
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            self.disk.write_all(fd, text.encode(), "mark")
            if self.fsync:
                self.disk.sync(fd, "mark")
        except OSError:
            # The old mark stays; a half-written temp file is never read.
            os.close(fd)
            temp.unlink(missing_ok=True)
            raise
        os.close(fd)
        os.replace(temp, path)
        if self.fsync:
            journal_module.fsync_directory(self.data_dir)

    # -- garbage collection --

    async def collect(self, ledger_ids: set[int]) -> int:
        """Forget these ledgers and delete entry logs left with no live entries."""
        async with self._lock:
            for ledger in ledger_ids:
                self._states.pop(ledger, None)
                self._dirty.discard(ledger)
            self.cache.remove_ledgers(ledger_ids)
            loop = asyncio.get_running_loop()
            if ledger_ids:
                await loop.run_in_executor(
                    self._executor, self.index.delete_ledgers, sorted(ledger_ids)
                )
                self.stats.ledgers_collected += len(ledger_ids)
            live = self.index.live_log_ids()
            deleted = 0
            for log_id in self.entry_log.log_ids():
                if log_id not in live and log_id != self.entry_log.current_id:
                    self.entry_log.delete(log_id)
                    deleted += 1
            self.stats.entry_logs_deleted += deleted
            return deleted
