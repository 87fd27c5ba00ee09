"""Managed ledgers and cursors in the metadata store, for ``storage/managed_ledger``:
a managed ledger's list of ledgers and each cursor's persisted state, CAS'd on their
versions."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.engine import Connection, Row
from sqlalchemy.exc import IntegrityError

from georep import limits
from georep.domain.position import Position
from georep.invariant import invariant
from georep.storage.errors import (
    BadVersion,
    InvalidArgument,
    NoSuchCursor,
    NoSuchManagedLedger,
)
from georep.storage.meta.checks import check_custom, check_int
from georep.storage.meta.engine import MetadataEngine, table_of
from georep.storage.meta.models import (
    ManagedCursorRow,
    ManagedLedgerRow,
    managed_name_chars_max,
)

_managed_ledgers = table_of(ManagedLedgerRow)
_managed_cursors = table_of(ManagedCursorRow)


@dataclass(frozen=True)
class LedgerInfo:
    """One ledger of a managed ledger's list. The current (last) ledger reads 0 entries
    and bytes, and ``closed_at`` None, until it is closed."""

    ledger_id: int
    entries: int = 0
    size_bytes: int = 0
    created_at: float = 0.0
    closed_at: float | None = None


@dataclass(frozen=True)
class ManagedLedgerInfo:
    """A managed ledger's row: its ledgers in id order, and the CAS ``version``."""

    name: str
    ledgers: tuple[LedgerInfo, ...]
    created_at: float
    version: int

    def replace(self, **changes: Any) -> ManagedLedgerInfo:
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class ManagedCursorInfo:
    """A cursor's row: the ledger holding its persisted states, and the mark-delete
    position ``(ledger id, entry id)`` and properties as of when that ledger started."""

    managed_ledger: str
    name: str
    cursor_ledger_id: int | None
    mark_delete: Position
    properties: Mapping[str, str]
    created_at: float
    version: int

    def replace(self, **changes: Any) -> ManagedCursorInfo:
        return dataclasses.replace(self, **changes)


class ManagedLedgerRepository:
    """Managed ledgers (their ledger lists) and their cursors, for
    ``storage/managed_ledger``."""

    def __init__(self, engine: MetadataEngine) -> None:
        self._engine = engine

    # --- managed ledgers and cursors (appended with storage/managed_ledger) ----------
    async def create_managed_ledger(
        self, name: str, ledgers: Sequence[LedgerInfo] = ()
    ) -> ManagedLedgerInfo:
        """A new managed ledger listing ``ledgers`` (none by default), at version 1;
        BadVersion when ``name`` exists already."""
        _check_managed_name("managed ledger name", name)
        stored = _check_ledger_infos(ledgers)
        return await self._engine.write(
            self._create_managed_ledger, name, tuple(ledgers), stored, self._engine.clock()
        )

    async def get_managed_ledger(self, name: str) -> ManagedLedgerInfo:
        """NoSuchManagedLedger when absent."""
        _check_managed_name("managed ledger name", name)
        return await self._engine.call(self._get_managed_ledger, name)

    async def update_managed_ledger(self, info: ManagedLedgerInfo) -> ManagedLedgerInfo:
        """CAS: store ``info.ledgers`` if the stored version is ``info.version``; returns
        the info at version + 1. BadVersion when stale, NoSuchManagedLedger when deleted."""
        if not isinstance(info, ManagedLedgerInfo):
            raise InvalidArgument(f"not ManagedLedgerInfo: {info!r}")
        _check_managed_name("managed ledger name", info.name)
        ledgers = _check_ledger_infos(info.ledgers)
        return await self._engine.write(self._update_managed_ledger, info, ledgers)

    async def delete_managed_ledger(self, name: str) -> None:
        """Delete the managed ledger's row and its cursors' rows (not their ledgers); a
        no-op when absent."""
        _check_managed_name("managed ledger name", name)
        await self._engine.call(self._delete_managed_ledger, name)

    async def list_managed_ledger_names(self) -> list[str]:
        """Sorted."""
        return await self._engine.call(self._list_managed_ledger_names)

    async def create_managed_cursor(
        self,
        managed_ledger: str,
        name: str,
        *,
        cursor_ledger_id: int | None,
        mark_delete: Position,
        properties: Mapping[str, str] | None = None,
    ) -> ManagedCursorInfo:
        """A new cursor row at version 1. BadVersion when the cursor exists,
        NoSuchManagedLedger when the managed ledger does not."""
        info = ManagedCursorInfo(
            managed_ledger=managed_ledger,
            name=name,
            cursor_ledger_id=cursor_ledger_id,
            mark_delete=mark_delete,
            properties=properties or {},
            created_at=self._engine.clock(),
            version=1,
        )
        info = _check_cursor_info(info)
        return await self._engine.write(self._create_managed_cursor, info)

    async def list_managed_cursors(self, managed_ledger: str) -> list[ManagedCursorInfo]:
        """The managed ledger's cursors sorted by name (none for an unknown one)."""
        _check_managed_name("managed ledger name", managed_ledger)
        return await self._engine.call(self._list_managed_cursors, managed_ledger)

    async def update_managed_cursor(self, info: ManagedCursorInfo) -> ManagedCursorInfo:
        """CAS: store the cursor ledger id, mark-delete position and properties if the
        stored version is ``info.version``; returns the info at version + 1. BadVersion
        when stale, NoSuchCursor when deleted."""
        if not isinstance(info, ManagedCursorInfo):
            raise InvalidArgument(f"not ManagedCursorInfo: {info!r}")
        return await self._engine.write(self._update_managed_cursor, _check_cursor_info(info))

    async def delete_managed_cursor(self, managed_ledger: str, name: str) -> None:
        """A no-op when absent."""
        _check_managed_name("managed ledger name", managed_ledger)
        _check_managed_name("cursor name", name)
        cursors = _managed_cursors.c
        await self._engine.call(
            self._engine.delete_where,
            _managed_cursors,
            (cursors.managed_ledger == managed_ledger) & (cursors.name == name),
        )

    # --- managed ledgers and cursors, in a worker thread ------------------------------
    def _create_managed_ledger(
        self, name: str, ledgers: tuple[LedgerInfo, ...], stored: list[Any], now: float
    ) -> ManagedLedgerInfo:
        # The insert alone (its key refuses a second row): thousands of topics are created
        # at once, and each statement holds the writer thread and the interpreter.
        try:
            with self._engine.writing() as connection:
                connection.execute(
                    _managed_ledgers.insert().values(
                        name=name, ledgers=stored, created_at=now, version=1
                    )
                )
        except IntegrityError as error:  # exists, or a concurrent create committed
            raise BadVersion(f"managed ledger {name!r} exists already") from error
        return ManagedLedgerInfo(name=name, ledgers=ledgers, created_at=now, version=1)

    def _get_managed_ledger(self, name: str) -> ManagedLedgerInfo:
        with self._engine.reading() as connection:
            row = _select_managed_ledger(connection, name)
        if row is None:
            raise NoSuchManagedLedger(f"managed ledger {name!r} does not exist")
        return _managed_ledger_from_row(row)

    def _update_managed_ledger(
        self, info: ManagedLedgerInfo, ledgers: list[Any]
    ) -> ManagedLedgerInfo:
        expected = info.version
        with self._engine.writing() as connection:
            row = _select_managed_ledger(connection, info.name)
            if row is None:
                raise NoSuchManagedLedger(f"managed ledger {info.name!r} does not exist")
            if row.version != expected:
                raise BadVersion(
                    f"managed ledger {info.name!r}: version {expected} is stale,"
                    f" stored is {row.version}"
                )
            table = _managed_ledgers.c
            result = connection.execute(
                update(_managed_ledgers)
                .where(table.name == info.name, table.version == expected)
                .values(ledgers=ledgers, version=expected + 1)
            )
            if result.rowcount != 1:
                raise BadVersion(f"managed ledger {info.name!r}: version {expected} is stale")
        return info.replace(version=expected + 1, created_at=row.created_at)

    def _delete_managed_ledger(self, name: str) -> None:
        with self._engine.writing() as connection:
            connection.execute(
                delete(_managed_cursors).where(_managed_cursors.c.managed_ledger == name)
            )
            connection.execute(delete(_managed_ledgers).where(_managed_ledgers.c.name == name))

    def _list_managed_ledger_names(self) -> list[str]:
        table = _managed_ledgers.c
        with self._engine.reading() as connection:
            return list(connection.execute(select(table.name).order_by(table.name)).scalars())

    def _create_managed_cursor(self, info: ManagedCursorInfo) -> ManagedCursorInfo:
        # The insert first, as for a managed ledger; what it ran into is looked up only
        # when it was refused (the row exists, or its managed ledger does not).
        try:
            with self._engine.writing() as connection:
                connection.execute(
                    _managed_cursors.insert().values(
                        managed_ledger=info.managed_ledger,
                        name=info.name,
                        cursor_ledger_id=info.cursor_ledger_id,
                        mark_delete_ledger_id=info.mark_delete[0],
                        mark_delete_entry_id=info.mark_delete[1],
                        properties=dict(info.properties),
                        created_at=info.created_at,
                        version=1,
                    )
                )
        except IntegrityError as error:
            with self._engine.reading() as connection:
                missing = _select_managed_ledger(connection, info.managed_ledger) is None
            if missing:
                raise NoSuchManagedLedger(
                    f"managed ledger {info.managed_ledger!r} does not exist"
                ) from None
            raise BadVersion(
                f"cursor {info.name!r} of {info.managed_ledger!r} exists already"
                " (or was created concurrently)"
            ) from error
        return info

    def _list_managed_cursors(self, managed_ledger: str) -> list[ManagedCursorInfo]:
        cursors = _managed_cursors.c
        query = (
            select(_managed_cursors)
            .where(cursors.managed_ledger == managed_ledger)
            .order_by(cursors.name)
        )
        with self._engine.reading() as connection:
            return [_managed_cursor_from_row(row) for row in connection.execute(query)]

    def _update_managed_cursor(self, info: ManagedCursorInfo) -> ManagedCursorInfo:
        expected = info.version
        cursors = _managed_cursors.c
        with self._engine.writing() as connection:
            row = _select_managed_cursor(connection, info.managed_ledger, info.name)
            if row is None:
                raise NoSuchCursor(
                    f"cursor {info.name!r} of {info.managed_ledger!r} does not exist"
                )
            if row.version != expected:
                raise BadVersion(
                    f"cursor {info.name!r} of {info.managed_ledger!r}: version {expected}"
                    f" is stale, stored is {row.version}"
                )
            result = connection.execute(
                update(_managed_cursors)
                .where(
                    cursors.managed_ledger == info.managed_ledger,
                    cursors.name == info.name,
                    cursors.version == expected,
                )
                .values(
                    cursor_ledger_id=info.cursor_ledger_id,
                    mark_delete_ledger_id=info.mark_delete[0],
                    mark_delete_entry_id=info.mark_delete[1],
                    properties=dict(info.properties),
                    version=expected + 1,
                )
            )
            if result.rowcount != 1:
                raise BadVersion(f"cursor {info.name!r}: version {expected} is stale")
        return info.replace(version=expected + 1, created_at=row.created_at)


# --- managed ledgers and cursors: rows and checks -------------------------------------
invariant(
    limits.managed_ledger_name_chars_max <= managed_name_chars_max
    and limits.cursor_name_chars_max <= managed_name_chars_max,
    "managed ledger and cursor names must fit their columns",
)


def _select_managed_ledger(connection: Connection, name: str) -> Row[Any] | None:
    query = select(_managed_ledgers).where(_managed_ledgers.c.name == name)
    return connection.execute(query).one_or_none()


def _select_managed_cursor(
    connection: Connection, managed_ledger: str, name: str
) -> Row[Any] | None:
    cursors = _managed_cursors.c
    query = select(_managed_cursors).where(
        cursors.managed_ledger == managed_ledger, cursors.name == name
    )
    return connection.execute(query).one_or_none()


def _managed_ledger_from_row(row: Row[Any]) -> ManagedLedgerInfo:
    """The stored row, checked on the way out like on the way in."""
    ledgers = tuple(
        LedgerInfo(int(ledger_id), int(entries), int(size), float(created), closed)
        for ledger_id, entries, size, created, closed in row.ledgers
    )
    _check_ledger_infos(ledgers)
    return ManagedLedgerInfo(
        name=row.name, ledgers=ledgers, created_at=row.created_at, version=row.version
    )


def _managed_cursor_from_row(row: Row[Any]) -> ManagedCursorInfo:
    return _check_cursor_info(
        ManagedCursorInfo(
            managed_ledger=row.managed_ledger,
            name=row.name,
            cursor_ledger_id=row.cursor_ledger_id,
            mark_delete=Position(row.mark_delete_ledger_id, row.mark_delete_entry_id),
            properties=dict(row.properties),
            created_at=row.created_at,
            version=row.version,
        )
    )


def _check_managed_name(what: str, value: object) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= managed_name_chars_max:
        raise InvalidArgument(
            f"{what} must be 1..{managed_name_chars_max} characters, got {value!r}"
        )
    return value


def _check_time(what: str, value: object) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        raise InvalidArgument(f"{what} must be finite seconds, got {value!r}")
    return float(value)


def _check_ledger_infos(ledgers: Sequence[LedgerInfo]) -> list[Any]:
    """The ledgers as stored JSON; InvalidArgument unless ids strictly increase and every
    count is >= 0."""
    stored: list[Any] = []
    previous = -1
    for info in ledgers:
        if not isinstance(info, LedgerInfo):
            raise InvalidArgument(f"not LedgerInfo: {info!r}")
        check_int("ledger id", info.ledger_id, 0)
        if info.ledger_id <= previous:
            raise InvalidArgument(f"ledger ids must increase: {info.ledger_id} after {previous}")
        previous = info.ledger_id
        check_int("entries", info.entries, 0)
        check_int("size bytes", info.size_bytes, 0)
        created = _check_time("created_at", info.created_at)
        closed = None if info.closed_at is None else _check_time("closed_at", info.closed_at)
        stored.append([info.ledger_id, info.entries, info.size_bytes, created, closed])
    return stored


def _check_cursor_info(info: ManagedCursorInfo) -> ManagedCursorInfo:
    _check_managed_name("managed ledger name", info.managed_ledger)
    _check_managed_name("cursor name", info.name)
    if info.cursor_ledger_id is not None:
        check_int("cursor ledger id", info.cursor_ledger_id, 0)
    if not isinstance(info.mark_delete, tuple) or len(info.mark_delete) != 2:
        raise InvalidArgument(f"mark-delete position must be (ledger, entry): {info.mark_delete!r}")
    for value in info.mark_delete:
        check_int("mark-delete id", value, -1)
    check_custom(info.properties)
    return info
