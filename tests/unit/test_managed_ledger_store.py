"""The metadata store's managed-ledger and cursor rows, on SQLite and (with
GEOREP_TEST_POSTGRES_URL) PostgreSQL: create, CAS, delete with cursors, and checks on the
way in."""

from __future__ import annotations

import asyncio

import pytest

from georep.domain.position import Position
from georep.storage.errors import BadVersion, InvalidArgument, NoSuchCursor, NoSuchManagedLedger
from georep.storage.meta.store import LedgerInfo, ManagedLedgerInfo, MetadataStore

NAME = "tenant/ns/persistent/topic-partition-0"


async def test_create_get_update_and_cas(metadata_store: MetadataStore, manual_clock) -> None:
    created = await metadata_store.managed_ledgers.create_managed_ledger(NAME)
    assert created == ManagedLedgerInfo(NAME, (), manual_clock.now, 1)
    assert await metadata_store.managed_ledgers.get_managed_ledger(NAME) == created
    with pytest.raises(BadVersion):
        await metadata_store.managed_ledgers.create_managed_ledger(NAME)

    ledgers = (LedgerInfo(3, 10, 100, 1.0, 2.0), LedgerInfo(7, created_at=2.0))
    updated = await metadata_store.managed_ledgers.update_managed_ledger(
        created.replace(ledgers=ledgers)
    )
    assert updated.version == 2 and updated.ledgers == ledgers
    assert await metadata_store.managed_ledgers.get_managed_ledger(NAME) == updated
    with pytest.raises(BadVersion):  # the stale version loses
        await metadata_store.managed_ledgers.update_managed_ledger(created.replace(ledgers=()))
    assert (await metadata_store.managed_ledgers.get_managed_ledger(NAME)).ledgers == ledgers


async def test_a_row_created_with_its_first_ledger(metadata_store: MetadataStore) -> None:
    """What a topic's first load writes: the row and its first ledger at once."""
    first = (LedgerInfo(9, created_at=5.0),)
    created = await metadata_store.managed_ledgers.create_managed_ledger(NAME, first)
    assert created.ledgers == first and created.version == 1
    assert await metadata_store.managed_ledgers.get_managed_ledger(NAME) == created
    with pytest.raises(InvalidArgument):
        await metadata_store.managed_ledgers.create_managed_ledger(
            NAME + "-bad", (LedgerInfo(5), LedgerInfo(4))
        )
    with pytest.raises(NoSuchManagedLedger):  # a refused list creates nothing
        await metadata_store.managed_ledgers.get_managed_ledger(NAME + "-bad")


async def test_concurrent_cas_one_wins(metadata_store: MetadataStore) -> None:
    info = await metadata_store.managed_ledgers.create_managed_ledger(NAME)
    proposals = [info.replace(ledgers=(LedgerInfo(n),)) for n in range(1, 7)]
    results = await asyncio.gather(
        *(metadata_store.managed_ledgers.update_managed_ledger(p) for p in proposals),
        return_exceptions=True,
    )
    winners = [r for r in results if isinstance(r, ManagedLedgerInfo)]
    assert len(winners) == 1
    assert all(isinstance(r, BadVersion) for r in results if r not in winners)
    assert await metadata_store.managed_ledgers.get_managed_ledger(NAME) == winners[0]


@pytest.mark.parametrize(
    "ledgers",
    [
        (LedgerInfo(3), LedgerInfo(3)),  # ids must increase
        (LedgerInfo(5), LedgerInfo(4)),
        (LedgerInfo(-1),),
        (LedgerInfo(3, entries=-1),),
        (LedgerInfo(3, size_bytes=-1),),
        (LedgerInfo(3, created_at=float("nan")),),
        ((3, 0, 0, 0.0, None),),  # not LedgerInfo
    ],
)
async def test_update_refuses_bad_ledger_lists(metadata_store: MetadataStore, ledgers) -> None:
    info = await metadata_store.managed_ledgers.create_managed_ledger(NAME)
    with pytest.raises(InvalidArgument):
        await metadata_store.managed_ledgers.update_managed_ledger(info.replace(ledgers=ledgers))


@pytest.mark.parametrize("name", ["", "x" * 256, None])
async def test_names_are_checked(metadata_store: MetadataStore, name) -> None:
    with pytest.raises(InvalidArgument):
        await metadata_store.managed_ledgers.create_managed_ledger(name)
    with pytest.raises(InvalidArgument):
        await metadata_store.managed_ledgers.create_managed_cursor(
            "log", name, cursor_ledger_id=None, mark_delete=Position(1, -1)
        )


async def test_missing_managed_ledger(metadata_store: MetadataStore) -> None:
    with pytest.raises(NoSuchManagedLedger):
        await metadata_store.managed_ledgers.get_managed_ledger(NAME)
    with pytest.raises(NoSuchManagedLedger):
        await metadata_store.managed_ledgers.update_managed_ledger(
            ManagedLedgerInfo(NAME, (), 0.0, 1)
        )
    with pytest.raises(NoSuchManagedLedger):
        await metadata_store.managed_ledgers.create_managed_cursor(
            NAME, "sub", cursor_ledger_id=None, mark_delete=Position(1, -1)
        )
    await metadata_store.managed_ledgers.delete_managed_ledger(NAME)  # a no-op


async def test_cursors_create_update_list_delete(metadata_store: MetadataStore) -> None:
    await metadata_store.managed_ledgers.create_managed_ledger(NAME)
    first = await metadata_store.managed_ledgers.create_managed_cursor(
        NAME, "b-sub", cursor_ledger_id=9, mark_delete=Position(3, -1), properties={"k": "v"}
    )
    second = await metadata_store.managed_ledgers.create_managed_cursor(
        NAME, "a-sub", cursor_ledger_id=None, mark_delete=Position(3, 4)
    )
    assert first.version == 1 and first.properties == {"k": "v"}
    with pytest.raises(BadVersion):
        await metadata_store.managed_ledgers.create_managed_cursor(
            NAME, "b-sub", cursor_ledger_id=None, mark_delete=Position(3, -1)
        )
    assert await metadata_store.managed_ledgers.list_managed_cursors(NAME) == [second, first]

    moved = await metadata_store.managed_ledgers.update_managed_cursor(
        first.replace(cursor_ledger_id=11, mark_delete=(3, 7), properties={})
    )
    assert (moved.version, moved.cursor_ledger_id, moved.mark_delete) == (2, 11, (3, 7))
    with pytest.raises(BadVersion):
        await metadata_store.managed_ledgers.update_managed_cursor(
            first.replace(cursor_ledger_id=12)
        )
    assert (await metadata_store.managed_ledgers.list_managed_cursors(NAME))[1] == moved

    await metadata_store.managed_ledgers.delete_managed_cursor(NAME, "a-sub")
    assert [c.name for c in await metadata_store.managed_ledgers.list_managed_cursors(NAME)] == [
        "b-sub"
    ]
    with pytest.raises(NoSuchCursor):
        await metadata_store.managed_ledgers.update_managed_cursor(second)


async def test_deleting_the_managed_ledger_deletes_its_cursors(
    metadata_store: MetadataStore,
) -> None:
    for name in (NAME, "other"):
        await metadata_store.managed_ledgers.create_managed_ledger(name)
        await metadata_store.managed_ledgers.create_managed_cursor(
            name, "sub", cursor_ledger_id=1, mark_delete=Position(1, -1)
        )
    assert await metadata_store.managed_ledgers.list_managed_ledger_names() == sorted(
        [NAME, "other"]
    )
    await metadata_store.managed_ledgers.delete_managed_ledger(NAME)
    assert await metadata_store.managed_ledgers.list_managed_ledger_names() == ["other"]
    assert await metadata_store.managed_ledgers.list_managed_cursors(NAME) == []
    assert len(await metadata_store.managed_ledgers.list_managed_cursors("other")) == 1
    # the name can be used again, from version 1
    assert (await metadata_store.managed_ledgers.create_managed_ledger(NAME)).version == 1


@pytest.mark.parametrize(
    "changes",
    [
        {"mark_delete": (1,)},
        {"mark_delete": (1, -2)},
        {"cursor_ledger_id": -1},
        {"properties": {"k": 1}},
    ],
)
async def test_cursor_rows_are_checked(metadata_store: MetadataStore, changes) -> None:
    await metadata_store.managed_ledgers.create_managed_ledger(NAME)
    cursor = await metadata_store.managed_ledgers.create_managed_cursor(
        NAME, "sub", cursor_ledger_id=None, mark_delete=Position(1, -1)
    )
    with pytest.raises(InvalidArgument):
        await metadata_store.managed_ledgers.update_managed_cursor(cursor.replace(**changes))
