"""The bookie's write-ahead journal: group commit, file rolling, replay.

Every add and every fence is appended here before the bookie answers; the answer goes
out only after the group holding the record has been written and ``fdatasync``'ed.

On disk: ``journal/NNNNNNNNNNNN.jnl`` files, ids increasing. Each file starts with an
8-byte header (``b"GRJN"``, u16 version, u16 zero) followed by records::

    offset  size  field
    0       4     length   (bytes of type + payload)
    4       4     CRC32C   over type + payload
    8       1     type     (ENTRY = 1, FENCE = 2)
    9       ...   payload  ENTRY: ledger u64, entry i64, entry bytes
                           FENCE: ledger u64

Example: fencing ledger 7 appends ``00000009 <crc> 02 0000000000000007`` (17 bytes).

Group commit: :meth:`Journal.append_entry` and :meth:`Journal.append_fence` only buffer
the record and its waiter; one writer task closes a group when ``group_wait_ms`` has
passed since its first record or ``group_bytes_max`` bytes are buffered (a full group
is closed at once and queued behind the one syncing), writes the whole group with one
``write`` and one ``fdatasync`` in a worker thread, then calls every waiter. While a
group syncs, the next one fills. A group never spans two files: the file rolls before
a group that would take it past ``file_bytes_max``.

Replay (:func:`replay`) reads from a position (the checkpoint mark) forward through every
later file. A record that is short, has an impossible length, an unknown type or a bad
CRC ends that file's replay at the last whole record, like BookKeeper: such a tail can
only be a write torn by a crash. The caller then starts a fresh file (:meth:`Journal.open`
always does), so nothing is ever appended after junk, and the next file is read in full.

A write or sync that fails (a full disk, an I/O error, a write that stopped part way)
answers every waiter of the groups it carried with :class:`JournalFailed`, cuts the file
back to the end of the last durable group and closes it: the synced position never moves
past what is on disk, and the file that failed is never written again. The journal then
refuses records until :meth:`Journal.recover` opens a fresh file (the bookie calls it
once its disk has room again): a failed write is a state the bookie leaves by itself, not
a restart. Example: group 12 fails at byte 600 of 1,000 in file 3, whose last durable
group ended at 40,960: file 3 is cut to 40,960, the synced position stays ``(3, 40960)``,
group 12's adds are refused, and after recovery group 13 goes to file 4.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import logging
import os
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crc32c import crc32c

from georep import limits
from georep.domain.decimal_text import parse_decimal
from georep.invariant import invariant
from georep.storage.bookie.disk_io import DiskWriter, cut_back
from georep.storage.errors import JournalFailed

log = logging.getLogger(__name__)

FILE_MAGIC = b"GRJN"
FILE_VERSION = 1
_FILE_HEADER = struct.Struct(">4sHH")
FILE_HEADER_BYTES = _FILE_HEADER.size
_RECORD_HEADER = struct.Struct(">II")
RECORD_HEADER_BYTES = _RECORD_HEADER.size
_ENTRY_PREFIX = struct.Struct(">BQq")
_FENCE_BODY = struct.Struct(">BQ")

TYPE_ENTRY = 1
TYPE_FENCE = 2

#: Called once per record after its group is durable: ``waiter(token, None)``, or
#: ``waiter(token, error)`` when the journal failed. The token is the caller's own (its
#: request), handed back untouched: hence ``Any``.
Waiter = Callable[[Any, BaseException | None], None]


def fresh_file_header() -> bytes:
    """The bytes a new journal file starts with."""
    return _FILE_HEADER.pack(FILE_MAGIC, FILE_VERSION, 0)


def file_name(file_id: int) -> str:
    return f"{file_id:012d}.jnl"


def list_file_ids(directory: Path) -> list[int]:
    ids = (parse_decimal(path.stem) for path in directory.glob("*.jnl"))
    return sorted(file_id for file_id in ids if file_id is not None)


@dataclass(frozen=True, slots=True, order=True)
class JournalOffset:
    """A place in the journal: everything before ``offset`` of file ``file_id``."""

    file_id: int
    offset: int


# --- record codec --------------------------------------------------------------------


def entry_record(ledger_id: int, entry_id: int, data: bytes) -> tuple[bytes, bytes, bytes]:
    """The ENTRY record as three pieces (header, type + ids, data), so data is not copied."""
    prefix = _ENTRY_PREFIX.pack(TYPE_ENTRY, ledger_id, entry_id)
    header = _RECORD_HEADER.pack(len(prefix) + len(data), crc32c(data, crc32c(prefix)))
    return header, prefix, data


def fence_record(ledger_id: int) -> bytes:
    body = _FENCE_BODY.pack(TYPE_FENCE, ledger_id)
    return _RECORD_HEADER.pack(len(body), crc32c(body)) + body


@dataclass(frozen=True, slots=True)
class EntryRecord:
    ledger_id: int
    entry_id: int
    data: bytes


@dataclass(frozen=True, slots=True)
class FenceRecord:
    ledger_id: int


Record = EntryRecord | FenceRecord


def parse_records(buffer: bytes, offset: int) -> Iterator[tuple[Record, int]]:
    """Yield (record, offset after it) from ``offset`` until the end or the first bad record."""
    end = len(buffer)
    while end - offset >= RECORD_HEADER_BYTES:
        length, stored_crc = _RECORD_HEADER.unpack_from(buffer, offset)
        if length < 1 or length > limits.journal_record_bytes_max:
            return
        body_start = offset + RECORD_HEADER_BYTES
        body_end = body_start + length
        if body_end > end:
            return
        body = memoryview(buffer)[body_start:body_end]
        if crc32c(body) != stored_crc:
            return
        record_type = body[0]
        if record_type == TYPE_ENTRY and length >= _ENTRY_PREFIX.size:
            _, ledger_id, entry_id = _ENTRY_PREFIX.unpack_from(body, 0)
            record: Record = EntryRecord(ledger_id, entry_id, bytes(body[_ENTRY_PREFIX.size :]))
        elif record_type == TYPE_FENCE and length == _FENCE_BODY.size:
            _, ledger_id = _FENCE_BODY.unpack_from(body, 0)
            record = FenceRecord(ledger_id)
        else:
            return
        offset = body_end
        yield record, offset


@dataclass(slots=True)
class ReplayReport:
    files_read: int = 0
    records: int = 0
    #: Files whose replay ended before their end (torn or junk tail), with the offset.
    torn_tails: list[JournalOffset] = field(default_factory=list)


def replay(directory: Path, start: JournalOffset, apply: Callable[[Record], None]) -> ReplayReport:
    """Apply every whole record from ``start`` forward through all later journal files.

    Reads each file from its start position to its end in one piece (journal files are
    bounded by ``journal_file_bytes_max``). Files before ``start.file_id`` are skipped;
    a file with no valid header (empty, short, wrong magic) replays nothing.
    """
    report = ReplayReport()
    for file_id in list_file_ids(directory):
        if file_id < start.file_id:
            continue
        report.files_read += 1
        with open(directory / file_name(file_id), "rb") as file:
            header = file.read(FILE_HEADER_BYTES)
            if len(header) < FILE_HEADER_BYTES:
                if header:
                    report.torn_tails.append(JournalOffset(file_id, 0))
                continue
            magic, version, _ = _FILE_HEADER.unpack(header)
            if magic != FILE_MAGIC or version != FILE_VERSION:
                log.warning("journal file %s has no valid header; skipped", file_name(file_id))
                report.torn_tails.append(JournalOffset(file_id, 0))
                continue
            base = FILE_HEADER_BYTES
            if file_id == start.file_id and start.offset > base:
                base = start.offset
                file.seek(base)
            buffer = file.read()
        consumed = 0
        for record, consumed in parse_records(buffer, 0):  # noqa: B007
            apply(record)
            report.records += 1
        if consumed != len(buffer):
            log.warning(
                "journal file %s: replay stopped at offset %d of %d (torn or junk tail)",
                file_name(file_id),
                base + consumed,
                base + len(buffer),
            )
            report.torn_tails.append(JournalOffset(file_id, base + consumed))
    return report


# --- the writer ----------------------------------------------------------------------


@dataclass(slots=True)
class JournalStats:
    records: int = 0
    groups: int = 0
    fsyncs: int = 0
    bytes_written: int = 0
    files_rolled: int = 0
    group_records_max: int = 0
    write_failures: int = 0
    recoveries: int = 0


class _Group:
    __slots__ = ("bytes", "chunks", "first_time", "tokens", "waiters")

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.waiters: list[Waiter] = []
        self.tokens: list[object] = []
        self.bytes = 0
        self.first_time = 0.0


class Journal:
    """The open journal: a current file and the writer task that commits groups."""

    def __init__(
        self,
        directory: Path,
        *,
        fsync: bool = True,
        group_wait_ms: float = limits.journal_group_wait_ms_default,
        group_bytes_max: int = limits.journal_group_bytes_max,
        file_bytes_max: int = limits.journal_file_bytes_max,
        queue_count_max: int = limits.journal_queue_count_max,
        disk: DiskWriter | None = None,
    ) -> None:
        invariant(group_bytes_max <= file_bytes_max, "journal group larger than a file")
        self.directory = directory
        self.disk = disk or DiskWriter()
        self.fsync = fsync
        self.group_wait_s = group_wait_ms / 1000.0
        self.group_bytes_max = group_bytes_max
        self.file_bytes_max = file_bytes_max
        #: Groups merged into one write and sync stay within one file.
        self.sync_bytes_max = min(limits.journal_sync_bytes_max, file_bytes_max)
        self.queue_count_max = queue_count_max
        self.stats = JournalStats()
        #: Called after every group's waiters ran (the server flushes and unpauses here).
        self.group_done_hooks: list[Callable[[], None]] = []
        self._group = _Group()
        #: Groups closed by size, waiting for the writer (in order).
        self._closed: collections.deque[_Group] = collections.deque()
        self._queued = 0
        self._file_id = -1
        self._fd = -1
        self._file_bytes = 0
        #: End of the last durable group: everything before it is on disk.
        self._synced = JournalOffset(0, 0)
        self._failed: BaseException | None = None
        self._wakeup: asyncio.Future[None] | None = None
        self._writer: asyncio.Task[None] | None = None
        self._closing = False
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="journal"
        )

    # -- lifecycle --

    def open(self) -> None:
        """Start a fresh file after the highest existing id (never append to old files).

        On a disk that cannot take the file the journal opens failed (see recover).
        """
        self.directory.mkdir(parents=True, exist_ok=True)
        try:
            self._roll(self._next_file_id())
        except OSError as exc:
            log.error("journal cannot open a file; refusing writes until it can: %s", exc)
            self._failed = JournalFailed(f"journal cannot open a file: {exc}")

    def _next_file_id(self) -> int:
        ids = list_file_ids(self.directory)
        return max(ids[-1] if ids else 0, self._file_id) + 1

    async def recover(self) -> bool:
        """After a failed write: open a fresh file and take records again.

        True when the journal takes records (again); False if the fresh file could not
        be made (the disk is still full): the journal stays failed, call again later.
        """
        if self._failed is None:
            return True
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._executor, self._reopen)
        except OSError as exc:
            log.warning("journal still cannot write: %s", exc)
            return False
        log.warning("journal writable again (file %s)", file_name(self._file_id))
        self.stats.recoveries += 1
        self._failed = None
        return True

    def _reopen(self) -> None:
        if self._fd < 0:
            self._roll(self._next_file_id())

    def start(self) -> None:
        self._writer = asyncio.get_running_loop().create_task(
            self._write_loop(), name="journal-writer"
        )

    async def close(self) -> None:
        """Commit every buffered record (waiters are answered), then close the file."""
        self._closing = True
        self._wake()
        if self._writer is not None:
            await self._writer
            self._writer = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self._executor.shutdown(wait=True)

    # -- appending --

    @property
    def queued_count(self) -> int:
        """Records buffered or being synced, not yet answered."""
        return self._queued

    @property
    def queue_full(self) -> bool:
        return self.queued_count >= self.queue_count_max

    @property
    def synced_position(self) -> JournalOffset:
        return self._synced

    @property
    def failed(self) -> BaseException | None:
        return self._failed

    def append_entry(
        self, ledger_id: int, entry_id: int, data: bytes, waiter: Waiter, token: object
    ) -> None:
        header, prefix, payload = entry_record(ledger_id, entry_id, data)
        self._append(
            (header, prefix, payload), len(header) + len(prefix) + len(payload), waiter, token
        )

    def append_fence(self, ledger_id: int, waiter: Waiter, token: object) -> None:
        record = fence_record(ledger_id)
        self._append((record,), len(record), waiter, token)

    def _append(self, pieces: tuple[bytes, ...], size: int, waiter: Waiter, token: object) -> None:
        if self._failed is not None:
            waiter(token, self._failed)
            return
        invariant(not self._closing, "journal append after close")
        group = self._group
        first = not group.waiters
        if first:
            group.first_time = time.monotonic()
        group.chunks.extend(pieces)
        group.waiters.append(waiter)
        group.tokens.append(token)
        group.bytes += size
        self._queued += 1
        if group.bytes >= self.group_bytes_max:
            # Full: close it now, so no group outgrows group_bytes_max + one record
            # (and so a journal file) however long the group before it takes to sync.
            self._closed.append(group)
            self._group = _Group()
            self._wake()
        elif first:
            self._wake()

    def _wake(self) -> None:
        wakeup = self._wakeup
        if wakeup is not None and not wakeup.done():
            wakeup.set_result(None)

    # -- the writer task --

    async def _write_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if self._closed:
                # Groups that filled up while the last sync ran: write them all and sync
                # once (BookKeeper's force-write thread merges pending flushes the same way).
                groups = [self._closed.popleft()]
                size = groups[0].bytes
                while self._closed and size + self._closed[0].bytes <= self.sync_bytes_max:
                    size += self._closed[0].bytes
                    groups.append(self._closed.popleft())
            else:
                group = self._group
                if not group.waiters:
                    if self._closing:
                        return
                    await self._sleep(loop, None)
                    continue
                if not self._closing:
                    delay = group.first_time + self.group_wait_s - time.monotonic()
                    if delay > 0:
                        await self._sleep(loop, delay)
                        continue
                self._group = _Group()
                groups = [group]
            if self._failed is None:
                try:
                    await loop.run_in_executor(self._executor, self._write_groups, groups)
                except OSError as exc:
                    self.stats.write_failures += 1
                    log.error("journal write failed; refusing writes until it recovers: %s", exc)
                    self._failed = JournalFailed(f"journal write failed: {exc}")
                except Exception as exc:  # a bug: no more acks from this journal
                    log.critical("journal write failed; the bookie takes no more writes: %s", exc)
                    self._failed = JournalFailed(f"journal write failed: {exc}")
            error = self._failed
            for group in groups:
                self._queued -= len(group.waiters)
                tokens = group.tokens
                for index, waiter in enumerate(group.waiters):
                    waiter(tokens[index], error)
            for hook in self.group_done_hooks:
                hook()

    async def _sleep(self, loop: asyncio.AbstractEventLoop, delay: float | None) -> None:
        wakeup = loop.create_future()
        self._wakeup = wakeup
        handle = None
        if delay is not None:
            handle = loop.call_later(delay, _resolve, wakeup)
        try:
            await wakeup
        finally:
            self._wakeup = None
            if handle is not None:
                handle.cancel()

    def _write_groups(self, groups: list[_Group]) -> None:
        """In the journal thread: write the groups in order, then one fdatasync."""
        size = sum(group.bytes for group in groups)
        if self._fd < 0 or self._file_bytes + size > self.file_bytes_max:
            self._roll(self._next_file_id())
        data = b"".join(chunk for group in groups for chunk in group.chunks)
        try:
            self.disk.write_all(self._fd, data, "journal")
            if self.fsync:
                self.disk.sync(self._fd, "journal")
                self.stats.fsyncs += 1
        except OSError:
            self._abandon()
            raise
        self._file_bytes += len(data)
        self.stats.groups += len(groups)
        self.stats.bytes_written += len(data)
        for group in groups:
            self.stats.records += len(group.waiters)
            self.stats.group_records_max = max(self.stats.group_records_max, len(group.waiters))
        self._synced = JournalOffset(self._file_id, self._file_bytes)

    def _abandon(self) -> None:
        """Cut the current file back to its last durable group and write it no more."""
        cut_back(self._fd, self._file_bytes)
        os.close(self._fd)
        self._fd = -1

    def _roll(self, file_id: int) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
            self.stats.files_rolled += 1
        path = self.directory / file_name(file_id)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        header = fresh_file_header()
        try:
            self.disk.write_all(fd, header, "journal")
            if self.fsync:
                os.fsync(fd)
                fsync_directory(self.directory)
        except OSError:
            # No whole header: replay would skip it anyway; remove it and stay failed.
            os.close(fd)
            path.unlink(missing_ok=True)
            raise
        self._fd = fd
        self._file_id = file_id
        self._file_bytes = len(header)
        self._synced = JournalOffset(file_id, len(header))

    # -- pruning --

    def remove_files_before(self, file_id: int) -> int:
        """Delete journal files wholly before ``file_id`` (never the current one)."""
        removed = 0
        for old in list_file_ids(self.directory):
            if old >= file_id or old >= self._file_id:
                break
            (self.directory / file_name(old)).unlink(missing_ok=True)
            removed += 1
        return removed


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
