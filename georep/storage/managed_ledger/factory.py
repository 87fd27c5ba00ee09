"""Managed ledgers of one process: at most one open instance per name.

``open`` returns the instance already open (or being opened) in this process, else
opens the log as its new owner, which fences any other process that had it (see
``managed_ledger.py``). An instance that is closed, or finds itself fenced, leaves the
factory, so the next ``open`` takes the log over again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from georep import limits
from georep.storage.client.bookkeeper import BookKeeper
from georep.storage.errors import InvalidArgument, NoSuchLedger, StorageError
from georep.storage.managed_ledger.config import ManagedLedgerConfig
from georep.storage.managed_ledger.entry_cache import EntryCache
from georep.storage.managed_ledger.managed_ledger import ManagedLedger
from georep.storage.managed_ledger.opening import check_name
from georep.storage.meta.managed_ledgers import ManagedLedgerRepository

log = logging.getLogger(__name__)


class ManagedLedgerFactory:
    def __init__(
        self,
        bookkeeper: BookKeeper,
        store: ManagedLedgerRepository,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._bk = bookkeeper
        self._store = store
        self._clock = clock
        self._ledgers: dict[str, ManagedLedger] = {}
        #: The entries its managed ledgers confirmed last, for readers at the tail.
        self.cache = EntryCache()
        self._opening: dict[str, asyncio.Task[ManagedLedger]] = {}
        self._closed = False

    async def open(self, name: str, config: ManagedLedgerConfig | None = None) -> ManagedLedger:
        """The managed ledger ``name``, created when absent. An instance already open
        here is returned (with ``config`` given, it applies from the next rollover and
        trim on)."""
        check_name("managed ledger name", name, limits.managed_ledger_name_chars_max)
        if self._closed:
            raise InvalidArgument("the managed ledger factory is closed")
        existing = self._ledgers.get(name)
        if existing is not None:
            if config is not None:
                existing.config = config
            return existing
        task = self._opening.get(name)
        if task is None:
            task = asyncio.get_running_loop().create_task(
                self._open(name, config or ManagedLedgerConfig())
            )
            self._opening[name] = task
        return await asyncio.shield(task)

    async def _open(self, name: str, config: ManagedLedgerConfig) -> ManagedLedger:
        try:
            managed_ledger = await ManagedLedger.open(
                name,
                config,
                bookkeeper=self._bk,
                store=self._store,
                clock=self._clock,
                on_closed=self._forget,
                cache=self.cache,
            )
            self._ledgers[name] = managed_ledger
            return managed_ledger
        finally:
            self._opening.pop(name, None)

    def _forget(self, managed_ledger: ManagedLedger) -> None:
        if self._ledgers.get(managed_ledger.name) is managed_ledger:
            del self._ledgers[managed_ledger.name]

    async def delete(self, name: str) -> None:
        """Delete the log, its cursors and all their ledgers. Closes the instance open
        here, and fences an owner elsewhere first (its last ledger and its cursors'
        ledgers are recovered), so nothing writes to what is deleted. NoSuchManagedLedger
        when absent."""
        check_name("managed ledger name", name, limits.managed_ledger_name_chars_max)
        task = self._opening.get(name)
        if task is not None:
            await asyncio.gather(task, return_exceptions=True)
        managed_ledger = self._ledgers.get(name)
        if managed_ledger is not None:
            await managed_ledger.close()
        info = await self._store.get_managed_ledger(name)
        cursors = await self._store.list_managed_cursors(name)
        log_ledgers = [ledger.ledger_id for ledger in info.ledgers]
        cursor_ledgers = [c.cursor_ledger_id for c in cursors if c.cursor_ledger_id is not None]
        for ledger_id in log_ledgers[-1:] + cursor_ledgers:  # fence whoever writes them
            try:
                await self._bk.recover_ledger(ledger_id)
            except NoSuchLedger:
                pass
        await self._store.delete_managed_ledger(name)
        for ledger_id in log_ledgers + cursor_ledgers:
            try:
                await self._bk.delete_ledger(ledger_id)
            except StorageError as error:
                log.warning("deleting %s: ledger %d: %s", name, ledger_id, error)
        log.info("deleted managed ledger %s", name)

    async def list_names(self) -> list[str]:
        """Every managed ledger in the metadata store, sorted (not only those open here)."""
        return await self._store.list_managed_ledger_names()

    @property
    def open_ledgers(self) -> dict[str, ManagedLedger]:
        return dict(self._ledgers)

    async def close(self) -> None:
        """Close every managed ledger open here. Idempotent."""
        self._closed = True
        if self._opening:
            await asyncio.gather(*self._opening.values(), return_exceptions=True)
        for managed_ledger in list(self._ledgers.values()):
            await managed_ledger.close()
