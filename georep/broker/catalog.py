"""The broker catalog: which topics are partitioned, and into how many partitions.

(Tenants and namespaces are the metadata store's, kept by the admin REST: see
``namespaces.py``.)

Persisted as a log: each change is one JSON record appended to the broker's own managed
ledger ``__georep/catalog`` (not a topic: its name has no ``persistent`` part), and the
catalog is rebuilt on open by reading the log from the start. A cursor ``pulsar.catalog``
that never moves keeps every record from being trimmed. Changes are rare (an operator
creating a topic), so the log stays small; ``limits.catalog_records_max`` bounds it.

Records (``"v": 1`` in each)::

    {"op": "partitioned.create", "topic": "persistent://public/default/t", "partitions": 4}
    {"op": "partitioned.update", "topic": "persistent://public/default/t", "partitions": 8}
    {"op": "partitioned.delete", "topic": "persistent://public/default/t"}

A record that does not parse or does not apply (an update of a topic never created) is
a sign of corruption or of a newer writer: opening fails loudly rather than serve a
catalog that lost entries. The append of a record completes before the change is
visible, so a change the caller saw succeed survives a crash.
"""

from __future__ import annotations

import asyncio
import json
import logging

from georep import limits
from georep.broker.errors import BrokerError, NotAllowed, TopicExists, TopicNotFound
from georep.broker.topic_name import TopicName
from georep.invariant import InvariantViolation

log = logging.getLogger(__name__)

LEDGER_NAME = "__georep/catalog"
CURSOR_NAME = "pulsar.catalog"
_VERSION = 1


class CatalogCorrupt(BrokerError):
    """The catalog log holds a record that cannot be applied."""


class Catalog:
    def __init__(self, ledger) -> None:
        self._ledger = ledger
        #: partitioned topic (full name) -> number of partitions
        self.partitioned: dict[str, int] = {}
        self._records = 0
        self._lock = asyncio.Lock()

    @classmethod
    async def open(cls, factory, config=None) -> Catalog:
        ledger = await factory.open(LEDGER_NAME, config)
        catalog = cls(ledger)
        cursor = await ledger.open_cursor(CURSOR_NAME, start="earliest")
        while True:
            batch = await cursor.read_entries(limits.topic_scan_read_entries_max)
            if not batch:
                break
            for position, data in batch:
                catalog._apply_stored(position, data)
        log.info(
            "catalog: %d partitioned topics from %d records",
            len(catalog.partitioned),
            catalog._records,
        )
        return catalog

    async def close(self) -> None:
        await self._ledger.close()

    # -- queries --

    def partitions_of(self, topic: TopicName) -> int:
        """Partitions of a partitioned topic, 0 for any other topic."""
        return self.partitioned.get(str(topic), 0)

    # -- changes --

    async def create_partitioned_topic(self, topic: TopicName, partitions: int) -> None:
        await self._change(
            {"op": "partitioned.create", "topic": str(topic), "partitions": partitions}
        )

    async def delete_partitioned_topic(self, topic: TopicName) -> None:
        await self._change({"op": "partitioned.delete", "topic": str(topic)})

    async def _change(self, record: dict) -> None:
        async with self._lock:
            self._validate(record)  # raises before anything is written
            if self._records >= limits.catalog_records_max:
                raise NotAllowed(f"the catalog holds {self._records} records, the maximum")
            stored = json.dumps({"v": _VERSION, **record}, sort_keys=True).encode()
            await self._ledger.append(stored)
            self._apply(record)
            self._records += 1

    # -- applying records --

    def _apply_stored(self, position, data: bytes) -> None:
        try:
            record = json.loads(data)
            if not isinstance(record, dict) or record.get("v") != _VERSION:
                raise ValueError(f"unknown record version in {record!r}")
            self._validate(record)
        except (ValueError, KeyError, TypeError, BrokerError) as error:
            raise CatalogCorrupt(f"catalog record at {position}: {error}") from error
        self._apply(record)
        self._records += 1

    def _validate(self, record: dict) -> None:
        """Raise a BrokerError unless ``record`` applies to the catalog as it is now."""
        op = record.get("op")
        if op in ("partitioned.create", "partitioned.update"):
            topic = TopicName.parse(record["topic"])
            partitions = record["partitions"]
            if not isinstance(partitions, int) or not 0 < partitions <= limits.partitions_count_max:
                raise NotAllowed(
                    f"partitions must be 1..{limits.partitions_count_max}, got {partitions!r}"
                )
            if topic.is_partition:
                raise NotAllowed(f"{topic} names a partition, not a partitioned topic")
            current = self.partitioned.get(str(topic))
            if op == "partitioned.create" and current is not None:
                raise TopicExists(f"partitioned topic {topic} exists")
            if op == "partitioned.update":
                if current is None:
                    raise TopicNotFound(f"partitioned topic {topic} does not exist")
                if partitions < current:
                    raise NotAllowed("the number of partitions can only grow")
        elif op == "partitioned.delete":
            if record["topic"] not in self.partitioned:
                raise TopicNotFound(f"partitioned topic {record['topic']} does not exist")
        else:
            raise NotAllowed(f"unknown catalog operation {op!r}")

    def _apply(self, record: dict) -> None:
        op = record["op"]
        if op in ("partitioned.create", "partitioned.update"):
            self.partitioned[record["topic"]] = record["partitions"]
        elif op == "partitioned.delete":
            del self.partitioned[record["topic"]]
        else:
            raise InvariantViolation(f"validated catalog record with unknown op {op!r}")
