"""The broker catalog (broker/catalog.py): partitioned topics kept in the metadata store,
surviving a reopen, refused as the broker refuses them; and the legacy log of older
clusters imported once, then deleted."""

from __future__ import annotations

import json

import pytest

from georep.broker.catalog import LEGACY_LEDGER_NAME, Catalog, CatalogCorrupt
from georep.broker.cluster import BrokerStore
from georep.broker.errors import NotAllowed, TopicExists, TopicNotFound
from georep.broker.meta.catalog import CatalogRepository
from georep.domain.topic_name import TopicName
from georep.storage.meta.store import MetadataStore

ORDERS = TopicName.parse("persistent://public/default/orders")
OTHER = TopicName.parse("persistent://public/default/other")


class LegacyLog:
    """A managed-ledger factory holding only the legacy catalog log (or nothing)."""

    def __init__(self, records: list[object] | None) -> None:
        self.records = records
        self.deleted = False

    async def list_names(self) -> list[str]:
        return [LEGACY_LEDGER_NAME] if self.records is not None and not self.deleted else []

    async def open(self, name, config=None):
        assert name == LEGACY_LEDGER_NAME
        return self

    async def open_cursor(self, name, *, start="latest"):
        assert start == "earliest"
        return self

    async def read_entries(self, count_max: int):
        records, self.records = self.records, []
        assert records is not None, "read from a legacy log that does not exist"
        return [((1, i), json.dumps(r).encode()) for i, r in enumerate(records)]

    async def close(self) -> None:
        pass

    async def delete(self, name: str) -> None:
        self.deleted = True


@pytest.fixture
async def store(tmp_path):
    opened = await MetadataStore.open(f"sqlite:///{tmp_path / 'meta.db'}")
    yield opened
    await opened.close()


async def test_partitioned_topics_live_in_the_store(store) -> None:
    catalog = await Catalog.open(
        BrokerStore(CatalogRepository(store.engine), store.managed_ledgers), LegacyLog(None)
    )
    await catalog.create_partitioned_topic(ORDERS, 4)
    with pytest.raises(TopicExists):
        await catalog.create_partitioned_topic(ORDERS, 2)
    for bad in (0, True, 10**9):
        with pytest.raises(NotAllowed):
            await catalog.create_partitioned_topic(OTHER, bad)
    with pytest.raises(NotAllowed, match="names a partition"):
        await catalog.create_partitioned_topic(ORDERS.partition(1), 2)
    again = await Catalog.open(
        BrokerStore(CatalogRepository(store.engine), store.managed_ledgers), LegacyLog(None)
    )
    assert again.partitions_of(ORDERS) == 4 and again.partitions_of(OTHER) == 0
    await again.delete_partitioned_topic(ORDERS)
    with pytest.raises(TopicNotFound):
        await again.delete_partitioned_topic(ORDERS)
    assert (
        await Catalog.open(
            BrokerStore(CatalogRepository(store.engine), store.managed_ledgers), LegacyLog(None)
        )
    ).partitioned == {}


async def test_the_legacy_log_is_imported_once_and_deleted(store) -> None:
    await CatalogRepository(store.engine).create_partitioned_topic(
        str(OTHER), 2
    )  # already there: kept
    legacy = LegacyLog(
        [
            {"v": 1, "op": "partitioned.create", "topic": str(ORDERS), "partitions": 2},
            {"v": 1, "op": "partitioned.update", "topic": str(ORDERS), "partitions": 6},
            {"v": 1, "op": "partitioned.create", "topic": str(OTHER), "partitions": 9},
            {"v": 1, "op": "partitioned.create", "topic": "persistent://public/default/gone",
             "partitions": 1},
            {"v": 1, "op": "partitioned.delete", "topic": "persistent://public/default/gone"},
        ]
    )  # fmt: skip
    catalog = await Catalog.open(
        BrokerStore(CatalogRepository(store.engine), store.managed_ledgers), legacy
    )
    assert legacy.deleted
    assert catalog.partitioned == {str(ORDERS): 6, str(OTHER): 2}


@pytest.mark.parametrize(
    "record",
    [
        {"v": 2, "op": "partitioned.create", "topic": "persistent://public/default/t"},
        {"v": 1, "op": "partitioned.update", "topic": "persistent://public/default/t",
         "partitions": 3},
        {"v": 1, "op": "rename", "topic": "persistent://public/default/t"},
        "not an object",
    ],
)  # fmt: skip
async def test_a_corrupt_legacy_log_fails_the_open_and_is_kept(store, record) -> None:
    legacy = LegacyLog([record])
    with pytest.raises(CatalogCorrupt):
        await Catalog.open(
            BrokerStore(CatalogRepository(store.engine), store.managed_ledgers), legacy
        )
    assert not legacy.deleted
    assert await CatalogRepository(store.engine).list_partitioned_topics() == {}
