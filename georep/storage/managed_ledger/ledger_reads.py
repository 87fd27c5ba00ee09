"""Reading a managed ledger's ledgers: the handles it reads through.

The ledger being written is read through a handle over the writer's own metadata and
last-add-confirmed (no open, no recovery: the writer is alive). Every other ledger is
closed and read through a handle opened without recovery and kept, the most recently
read ``limits.managed_ledger_read_handles_cached_max`` of them. A read through a kept
handle that fails because a bookie is gone or no longer holds the entry is tried once
more through a fresh handle: auto-recovery may have moved the ledger's fragments, and
only fresh metadata names their new bookies.
"""

from __future__ import annotations

import collections
import logging

from georep import limits
from georep.storage import entry as entry_format
from georep.storage.client.bookkeeper import BookKeeper
from georep.storage.client.ledger_handle import LedgerHandle
from georep.storage.client.read_handle import ReadHandle
from georep.storage.errors import BookieUnavailable, NoSuchEntry

log = logging.getLogger(__name__)


class LedgerReads:
    """Reads of a managed ledger's ledgers, through kept handles (module docstring)."""

    def __init__(self, bookkeeper: BookKeeper) -> None:
        self._bk = bookkeeper
        self._handles: collections.OrderedDict[int, ReadHandle] = collections.OrderedDict()

    async def read(
        self, ledger_id: int, first: int, last: int, writer: LedgerHandle | None
    ) -> list[entry_format.Entry]:
        """Entries ``first..last`` of ``ledger_id``; ``writer``: the ledger being
        written, if any."""
        if writer is not None and writer.ledger_id == ledger_id:
            current = ReadHandle(self._bk, writer.metadata, writer.last_add_confirmed)
            return await current.read(first, last)
        cached = self._handles.get(ledger_id)
        if cached is not None:
            self._handles.move_to_end(ledger_id)
            try:
                return await cached.read(first, last)
            except (BookieUnavailable, NoSuchEntry) as error:
                # Auto-recovery may have moved the ledger's fragments: fresh metadata.
                log.info("ledger %d: read failed (%s); reopening", ledger_id, error)
                self._handles.pop(ledger_id, None)
        handle = await self._bk.open_ledger(ledger_id, recovery=False)
        self._handles[ledger_id] = handle
        while len(self._handles) > limits.managed_ledger_read_handles_cached_max:
            self._handles.popitem(last=False)
        return await handle.read(first, last)

    def forget(self, ledger_id: int) -> None:
        """``ledger_id`` is deleted: drop its handle."""
        self._handles.pop(ledger_id, None)

    def clear(self) -> None:
        self._handles.clear()
