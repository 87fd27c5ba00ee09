"""Named leases in the metadata store: one holder at a time, alive until it expires."""

from __future__ import annotations

from sqlalchemy import case, or_, select

from georep.storage.meta.checks import check_duration, check_name
from georep.storage.meta.engine import MetadataEngine, table_of
from georep.storage.meta.models import LeaseRow

_leases = table_of(LeaseRow)


class LeaseRepository:
    """Named leases (the auditor's leadership): acquire, renew, release, read."""

    def __init__(self, engine: MetadataEngine) -> None:
        self._engine = engine

    # --- leases ---------------------------------------------------------------------
    async def acquire_lease(self, name: str, holder: str, lease_s: float) -> bool:
        """Take or renew lease ``name`` for ``holder`` until ``clock() + lease_s``.

        True when the lease was free, expired, or already ``holder``'s; False when another
        holder's lease is running.
        """
        check_name("lease name", name)
        check_name("lease holder", holder)
        check_duration(lease_s)
        # Through the writer thread with the hot writes, not beside it: on SQLite a write
        # from another thread waits for the write lock in SQLite's busy handler, which a
        # writer committing group after group can starve for longer than a lease.
        return await self._engine.write(
            self._acquire_lease, name, holder, lease_s, self._engine.clock()
        )

    async def release_lease(self, name: str, holder: str) -> None:
        """Give the lease up if ``holder`` holds it; a no-op otherwise."""
        check_name("lease name", name)
        check_name("lease holder", holder)
        await self._engine.write(
            self._engine.delete_where,
            _leases,
            (_leases.c.name == name) & (_leases.c.holder == holder),
        )

    async def lease_holder(self, name: str) -> str | None:
        """Who holds lease ``name``; None when it is free or expired."""
        check_name("lease name", name)
        return await self._engine.call(self._lease_holder, name, self._engine.clock())

    async def live_lease_holders(self, prefix: str) -> dict[str, str]:
        """Every running lease whose name starts with ``prefix``: name -> holder."""
        check_name("lease name prefix", prefix)
        return await self._engine.call(self._live_lease_holders, prefix, self._engine.clock())

    # --- leases, in a worker thread -------------------------------------------------
    def _acquire_lease(self, name: str, holder: str, lease_s: float, now: float) -> bool:
        """One upsert: insert, or take over when held by ``holder`` or expired."""
        leases = _leases.c
        insert = self._engine.insert(_leases).values(
            name=name, holder=holder, acquired_at=now, expires_at=now + lease_s, version=1
        )
        proposed = insert.excluded
        statement = insert.on_conflict_do_update(
            index_elements=[leases.name],
            set_={
                "holder": proposed.holder,
                "expires_at": proposed.expires_at,
                "acquired_at": case(
                    (leases.holder == proposed.holder, leases.acquired_at),
                    else_=proposed.acquired_at,
                ),
                "version": leases.version + 1,
            },
            where=or_(leases.holder == proposed.holder, leases.expires_at <= now),
        ).returning(leases.holder)
        with self._engine.writing() as connection:
            return connection.execute(statement).one_or_none() is not None

    def _lease_holder(self, name: str, now: float) -> str | None:
        query = select(_leases.c.holder).where(_leases.c.name == name, _leases.c.expires_at > now)
        with self._engine.reading() as connection:
            return connection.execute(query).scalar_one_or_none()

    def _live_lease_holders(self, prefix: str, now: float) -> dict[str, str]:
        escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        query = select(_leases.c.name, _leases.c.holder).where(
            _leases.c.name.like(f"{escaped}%", escape="\\"), _leases.c.expires_at > now
        )
        with self._engine.reading() as connection:
            return {row.name: row.holder for row in connection.execute(query)}
