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
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

from georep import limits
from georep.invariant import invariant
from georep.storage.bookie.journal import fsync_directory

FILE_MAGIC = b"GREL"
FILE_VERSION = 1
_FILE_HEADER = struct.Struct(">4sHH")
_LENGTH = struct.Struct(">I")

Location = tuple[int, int, int]  # log id, offset, length


def file_name(log_id: int) -> str:
    return f"{log_id:04d}.log"


def list_log_ids(directory: Path) -> list[int]:
    return sorted(int(path.stem) for path in directory.glob("*.log") if path.stem.isdigit())


class EntryLog:
    """The set of entry log files: one current file for appends, pread for any file."""

    def __init__(
        self,
        directory: Path,
        *,
        fsync: bool = True,
        file_bytes_max: int = limits.entry_log_file_bytes_max,
    ) -> None:
        self.directory = directory
        self.fsync = fsync
        self.file_bytes_max = file_bytes_max
        self._read_fds: dict[int, int] = {}
        self._write_fd = -1
        self._current_id = -1
        self._current_bytes = 0

    def open(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        ids = list_log_ids(self.directory)
        self._roll(ids[-1] + 1 if ids else 1)

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
        """Append entries in order, fsync, and return their locations (checkpoint thread)."""
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
                self._roll(self._current_id + 1)
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
        view = memoryview(data)
        while view:
            written = os.write(self._write_fd, view)
            view = view[written:]
        if self.fsync:
            os.fdatasync(self._write_fd)
        self._current_bytes += len(data)

    def _roll(self, log_id: int) -> None:
        if self._write_fd >= 0:
            os.close(self._write_fd)
        path = self.directory / file_name(log_id)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        os.write(fd, _FILE_HEADER.pack(FILE_MAGIC, FILE_VERSION, 0))
        if self.fsync:
            os.fsync(fd)
            fsync_directory(self.directory)
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
