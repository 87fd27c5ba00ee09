"""The broker's seams to storage, as narrow Protocols: exactly what the broker asks of a
topic's log, of a subscription's cursor, of the factory that opens logs, and of the
metadata store. ``storage/managed_ledger`` implements the first three
(``ManagedLedger``, ``ManagedCursor``, ``ManagedLedgerFactory``), ``storage/meta`` the
last; a test may hand the broker anything that has these members, and a change to
storage that breaks one shows here first.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Protocol

from georep.broker.meta.catalog import CatalogOutcome, NamespaceRecord
from georep.domain.position import Position
from georep.storage.managed_ledger.config import ManagedLedgerConfig
from georep.storage.managed_ledger.range_set import RangeSet
from georep.storage.meta.managed_ledgers import ManagedLedgerInfo


class SubscriptionCursor(Protocol):
    """A subscription's acknowledgement state, its one owner (``Subscription(cursor)``).
    A change (``mark_delete`` ... ``set_properties``) is in effect when the call returns
    and hands back what to await for its durability; ``flush`` waits for every change
    made so far."""

    name: str
    read_position: Position

    @property
    def mark_delete_position(self) -> Position: ...

    @property
    def individually_deleted(self) -> RangeSet: ...

    @property
    def batches(self) -> list[tuple[Position, int]]: ...

    @property
    def backlog(self) -> int: ...

    @property
    def properties(self) -> Mapping[str, str]: ...

    def is_acknowledged(self, position: Position) -> bool: ...

    def batch_bits(self, position: Position) -> int | None: ...

    def rewind(self) -> None: ...

    async def read_entries(self, count_max: int) -> list[tuple[Position, bytes]]: ...

    def mark_delete(
        self, position: Position, *, properties: Mapping[str, str] | None = None
    ) -> Awaitable[None]: ...

    def delete(self, positions: Iterable[Position]) -> Awaitable[None]: ...

    def delete_ranges(self, ranges: Iterable[tuple[Position, Position]]) -> Awaitable[None]: ...

    def delete_batch_members(self, acks: Mapping[Position, int]) -> Awaitable[None]: ...

    def reset(self, position: Position) -> Awaitable[None]: ...

    def set_properties(self, properties: Mapping[str, str]) -> Awaitable[None]: ...

    async def flush(self) -> None: ...


class TopicLog(Protocol):
    """A topic's log (``PersistentTopic(ledger)``): appends, reads, positions, cursors."""

    name: str
    config: ManagedLedgerConfig

    @property
    def cursors(self) -> Mapping[str, SubscriptionCursor]: ...

    #: Told the name of each cursor whose state changes (``ManagedLedger``).
    cursor_listener: Callable[[str], None] | None

    @property
    def first_position(self) -> Position | None: ...

    @property
    def last_confirmed(self) -> Position | None: ...

    @property
    def tail_position(self) -> Position: ...

    async def append_async(self, data: bytes) -> asyncio.Future[Position]: ...

    async def read(self, start: Position, count_max: int) -> list[tuple[Position, bytes]]: ...

    async def read_entry(self, position: Position) -> bytes: ...

    def is_entry(self, position: Position) -> bool: ...

    def next_position(self, position: Position) -> Position: ...

    def position_at_or_after(self, position: Position) -> Position: ...

    def entry_at_or_before(self, position: Position) -> Position | None: ...

    def entries_in(self, low: Position, high: Position) -> int: ...

    def entries_between(self, after: Position, before: Position) -> int: ...

    async def open_cursor(
        self, name: str, *, start: Any = "latest", durable: bool = True
    ) -> SubscriptionCursor: ...

    async def delete_cursor(self, name: str) -> None: ...

    async def trim(self) -> list[int]: ...

    def stats(self) -> dict[str, Any]: ...

    async def close(self) -> None: ...


class TopicLogFactory(Protocol):
    """Opens and deletes topics' logs by managed-ledger name (``BrokerService(factory)``)."""

    async def open(self, name: str, config: ManagedLedgerConfig | None = None) -> TopicLog: ...

    async def delete(self, name: str) -> None: ...

    async def list_names(self) -> list[str]: ...

    async def close(self) -> None: ...


class NamespaceCatalog(Protocol):
    """The tenants and namespaces the broker serves (``Namespaces(store)``)."""

    async def get_namespace(self, tenant: str, name: str) -> NamespaceRecord | None: ...

    async def create_tenant(
        self, name: str, *, admin_roles: Iterable[str] = (), allowed_clusters: Iterable[str] = ()
    ) -> CatalogOutcome: ...

    async def create_namespace(
        self,
        tenant: str,
        name: str,
        *,
        retention: tuple[int, int] | None = None,
        message_ttl_s: int | None = None,
    ) -> CatalogOutcome: ...


class BrokerMetadata(NamespaceCatalog, Protocol):
    """What the broker asks of the metadata store itself (``BrokerService(store)``): its
    namespaces, a topic's row, for its internal stats, and the partitioned topics
    (``catalog.py``)."""

    async def get_managed_ledger(self, name: str) -> ManagedLedgerInfo: ...

    async def list_partitioned_topics(self) -> dict[str, int]: ...

    async def create_partitioned_topic(self, name: str, partitions: int) -> CatalogOutcome: ...

    async def delete_partitioned_topic(self, name: str) -> CatalogOutcome: ...
