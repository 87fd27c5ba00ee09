"""Every byte a bookie puts on its disk passes through one :class:`DiskWriter`.

Four write sites: ``journal`` (groups and file headers), ``entry_log`` (checkpointed
entries and file headers), ``index`` (the SQLite checkpoint transaction) and ``mark``
(the checkpoint mark file). Each calls :meth:`DiskWriter.write_all` (or
:meth:`DiskWriter.check` for SQLite, which writes its own bytes), so one hook can make any
of them fail the way a real disk does:

    enospc   raise ``OSError(ENOSPC)`` before a byte is written
    eio      raise ``OSError(EIO)`` before a byte is written
    short    write the first half of the bytes, then raise ``OSError(ENOSPC)``:
             a write that stopped part way, as a filling disk leaves it

The fault is set over the wire (the FAULT request's ``disk_write`` and ``disk_write_site``
fields, see :mod:`georep.storage.bookie.faults`) and read by the journal and storage
threads; a plain attribute swap, so a thread sees either the old or the new fault.

Example: ``DiskWriter(fault=DiskFault("short", "entry_log"))`` lets the journal write but
leaves a checkpoint's append half written: the entry log must cut those bytes off before
any index row could point past them.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass

SITES = ("journal", "entry_log", "index", "mark")
KINDS = ("enospc", "eio", "short")


@dataclass(frozen=True, slots=True)
class DiskFault:
    kind: str
    #: One of :data:`SITES`, or None for every site.
    site: str | None = None

    def applies(self, site: str) -> bool:
        return self.site is None or self.site == site


def _error(kind: str, site: str) -> OSError:
    code = errno.EIO if kind == "eio" else errno.ENOSPC
    return OSError(code, f"{os.strerror(code)} (injected at {site})")


class DiskWriter:
    """Writes whole buffers; the one place a disk fault can be injected."""

    def __init__(self, fault: DiskFault | None = None) -> None:
        self.fault = fault

    def check(self, site: str) -> None:
        """Raise the injected error for ``site`` if there is one (sites that write by
        themselves, like SQLite, call this before they write)."""
        fault = self.fault
        if fault is not None and fault.applies(site):
            raise _error(fault.kind, site)

    def write_all(self, fd: int, data: bytes, site: str) -> None:
        """Write every byte of ``data`` to ``fd`` (looping over short writes).

        On error some prefix of ``data`` may be on disk: the caller cuts it off.
        """
        view = memoryview(data)
        fault = self.fault
        if fault is not None and fault.applies(site):
            if fault.kind == "short" and len(view) > 1:
                half = view[: len(view) // 2]
                while half:
                    half = half[os.write(fd, half) :]
            raise _error(fault.kind, site)
        while view:
            view = view[os.write(fd, view) :]

    def sync(self, fd: int, site: str) -> None:
        """``fdatasync`` (an injected ``eio`` fails the sync too)."""
        fault = self.fault
        if fault is not None and fault.kind == "eio" and fault.applies(site):
            raise _error(fault.kind, site)
        os.fdatasync(fd)


def cut_back(fd: int, length: int) -> bool:
    """Truncate ``fd`` to ``length`` (the end of its last good write); False if even that
    failed (the caller then abandons the file)."""
    try:
        os.ftruncate(fd, length)
        return os.fstat(fd).st_size == length
    except OSError:
        return False
