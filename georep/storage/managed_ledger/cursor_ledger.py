"""A cursor's own ledger: where its persisted states are written, and its row.

Pulsar's way: every persisted state of a cursor is one entry of a ledger of the
cursor's own (format in ``cursor_state.py``); the metadata store's cursor row only
names the ledger (``cursor_ledger_id``). Acknowledgements come many times a second and
an entry is a journal group commit on the bookies, while the metadata store is one
SQLite file shared with every bookie's lease: the ledger keeps the hot path off it, and
fencing the cursor's ledger fences a stale owner's acknowledgements for free.

Opening as a new owner (:meth:`CursorLedger.recover`): fence and close the previous
cursor ledger (the old owner's next persist fails: ManagedLedgerFenced), read its last
entry, start a new ledger with that state as its first entry, CAS the row to the new
ledger (a concurrent opener loses: ManagedLedgerFenced), delete the old ledger. The
ledger also rolls over this way (:meth:`CursorLedger.write`) after
``cursor_rollover_entries_max`` states or ``cursor_rollover_bytes_max`` bytes, and when
a write to it fails.
"""

from __future__ import annotations

import logging
from typing import Protocol

from georep.domain.position import Position
from georep.storage.client.ledger_handle import LedgerHandle
from georep.storage.client.read_handle import ReadHandle
from georep.storage.errors import (
    BadVersion,
    CorruptEntry,
    LedgerFenced,
    ManagedLedgerFenced,
    NoSuchCursor,
    NoSuchLedger,
    NoSuchManagedLedger,
    StorageError,
)
from georep.storage.managed_ledger import cursor_state
from georep.storage.managed_ledger.config import ManagedLedgerConfig
from georep.storage.managed_ledger.cursor_state import CursorState
from georep.storage.meta.managed_ledgers import ManagedCursorInfo

log = logging.getLogger(__name__)


class CursorStorage(Protocol):
    """The port a cursor persists through: its ledgers and its row. ``ManagedLedger``
    implements it; the cursor reaches nothing else of the managed ledger's storage."""

    name: str

    async def create_cursor_ledger(self, cursor_name: str) -> LedgerHandle: ...

    async def open_cursor_ledger(self, ledger_id: int) -> ReadHandle: ...

    async def delete_cursor_ledgers(self, ledger_ids: list[int]) -> None: ...

    async def create_cursor_row(
        self, name: str, *, cursor_ledger_id: int, mark_delete: Position
    ) -> ManagedCursorInfo: ...

    async def update_cursor_row(self, info: ManagedCursorInfo) -> ManagedCursorInfo: ...


class CursorLedger:
    """The ledger cursor ``info.name`` writes its states to, and the row naming it.
    Create with :meth:`create` or :meth:`recover`."""

    def __init__(
        self, storage: CursorStorage, info: ManagedCursorInfo, ledger: LedgerHandle, size: int
    ) -> None:
        self.name = info.name
        self._storage = storage
        self._info = info
        self._ledger: LedgerHandle | None = ledger
        self._entries = 1  # the state it was started with
        self._bytes = size
        self._broken = False
        #: Ledgers started after the first (rollovers, failed writes).
        self.switches = 0

    @classmethod
    async def create(cls, storage: CursorStorage, name: str, state: CursorState) -> CursorLedger:
        """A new cursor's ledger holding ``state``, and its row."""
        ledger, size = await _start_ledger(storage, name, state)
        try:
            info = await storage.create_cursor_row(
                name, cursor_ledger_id=ledger.ledger_id, mark_delete=state.mark_delete
            )
        except (BadVersion, NoSuchManagedLedger) as error:
            await storage.delete_cursor_ledgers([ledger.ledger_id])
            raise ManagedLedgerFenced(
                f"cursor {name!r} of {storage.name}: created by another owner ({error})"
            ) from None
        return cls(storage, info, ledger, size)

    @classmethod
    async def recover(
        cls, storage: CursorStorage, info: ManagedCursorInfo
    ) -> tuple[CursorLedger, CursorState]:
        """The state of ``info`` as last persisted, in a new ledger of this owner's, the
        previous owner fenced (steps in the module docstring)."""
        state = await _last_state(storage, info)
        previous_ledger_id = info.cursor_ledger_id
        ledger, size = await _start_ledger(storage, info.name, state)
        try:
            info = await storage.update_cursor_row(
                info.replace(
                    cursor_ledger_id=ledger.ledger_id,
                    mark_delete=state.mark_delete,
                    properties=dict(state.properties),
                )
            )
        except (BadVersion, NoSuchCursor) as error:
            await storage.delete_cursor_ledgers([ledger.ledger_id])
            raise ManagedLedgerFenced(
                f"cursor {info.name!r} of {storage.name}: opened by another owner ({error})"
            ) from None
        if previous_ledger_id is not None:
            await storage.delete_cursor_ledgers([previous_ledger_id])
        return cls(storage, info, ledger, size), state

    @property
    def ledger_id(self) -> int | None:
        return self._ledger.ledger_id if self._ledger is not None else None

    async def write(self, state: CursorState, config: ManagedLedgerConfig) -> None:
        """Persist ``state``: one entry, or a new ledger starting with it when the ledger
        is due to roll over or a write to it failed. ManagedLedgerFenced when another
        owner has the cursor; another StorageError when the state is not persisted."""
        data = cursor_state.encode(state)
        ledger = self._ledger
        if (
            ledger is None
            or self._broken
            or self._entries >= config.cursor_rollover_entries_max
            or self._bytes >= config.cursor_rollover_bytes_max
        ):
            await self._switch(state)
            return
        try:
            await ledger.add(data)
        except LedgerFenced as error:
            raise ManagedLedgerFenced(f"cursor {self.name!r}: {error}") from None
        except StorageError as error:
            log.warning(
                "cursor %r: ledger %d failed (%s); moving on", self.name, ledger.ledger_id, error
            )
            self._broken = True
            await self._switch(state)
            return
        self._entries += 1
        self._bytes += len(data)

    async def _switch(self, state: CursorState) -> None:
        """Start a new ledger holding ``state``, point the row at it, drop the old one."""
        storage = self._storage
        ledger, size = await _start_ledger(storage, self.name, state)
        try:
            info = await storage.update_cursor_row(
                self._info.replace(
                    cursor_ledger_id=ledger.ledger_id,
                    mark_delete=state.mark_delete,
                    properties=dict(state.properties),
                )
            )
        except (BadVersion, NoSuchCursor) as error:
            await storage.delete_cursor_ledgers([ledger.ledger_id])
            raise ManagedLedgerFenced(f"cursor {self.name!r}: its row changed: {error}") from None
        except StorageError:
            await storage.delete_cursor_ledgers([ledger.ledger_id])
            raise
        old, self._ledger = self._ledger, ledger
        self._info = info
        self._entries, self._bytes = 1, size
        self._broken = False
        self.switches += 1
        if old is not None:
            await _close_quietly(old)
            await storage.delete_cursor_ledgers([old.ledger_id])

    async def close(self) -> int | None:
        """Close the ledger (idempotent); returns its id (None once closed)."""
        ledger, self._ledger = self._ledger, None
        if ledger is None:
            return None
        await _close_quietly(ledger)
        return ledger.ledger_id


async def _start_ledger(
    storage: CursorStorage, name: str, state: CursorState
) -> tuple[LedgerHandle, int]:
    """A new cursor ledger whose first entry is ``state``; with its size in bytes."""
    data = cursor_state.encode(state)
    ledger = await storage.create_cursor_ledger(name)
    try:
        await ledger.add(data)
    except BaseException:
        await storage.delete_cursor_ledgers([ledger.ledger_id])
        raise
    return ledger, len(data)


async def _last_state(storage: CursorStorage, info: ManagedCursorInfo) -> CursorState:
    """The last state persisted in the cursor's ledger, which is fenced and closed first;
    the row's state when there is no ledger or it holds nothing."""
    fallback = CursorState(info.mark_delete, (), dict(info.properties))
    if info.cursor_ledger_id is None:
        return fallback
    try:
        handle = await storage.open_cursor_ledger(info.cursor_ledger_id)
    except NoSuchLedger:
        log.error(
            "cursor %r of %s: its ledger %d is gone; restoring the row's older state "
            "(acknowledgements since are redelivered)",
            info.name,
            storage.name,
            info.cursor_ledger_id,
        )
        return fallback
    last = handle.last_add_confirmed
    if last < 0:
        return fallback
    (entry,) = await handle.read(last, last)
    try:
        return cursor_state.decode(entry.payload)
    except CorruptEntry as error:
        raise CorruptEntry(
            f"cursor {info.name!r} of {storage.name}: the last state in ledger "
            f"{info.cursor_ledger_id} is unreadable: {error}"
        ) from None


async def _close_quietly(ledger: LedgerHandle) -> None:
    try:
        await ledger.close()
    except StorageError as error:
        log.info("closing cursor ledger %d: %s", ledger.ledger_id, error)
