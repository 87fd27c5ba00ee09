"""The broker catalog: which topics are partitioned, and into how many partitions.

Kept in the metadata store beside tenants and namespaces (``broker/meta/catalog.py``,
table ``partitioned_topics``), so that all of a cluster's metadata lives in one place and
one transaction model. The broker holds a copy in memory, read at open and changed only
through this class: a change is in the store before it is visible, so a change the
caller saw succeed survives a crash. ``limits.catalog_records_max`` bounds it.

Older clusters kept the catalog as a log of JSON records in the broker's own managed
ledger ``__georep/catalog``. At open, if that log exists, its records are replayed,
each partitioned topic is written to the store (one already there is kept), and the
log is deleted; a crash in between replays it again at the next open, harmlessly.
A record of that log that does not parse or apply fails the open loudly rather than
serve a catalog that lost entries.
"""

from __future__ import annotations

import asyncio
import json
import logging

from georep import limits
from georep.broker.errors import BrokerError, NotAllowed, TopicExists, TopicNotFound
from georep.broker.meta.catalog import CatalogOutcome
from georep.broker.ports import BrokerMetadata, TopicLogFactory
from georep.domain.topic_name import TopicName
from georep.storage.managed_ledger.config import ManagedLedgerConfig

log = logging.getLogger(__name__)

#: The managed ledger older clusters kept the catalog in, and its cursor.
LEGACY_LEDGER_NAME = "__georep/catalog"
LEGACY_CURSOR_NAME = "pulsar.catalog"
_LEGACY_VERSION = 1


class CatalogCorrupt(BrokerError):
    """The legacy catalog log holds a record that cannot be applied."""


class Catalog:
    def __init__(self, store: BrokerMetadata, partitioned: dict[str, int]) -> None:
        self._store = store
        #: partitioned topic (full name) -> number of partitions
        self.partitioned = partitioned
        self._lock = asyncio.Lock()

    @classmethod
    async def open(
        cls,
        store: BrokerMetadata,
        factory: TopicLogFactory,
        config: ManagedLedgerConfig | None = None,
    ) -> Catalog:
        if LEGACY_LEDGER_NAME in await factory.list_names():
            await _import_legacy_log(store, factory, config)
        catalog = cls(store, await store.list_partitioned_topics())
        log.info("catalog: %d partitioned topics", len(catalog.partitioned))
        return catalog

    async def close(self) -> None:
        """Nothing to release: the store belongs to the cluster."""

    # -- queries --

    def partitions_of(self, topic: TopicName) -> int:
        """Partitions of a partitioned topic, 0 for any other topic."""
        return self.partitioned.get(str(topic), 0)

    # -- changes --

    async def create_partitioned_topic(self, topic: TopicName, partitions: int) -> None:
        _check_partitions(topic, partitions)
        async with self._lock:
            outcome = await self._store.create_partitioned_topic(str(topic), partitions)
            if outcome is CatalogOutcome.EXISTS:
                raise TopicExists(f"partitioned topic {topic} exists")
            if outcome is CatalogOutcome.FULL:
                raise NotAllowed(
                    f"the catalog holds {limits.catalog_records_max} partitioned topics,"
                    " the maximum"
                )
            self.partitioned[str(topic)] = partitions

    async def delete_partitioned_topic(self, topic: TopicName) -> None:
        async with self._lock:
            outcome = await self._store.delete_partitioned_topic(str(topic))
            self.partitioned.pop(str(topic), None)
            if outcome is CatalogOutcome.MISSING:
                raise TopicNotFound(f"partitioned topic {topic} does not exist")


def _check_partitions(topic: TopicName, partitions: object) -> int:
    if (
        not isinstance(partitions, int)
        or isinstance(partitions, bool)
        or not 0 < partitions <= limits.partitions_count_max
    ):
        raise NotAllowed(f"partitions must be 1..{limits.partitions_count_max}, got {partitions!r}")
    if topic.is_partition:
        raise NotAllowed(f"{topic} names a partition, not a partitioned topic")
    return partitions


async def _import_legacy_log(
    store: BrokerMetadata, factory: TopicLogFactory, config: ManagedLedgerConfig | None
) -> None:
    """Replay the legacy log, write what it holds to the store, delete the log."""
    ledger = await factory.open(LEGACY_LEDGER_NAME, config)
    partitioned: dict[str, int] = {}
    try:
        cursor = await ledger.open_cursor(LEGACY_CURSOR_NAME, start="earliest")
        while True:
            batch = await cursor.read_entries(limits.topic_scan_read_entries_max)
            if not batch:
                break
            for position, data in batch:
                try:
                    _replay(partitioned, json.loads(data))
                except (ValueError, KeyError, TypeError, BrokerError) as error:
                    raise CatalogCorrupt(f"catalog record at {position}: {error}") from error
    finally:
        await ledger.close()
    for name, partitions in sorted(partitioned.items()):
        outcome = await store.create_partitioned_topic(name, partitions)
        if outcome is CatalogOutcome.FULL:
            raise CatalogCorrupt(f"the legacy catalog holds more than {limits.catalog_records_max}")
    await factory.delete(LEGACY_LEDGER_NAME)
    log.info("catalog: %d partitioned topics imported from the legacy log", len(partitioned))


def _replay(partitioned: dict[str, int], record: object) -> None:
    """Apply one legacy record (``{"v": 1, "op": ..., "topic": ..., "partitions": ...}``)."""
    if not isinstance(record, dict) or record.get("v") != _LEGACY_VERSION:
        raise ValueError(f"unknown record version in {record!r}")
    op = record.get("op")
    topic = TopicName.parse(record["topic"])
    name = str(topic)
    if op in ("partitioned.create", "partitioned.update"):
        partitions = _check_partitions(topic, record["partitions"])
        current = partitioned.get(name)
        if op == "partitioned.create" and current is not None:
            raise TopicExists(f"partitioned topic {topic} exists")
        if op == "partitioned.update" and (current is None or partitions < current):
            raise NotAllowed(f"update of {topic} to {partitions} partitions from {current}")
        partitioned[name] = partitions
    elif op == "partitioned.delete":
        if partitioned.pop(name, None) is None:
            raise TopicNotFound(f"partitioned topic {topic} does not exist")
    else:
        raise NotAllowed(f"unknown catalog operation {op!r}")
