"""Bookie registrations in the metadata store (BookKeeper's RegistrationManager): a
bookie is alive while its lease has not expired.

A read-only bookie (a full disk, a failed journal: ``bookie/ledger_dirs_monitor.py``)
stays registered, so the auditor does not take its ledgers for lost, and also holds the
lease ``bookie-read-only/<address>`` while it refuses adds, as BookKeeper lists such
bookies under ``readonly``: ensemble placement leaves them out of new ensembles and
replacements. The lease runs out by itself if the bookie dies read-only."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select

from georep.storage.meta.checks import check_duration, check_name
from georep.storage.meta.engine import MetadataEngine, table_of
from georep.storage.meta.leases import LeaseRepository
from georep.storage.meta.models import BookieRow

_bookies = table_of(BookieRow)


@dataclass(frozen=True)
class BookieRegistration:
    address: str
    registered_at: float
    lease_expires_at: float


READ_ONLY_LEASE_PREFIX = "bookie-read-only/"


class BookieRepository:
    """Bookie registrations with leases (BookKeeper's RegistrationManager)."""

    def __init__(self, engine: MetadataEngine, leases: LeaseRepository) -> None:
        self._engine = engine
        self._leases = leases

    # --- bookies --------------------------------------------------------------------
    async def register_bookie(self, address: str, lease_s: float) -> None:
        """Register (or re-register) ``address`` alive until ``clock() + lease_s``."""
        check_name("bookie address", address)
        check_duration(lease_s)
        # The writer thread, as leases do (leases.py: a busy writer starves other threads).
        await self._engine.write(self._upsert_bookie, address, self._engine.clock(), lease_s, True)

    async def renew_bookie(self, address: str, lease_s: float) -> None:
        """Like :meth:`register_bookie`, but keeps the first ``registered_at``."""
        check_name("bookie address", address)
        check_duration(lease_s)
        await self._engine.write(self._upsert_bookie, address, self._engine.clock(), lease_s, False)

    async def unregister_bookie(self, address: str) -> None:
        check_name("bookie address", address)
        await self._engine.call(self._engine.delete_where, _bookies, _bookies.c.address == address)

    async def mark_bookie_read_only(self, address: str, lease_s: float) -> None:
        """Say (or keep saying, for ``lease_s``) that ``address`` takes no adds."""
        await self._leases.acquire_lease(READ_ONLY_LEASE_PREFIX + address, address, lease_s)

    async def clear_bookie_read_only(self, address: str) -> None:
        await self._leases.release_lease(READ_ONLY_LEASE_PREFIX + address, address)

    async def read_only_bookies(self) -> set[str]:
        """Addresses of the bookies saying they take no adds now."""
        holders = await self._leases.live_lease_holders(READ_ONLY_LEASE_PREFIX)
        return {name.removeprefix(READ_ONLY_LEASE_PREFIX) for name in holders}

    async def list_bookies(self, *, alive_only: bool = True) -> list[BookieRegistration]:
        """Registered bookies sorted by address; by default only those whose lease is
        still running."""
        return await self._engine.call(
            self._list_bookies, self._engine.clock() if alive_only else None
        )

    # --- bookies, in a worker thread ------------------------------------------------
    def _upsert_bookie(self, address: str, now: float, lease_s: float, register: bool) -> None:
        insert = self._engine.insert(_bookies).values(
            address=address, registered_at=now, lease_expires_at=now + lease_s, version=1
        )
        changes = {
            "lease_expires_at": insert.excluded.lease_expires_at,
            "version": _bookies.c.version + 1,
        }
        if register:
            changes["registered_at"] = insert.excluded.registered_at
        with self._engine.writing() as connection:
            connection.execute(
                insert.on_conflict_do_update(index_elements=[_bookies.c.address], set_=changes)
            )

    def _list_bookies(self, alive_after: float | None) -> list[BookieRegistration]:
        query = select(_bookies).order_by(_bookies.c.address)
        if alive_after is not None:
            query = query.where(_bookies.c.lease_expires_at > alive_after)
        with self._engine.reading() as connection:
            rows = connection.execute(query).all()
        return [
            BookieRegistration(row.address, row.registered_at, row.lease_expires_at) for row in rows
        ]
