"""Ledger metadata in the metadata store (BookKeeper's LedgerManager): one row per
ledger, every change a compare-and-set on its version held by the caller."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.engine import Connection, Row

from georep import limits
from georep.storage.errors import (
    BadVersion,
    InvalidArgument,
    NoSuchLedger,
)
from georep.storage.meta.checks import check_custom, check_int, check_name
from georep.storage.meta.engine import MetadataEngine, table_of
from georep.storage.meta.ledger_metadata import LedgerMetadata, LedgerState
from georep.storage.meta.models import LedgerRow

_ledgers = table_of(LedgerRow)


class LedgerRepository:
    """Ledger metadata: create, read, CAS update, delete, list (BookKeeper's
    LedgerManager)."""

    def __init__(self, engine: MetadataEngine) -> None:
        self._engine = engine

    # --- ledgers --------------------------------------------------------------------
    async def create_ledger(
        self,
        *,
        ensemble_size: int,
        write_quorum: int,
        ack_quorum: int,
        ensemble: Sequence[str],
        custom: Mapping[str, str] | None = None,
    ) -> LedgerMetadata:
        """A new OPEN ledger with one segment ``(0, ensemble)``, at version 1."""
        for name, value in (("E", ensemble_size), ("Qw", write_quorum), ("Qa", ack_quorum)):
            check_int(name, value, 1)
        if not ensemble_size >= write_quorum >= ack_quorum:
            raise InvalidArgument(
                f"need E >= Qw >= Qa >= 1, got {ensemble_size}/{write_quorum}/{ack_quorum}"
            )
        if ensemble_size > limits.ensemble_size_max:
            raise InvalidArgument(
                f"ensemble size {ensemble_size} > {limits.ensemble_size_max} (the maximum)"
            )
        bookies = _check_ensemble(ensemble, ensemble_size)
        custom_dict = check_custom(custom or {})
        now = self._engine.clock()
        return await self._engine.write(
            self._create_ledger, now, ensemble_size, write_quorum, ack_quorum, bookies, custom_dict
        )

    async def get_ledger(self, ledger_id: int) -> LedgerMetadata:
        check_int("ledger id", ledger_id, 0)
        return await self._engine.call(self._get_ledger, ledger_id)

    async def update_ledger(self, metadata: LedgerMetadata) -> LedgerMetadata:
        """CAS: store ``metadata`` if the stored version is ``metadata.version``.

        Stores state, last entry id, length, ensembles and custom; returns the metadata at
        version + 1. The quorums and creation time never change, and a CLOSED ledger stays
        CLOSED with the same end (readers rely on it): asking otherwise is InvalidArgument.
        """
        if not isinstance(metadata, LedgerMetadata):
            raise InvalidArgument(f"not LedgerMetadata: {metadata!r}")
        check_int("ledger id", metadata.ledger_id, 0)
        check_int("last entry id", metadata.last_entry_id, -1)
        check_int("length", metadata.length, 0)
        for _, bookies in metadata.ensembles:
            _check_ensemble(bookies, metadata.ensemble_size)
        check_custom(metadata.custom)
        return await self._engine.write(self._update_ledger, metadata)

    async def delete_ledger(self, ledger_id: int) -> None:
        """Delete the ledger and its under-replication marker; a no-op when absent."""
        check_int("ledger id", ledger_id, 0)
        await self._engine.call(self._delete_ledger, ledger_id)

    async def list_ledger_ids(self) -> list[int]:
        return await self._engine.call(self._list_ledger_ids)

    # --- ledgers, in a worker thread ------------------------------------------------
    def _create_ledger(
        self,
        now: float,
        ensemble_size: int,
        write_quorum: int,
        ack_quorum: int,
        ensemble: tuple[str, ...],
        custom: dict[str, str],
    ) -> LedgerMetadata:
        values = {
            "ensemble_size": ensemble_size,
            "write_quorum": write_quorum,
            "ack_quorum": ack_quorum,
            "state": LedgerState.OPEN.value,
            "last_entry_id": -1,
            "length": 0,
            "ensembles": [[0, list(ensemble)]],
            "custom": custom,
            "created_at": now,
            "version": 1,
        }
        with self._engine.writing() as connection:
            statement = _ledgers.insert().values(values).returning(_ledgers.c.ledger_id)
            ledger_id = connection.execute(statement).scalar_one()
        return LedgerMetadata(
            ledger_id=ledger_id,
            ensemble_size=ensemble_size,
            write_quorum=write_quorum,
            ack_quorum=ack_quorum,
            ensembles=((0, ensemble),),
            custom=custom,
            version=1,
            created_at=now,
        )

    def _get_ledger(self, ledger_id: int) -> LedgerMetadata:
        with self._engine.reading() as connection:
            row = select_ledger(connection, ledger_id)
        return _ledger_from_row(row)

    def _update_ledger(self, metadata: LedgerMetadata) -> LedgerMetadata:
        ledger_id, expected = metadata.ledger_id, metadata.version
        with self._engine.writing() as connection:
            row = select_ledger(connection, ledger_id)
            if row.version != expected:
                raise BadVersion(
                    f"ledger {ledger_id}: version {expected} is stale, stored is {row.version}"
                )
            quorums = (metadata.ensemble_size, metadata.write_quorum, metadata.ack_quorum)
            if quorums != (row.ensemble_size, row.write_quorum, row.ack_quorum):
                raise InvalidArgument(
                    f"ledger {ledger_id}: E/Qw/Qa are {row.ensemble_size}/{row.write_quorum}"
                    f"/{row.ack_quorum} and cannot change"
                )
            if row.state == LedgerState.CLOSED.value and (
                metadata.state != LedgerState.CLOSED
                or (metadata.last_entry_id, metadata.length) != (row.last_entry_id, row.length)
            ):
                raise InvalidArgument(
                    f"ledger {ledger_id} is CLOSED at entry {row.last_entry_id}: its state"
                    " and end cannot change"
                )
            result = connection.execute(
                update(_ledgers)
                .where(_ledgers.c.ledger_id == ledger_id, _ledgers.c.version == expected)
                .values(
                    state=LedgerState(metadata.state).value,
                    last_entry_id=metadata.last_entry_id,
                    length=metadata.length,
                    ensembles=[[first, list(bookies)] for first, bookies in metadata.ensembles],
                    custom=dict(metadata.custom),
                    version=expected + 1,
                )
            )
            if result.rowcount != 1:  # PostgreSQL: a concurrent CAS committed first
                raise BadVersion(f"ledger {ledger_id}: version {expected} is stale")
        return metadata.replace(version=expected + 1, created_at=row.created_at)

    def _delete_ledger(self, ledger_id: int) -> None:
        with self._engine.writing() as connection:
            connection.execute(delete(_ledgers).where(_ledgers.c.ledger_id == ledger_id))

    def _list_ledger_ids(self) -> list[int]:
        with self._engine.reading() as connection:
            ids = connection.execute(select(_ledgers.c.ledger_id).order_by(_ledgers.c.ledger_id))
            return list(ids.scalars())


def select_ledger(connection: Connection, ledger_id: int) -> Row[Any]:
    """The ledger's row, read in ``connection``'s transaction; NoSuchLedger when absent."""
    query = select(_ledgers).where(_ledgers.c.ledger_id == ledger_id)
    row = connection.execute(query).one_or_none()
    if row is None:
        raise NoSuchLedger(f"ledger {ledger_id} does not exist")
    return row


def _ledger_from_row(row: Row[Any]) -> LedgerMetadata:
    """The stored row as LedgerMetadata, whose constructor checks it on the way out."""
    return LedgerMetadata(
        ledger_id=row.ledger_id,
        ensemble_size=row.ensemble_size,
        write_quorum=row.write_quorum,
        ack_quorum=row.ack_quorum,
        ensembles=tuple((int(first), tuple(bookies)) for first, bookies in row.ensembles),
        state=LedgerState(row.state),
        last_entry_id=row.last_entry_id,
        length=row.length,
        custom=dict(row.custom),
        version=row.version,
        created_at=row.created_at,
    )


def _check_ensemble(ensemble: Sequence[str], ensemble_size: int) -> tuple[str, ...]:
    if isinstance(ensemble, str):
        raise InvalidArgument(f"an ensemble is a sequence of bookies, got {ensemble!r}")
    bookies = tuple(check_name("bookie address", bookie) for bookie in ensemble)
    if len(bookies) != ensemble_size or len(set(bookies)) != len(bookies):
        raise InvalidArgument(f"ensemble {bookies} is not {ensemble_size} distinct bookies")
    return bookies
