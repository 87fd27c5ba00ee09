"""Taking ownership of a managed ledger's list of ledgers, and the ledgers it creates.

Opening (:func:`take_ownership`, for ``ManagedLedger.open``), which fences any
previous owner:

1. read the row. When there is none, create the first ledger and then the row listing
   it, in one metadata write (no other owner can exist: done);
2. recover the last ledger of the list (``BookKeeper.recover_ledger``: fence and close).
   A previous owner still writing gets ``LedgerFenced`` on its next add and turns it into
   :class:`ManagedLedgerFenced`; every entry it had confirmed is inside the recovered end;
3. drop that ledger from the list if it is empty, record its end otherwise;
4. create a fresh ledger and CAS the list with it appended. When the CAS fails the list
   changed meanwhile: the previous owner rolled over (it closed the ledger of step 2
   before we fenced it and listed a new one), or a concurrent opener got in first. Read
   the list again and go back to step 2 for its new last ledger, which fences that
   writer too, at most ``limits.metadata_cas_retries_max`` times (then
   ManagedLedgerFenced). The last opener wins and every earlier one is fenced on its
   next add: never two owners;
5. (``ManagedLedger.open``) recover every cursor (see ``cursor.py``), which fences the
   previous owner's cursors.

Example: owner A writes ledger 12 of list [7, 12]. B opens: recovers 12 (A's adds now
fail), creates 15, CAS [7, 12, 15]. A's confirmed entries are all in 12, B's go to 15:
the log reads 7..., 12..., 15... with nothing interleaved.

Every ledger a managed ledger creates carries custom metadata naming its role and its
log (:data:`ROLE_KEY`, :data:`NAME_KEY`, :data:`CURSOR_KEY`), so that stray ones can be
traced; one nothing refers to any more is deleted quietly (:func:`delete_quietly`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from georep import limits
from georep.storage.client.bookkeeper import BookKeeper
from georep.storage.client.ledger_handle import LedgerHandle
from georep.storage.errors import (
    BadVersion,
    InvalidArgument,
    ManagedLedgerFenced,
    NoSuchLedger,
    NoSuchManagedLedger,
    StorageError,
)
from georep.storage.managed_ledger.config import ManagedLedgerConfig
from georep.storage.meta.managed_ledgers import (
    LedgerInfo,
    ManagedLedgerInfo,
    ManagedLedgerRepository,
)

if TYPE_CHECKING:
    from georep.storage.meta.ledger_metadata import LedgerMetadata

log = logging.getLogger(__name__)

Clock = Callable[[], float]

#: Custom metadata on every ledger a managed ledger creates, so that stray ones can be
#: traced to their log.
ROLE_KEY = "georep.role"
NAME_KEY = "georep.managed-ledger"
CURSOR_KEY = "georep.cursor"


async def take_ownership(
    name: str,
    config: ManagedLedgerConfig,
    *,
    bookkeeper: BookKeeper,
    store: ManagedLedgerRepository,
    clock: Clock,
) -> tuple[ManagedLedgerInfo, LedgerHandle]:
    """Steps 1-4 of the module docstring: the row as CAS'd with a fresh ledger ending
    its list, and the writer of that ledger."""
    check_name("managed ledger name", name, limits.managed_ledger_name_chars_max)
    info, writer = await _get_or_create(bookkeeper, store, name, config, clock)
    if writer is not None:
        return info, writer
    for _attempt in range(limits.metadata_cas_retries_max):
        ledgers, dropped = await _end_last_ledger(bookkeeper, info, clock)
        if writer is None or (ledgers and ledgers[-1].ledger_id > writer.ledger_id):
            # ids must grow along the list: a writer older than a ledger the previous
            # owner listed meanwhile is replaced
            if writer is not None:
                await delete_quietly(bookkeeper, [writer.ledger_id])
            writer = await create_ledger(bookkeeper, config, {ROLE_KEY: "log", NAME_KEY: name})
        ledgers.append(LedgerInfo(writer.ledger_id, created_at=clock()))
        try:
            info = await store.update_managed_ledger(info.replace(ledgers=tuple(ledgers)))
            break
        except BadVersion:
            # The list changed since we read it: the previous owner rolled over to a
            # ledger we have not fenced, or another opener got in first. Read it
            # again and fence its new last ledger too (step 4).
            try:
                info = await store.get_managed_ledger(name)
            except NoSuchManagedLedger as error:
                await delete_quietly(bookkeeper, [writer.ledger_id])
                raise ManagedLedgerFenced(f"managed ledger {name}: {error}") from None
        except NoSuchManagedLedger as error:
            await delete_quietly(bookkeeper, [writer.ledger_id])
            raise ManagedLedgerFenced(
                f"managed ledger {name} was deleted while opening ({error})"
            ) from None
    else:
        if writer is not None:
            await delete_quietly(bookkeeper, [writer.ledger_id])
        raise ManagedLedgerFenced(
            f"managed ledger {name}: its list kept changing while opening "
            f"({limits.metadata_cas_retries_max} attempts)"
        )
    await delete_quietly(bookkeeper, dropped)
    return info, writer


def check_name(what: str, name: object, chars_max: int) -> str:
    if not isinstance(name, str) or not 0 < len(name) <= chars_max:
        raise InvalidArgument(f"{what} must be 1..{chars_max} characters, got {name!r}")
    return name


async def _get_or_create(
    bookkeeper: BookKeeper,
    store: ManagedLedgerRepository,
    name: str,
    config: ManagedLedgerConfig,
    clock: Clock,
) -> tuple[ManagedLedgerInfo, LedgerHandle | None]:
    """Step 1: the row, and None; or, for a log that does not exist yet, the row created
    listing a fresh ledger, and that ledger's writer (one write where a create and a CAS
    were two: a topic's first load is a large part of the metadata store's work)."""
    try:
        return await store.get_managed_ledger(name), None
    except NoSuchManagedLedger:
        pass
    writer = await create_ledger(bookkeeper, config, {ROLE_KEY: "log", NAME_KEY: name})
    try:
        first = LedgerInfo(writer.ledger_id, created_at=clock())
        return await store.create_managed_ledger(name, [first]), writer
    except BadVersion:  # created meanwhile by a concurrent opener: open it as it is
        await delete_quietly(bookkeeper, [writer.ledger_id])
        return await store.get_managed_ledger(name), None
    except StorageError:  # the row was not written: nothing refers to the ledger
        await delete_quietly(bookkeeper, [writer.ledger_id])
        raise


async def _end_last_ledger(
    bookkeeper: BookKeeper, info: ManagedLedgerInfo, clock: Clock
) -> tuple[list[LedgerInfo], list[int]]:
    """Steps 2-3 of opening: the list of ``info`` with its last ledger recovered (fenced
    and closed) and its end recorded, or dropped when empty; and the dropped ids."""
    ledgers = list(info.ledgers)
    if not ledgers:
        return ledgers, []
    last = ledgers[-1]
    metadata = await _recover(bookkeeper, last.ledger_id)
    if metadata is None or metadata.last_entry_id < 0:
        return ledgers[:-1], [last.ledger_id]
    ledgers[-1] = LedgerInfo(
        ledger_id=last.ledger_id,
        entries=metadata.last_entry_id + 1,
        size_bytes=metadata.length,
        created_at=last.created_at,
        closed_at=last.closed_at if last.closed_at is not None else clock(),
    )
    return ledgers, []


async def _recover(bookkeeper: BookKeeper, ledger_id: int) -> LedgerMetadata | None:
    """Fence and close ``ledger_id``; None when it no longer exists."""
    try:
        return await bookkeeper.recover_ledger(ledger_id)
    except NoSuchLedger:
        log.error("ledger %d is listed but does not exist; dropping it from the list", ledger_id)
        return None


async def create_ledger(
    bookkeeper: BookKeeper, config: ManagedLedgerConfig, custom: dict[str, str]
) -> LedgerHandle:
    return await bookkeeper.create_ledger(
        ensemble_size=config.ensemble_size,
        write_quorum=config.write_quorum,
        ack_quorum=config.ack_quorum,
        custom=custom,
    )


async def delete_quietly(bookkeeper: BookKeeper, ledger_ids: list[int]) -> None:
    """Delete ledgers nothing refers to any more; a failure only leaks them."""
    for ledger_id in ledger_ids:
        try:
            await bookkeeper.delete_ledger(ledger_id)
        except StorageError as error:
            log.warning("could not delete unreferenced ledger %d: %s", ledger_id, error)
