"""Append-only entry log files: where entries live after a checkpoint.

``entrylog/NNNN.log`` files, ids increasing. Each starts with an 8-byte header
(``b"GREL"``, u16 version, u16 zero) followed by entries, each as ``u32 length`` then the
entry bytes exactly as the writer built them (header, CRC32C, payload). A location is
``(log id, offset of the entry bytes, length)``: the index stores it, a read is one
``pread``. Example: the first entry of a fresh log, 1060 bytes long, is at
``(log, 12, 1060)``: 8 bytes of file header, 4 of length prefix.

The length prefixes make a log readable on its own (to rebuild an index, or inspect by
hand). Only the checkpoint appends, from one thread; a log is fsynced before any index
row points into it, so the index never names bytes that are not on disk. A log with junk
after its last indexed entry (a crash mid-checkpoint) is never appended to again: each
open starts a fresh log.

A failed write (a full disk, an I/O error, a write that stopped part way) is cut off: the
file is truncated back to the end of its last whole batch, then closed, and the next
append opens a fresh log. Offsets are only ever computed for a file whose size is known
to equal the bytes counted (checked with ``fstat`` before each batch), so no location
can point at bytes shifted by a failed write. Example: a batch of 3 entries fails after
1.5 of them reached log 4 at offset 2,048: log 4 is cut back to 2,048 and left; the
checkpoint fails, no index row names log 4 past 2,048, and the retry writes all three
to log 5 from offset 12.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

from georep import limits
from georep.domain.decimal_text import parse_decimal
from georep.invariant import invariant
from georep.storage.bookie.disk_io import DiskWriter, cut_back
from georep.storage.bookie.journal import fsync_directory

FILE_MAGIC = b"GREL"
FILE_VERSION = 1
_FILE_HEADER = struct.Struct(">4sHH")
_LENGTH = struct.Struct(">I")

Location = tuple[int, int, int]  # log id, offset, length


def file_name(log_id: int) -> str:
    return f"{log_id:04d}.log"


def list_log_ids(directory: Path) -> list[int]:
    ids = (parse_decimal(path.stem) for path in directory.glob("*.log"))
    return sorted(log_id for log_id in ids if log_id is not None)


class EntryLog:
    """The set of entry log files: one current file for appends, pread for any file."""

    def __init__(
        self,
        directory: Path,
        *,
        fsync: bool = True,
        file_bytes_max: int = limits.entry_log_file_bytes_max,
        disk: DiskWriter | None = None,
    ) -> None:
        self.directory = directory
        self.disk = disk or DiskWriter()
        #: Batches that failed to reach the disk (each abandoned its file).
        self.failed_writes = 0
        self.fsync = fsync
        self.file_bytes_max = file_bytes_max
        self._read_fds: dict[int, int] = {}
        self._write_fd = -1
        self._current_id = -1
        self._current_bytes = 0

    def open(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        try:
            self._roll(self._next_id())
        except OSError:
            pass  # a full disk: the first append tries again (and fails the checkpoint)

    def _next_id(self) -> int:
        ids = list_log_ids(self.directory)
        return max(ids[-1] if ids else 0, self._current_id) + 1

    def close(self) -> None:
        for fd in self._read_fds.values():
            os.close(fd)
        self._read_fds.clear()
        if self._write_fd >= 0:
            os.close(self._write_fd)
            self._write_fd = -1

    @property
    def current_id(self) -> int:
        return self._current_id

    def append_batch(self, entries: list[bytes]) -> list[Location]:
        """Append entries in order, fsync, and return their locations (checkpoint thread).

        Raises ``OSError`` when the disk refuses; nothing written by this call is then
        reachable through a returned location.
        """
        if self._write_fd < 0:
            self._roll(self._next_id())
        if os.fstat(self._write_fd).st_size != self._current_bytes:
            # Bytes nobody counted (they cannot come from us): never compute offsets on them.
            self._abandon()
            self._roll(self._next_id())
        locations: list[Location] = []
        chunks: list[bytes] = []
        pending = 0
        for data in entries:
            record_bytes = _LENGTH.size + len(data)
            if self._current_bytes + pending + record_bytes > self.file_bytes_max and (
                pending or self._current_bytes > _FILE_HEADER.size
            ):
                self._write_and_sync(chunks)
                chunks = []
                pending = 0
                self._roll(self._next_id())
            offset = self._current_bytes + pending + _LENGTH.size
            chunks.append(_LENGTH.pack(len(data)))
            chunks.append(data)
            pending += record_bytes
            locations.append((self._current_id, offset, len(data)))
        self._write_and_sync(chunks)
        return locations

    def _write_and_sync(self, chunks: list[bytes]) -> None:
        if not chunks:
            return
        data = b"".join(chunks)
        try:
            self.disk.write_all(self._write_fd, data, "entry_log")
            if self.fsync:
                self.disk.sync(self._write_fd, "entry_log")
        except OSError:
            self.failed_writes += 1
            self._abandon()
            raise
        self._current_bytes += len(data)

    def _abandon(self) -> None:
        """Cut the current file back to its counted bytes and stop appending to it."""
        cut_back(self._write_fd, self._current_bytes)
        os.close(self._write_fd)
        self._write_fd = -1

    def _roll(self, log_id: int) -> None:
        if self._write_fd >= 0:
            os.close(self._write_fd)
            self._write_fd = -1
        path = self.directory / file_name(log_id)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        try:
            self.disk.write_all(fd, _FILE_HEADER.pack(FILE_MAGIC, FILE_VERSION, 0), "entry_log")
            if self.fsync:
                os.fsync(fd)
                fsync_directory(self.directory)
        except OSError:
            # A log without a whole header: remove it (nothing points into it).
            os.close(fd)
            path.unlink(missing_ok=True)
            raise
        self._write_fd = fd
        self._current_id = log_id
        self._current_bytes = _FILE_HEADER.size

    def read(self, location: Location) -> bytes:
        """The bytes at ``location`` (may be short if the file was damaged)."""
        log_id, offset, length = location
        fd = self._read_fds.get(log_id)
        if fd is None:
            fd = os.open(self.directory / file_name(log_id), os.O_RDONLY)
            self._read_fds[log_id] = fd
        return os.pread(fd, length, offset)

    def delete(self, log_id: int) -> None:
        """Remove a log no index row points into (garbage collection)."""
        invariant(log_id != self._current_id, "deleting the current entry log")
        fd = self._read_fds.pop(log_id, None)
        if fd is not None:
            os.close(fd)
        (self.directory / file_name(log_id)).unlink(missing_ok=True)

    def log_ids(self) -> list[int]:
        return list_log_ids(self.directory)
