"""Helpers for the admin REST tests (no tests here).

``MemoryCluster`` is a small in-memory ``ClusterAdmin`` for the HTTP-layer tests (auth,
validation, routing, JSON shapes) until the broker's cluster implements the protocol; it
lives under tests/ only. ``running_admin`` serves ``create_app`` on a real metadata store
through aiohttp's test client.
"""

from __future__ import annotations

import contextlib
import json as json_module
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import EllipsisType
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from georep.broker.admin import AdminSettings, create_app
from georep.broker.admin.cluster_admin import (
    Conflict,
    InvalidArgument,
    NotFound,
    format_ranges,
)
from georep.broker.change_feed import ChangeFeed
from georep.domain.position import Position
from georep.domain.topic_name import TopicName

ADMIN_TOKEN = "admin-token-0123456789abcdef"
READ_TOKEN = "read-only-token-0123456789abcdef"
WRONG_TOKEN = "wrong-token-0123456789abcdef"
LEDGER_ID = 7


@dataclass
class MemorySubscription:
    #: Index of the next entry to deliver (entries are (LEDGER_ID, 0..entries-1)).
    next_entry: int
    acknowledged: set[int] = field(default_factory=set)
    consumers: int = 0
    replicated: bool = False


@dataclass
class MemoryTopic:
    entries: int = 0
    subscriptions: dict[str, MemorySubscription] = field(default_factory=dict)
    producers: int = 0


class MemoryCluster:
    """Non-partitioned topics and partitions are ``MemoryTopic``\\ s; a partitioned topic
    is its partition count in ``partitioned``. Every call is recorded in ``calls``."""

    def __init__(self) -> None:
        self.topics: dict[str, MemoryTopic] = {}
        self.partitioned: dict[str, int] = {}
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.change_feed = ChangeFeed(epoch="memory")

    def add_topic(self, name: str, entries: int = 0) -> MemoryTopic:
        topic = self.topics[str(TopicName.parse(name))] = MemoryTopic(entries=entries)
        return topic

    # --- ClusterAdmin -----------------------------------------------------------------
    async def list_topics(self, namespace: str) -> list[str]:
        self.calls.append(("list_topics", (namespace,)))
        return sorted(name for name in self.topics if TopicName.parse(name).namespace == namespace)

    async def namespace_deleted(self, namespace: str) -> None:
        self.calls.append(("namespace_deleted", (namespace,)))

    async def namespace_changed(self, namespace: str) -> None:
        self.calls.append(("namespace_changed", (namespace,)))

    async def create_partitioned_topic(self, topic: TopicName, partitions: int) -> None:
        self.calls.append(("create_partitioned_topic", (topic, partitions)))
        if str(topic) in self.partitioned or str(topic) in self.topics:
            raise Conflict(f"topic {topic} already exists")
        self.partitioned[str(topic)] = partitions
        for index in range(partitions):
            self.topics[str(topic.partition(index))] = MemoryTopic()

    async def partitioned_metadata(self, topic: TopicName) -> int:
        if str(topic) in self.partitioned:
            return self.partitioned[str(topic)]
        self._topic(topic)
        return 0

    async def delete_topic(self, topic: TopicName) -> None:
        self.calls.append(("delete_topic", (topic,)))
        if str(topic) in self.partitioned:
            for index in range(self.partitioned.pop(str(topic))):
                del self.topics[str(topic.partition(index))]
            return
        found = self._topic(topic)
        if found.producers or any(sub.consumers for sub in found.subscriptions.values()):
            raise Conflict(f"topic {topic} has connected producers or consumers")
        del self.topics[str(topic)]

    async def topic_stats(self, topic: TopicName) -> Any:
        found = self._topic(topic)
        return {
            "msgRateIn": 0.0,
            "msgThroughputIn": 0.0,
            "msgRateOut": 0.0,
            "msgThroughputOut": 0.0,
            "averageMsgSize": 0.0,
            "storageSize": 10 * found.entries,
            "backlogSize": 10
            * max((self._backlog(found, s) for s in found.subscriptions), default=0),
            "publishers": [],
            "subscriptions": {
                name: {
                    "msgBacklog": self._backlog(found, name),
                    "type": "Exclusive",
                    "consumers": [],
                    "msgRateOut": 0.0,
                    "msgThroughputOut": 0.0,
                }
                for name in sorted(found.subscriptions)
            },
        }

    async def internal_stats(self, topic: TopicName) -> Any:
        found = self._topic(topic)
        cursors = {}
        for name, sub in sorted(found.subscriptions.items()):
            acked = sorted(entry for entry in sub.acknowledged if entry >= sub.next_entry)
            cursors[name] = {
                "markDeletePosition": str(Position(LEDGER_ID, sub.next_entry - 1)),
                "readPosition": str(Position(LEDGER_ID, sub.next_entry)),
                "individuallyDeletedMessages": format_ranges(
                    (Position(LEDGER_ID, entry - 1), Position(LEDGER_ID, entry)) for entry in acked
                ),
                "messagesConsumedCounter": sub.next_entry + len(acked),
            }
        return {
            "entriesAddedCounter": found.entries,
            "numberOfEntries": found.entries,
            "totalSize": 10 * found.entries,
            "currentLedgerEntries": found.entries,
            "currentLedgerSize": 10 * found.entries,
            "lastConfirmedEntry": str(Position(LEDGER_ID, found.entries - 1)),
            "state": "LedgerOpened",
            "ledgers": [
                {"ledgerId": LEDGER_ID, "entries": found.entries, "size": 10 * found.entries}
            ],
            "cursors": cursors,
        }

    async def last_message_id(self, topic: TopicName) -> Any:
        found = self._topic(topic)
        return {
            "ledgerId": LEDGER_ID,
            "entryId": found.entries - 1,
            "partitionIndex": topic.partition_index,
        }

    async def create_subscription(
        self, topic: TopicName, subscription: str, position: Position | None
    ) -> None:
        self.calls.append(("create_subscription", (topic, subscription, position)))
        found = self._topic(topic)
        if subscription in found.subscriptions:
            raise Conflict(f"subscription {subscription} already exists")
        found.subscriptions[subscription] = MemorySubscription(
            self._entry_of(found, Position.LATEST if position is None else position)
        )

    async def delete_subscription(self, topic: TopicName, subscription: str) -> None:
        self.calls.append(("delete_subscription", (topic, subscription)))
        found = self._topic(topic)
        if self._subscription(topic, subscription).consumers:
            raise Conflict(f"subscription {subscription} has connected consumers")
        del found.subscriptions[subscription]

    async def reset_cursor(self, topic: TopicName, subscription: str, position: Position) -> None:
        self.calls.append(("reset_cursor", (topic, subscription, position)))
        sub = self._subscription(topic, subscription)
        sub.next_entry = self._entry_of(self._topic(topic), position)
        sub.acknowledged.clear()

    async def reset_cursor_by_time(
        self, topic: TopicName, subscription: str, timestamp_ms: int
    ) -> None:
        self.calls.append(("reset_cursor_by_time", (topic, subscription, timestamp_ms)))
        self._subscription(topic, subscription).next_entry = 0

    async def skip(self, topic: TopicName, subscription: str, messages: int) -> None:
        self.calls.append(("skip", (topic, subscription, messages)))
        found = self._topic(topic)
        sub = self._subscription(topic, subscription)
        sub.next_entry = min(found.entries, sub.next_entry + messages)

    async def acknowledge(
        self, topic: TopicName, subscription: str, positions: Sequence[Position]
    ) -> None:
        self.calls.append(("acknowledge", (topic, subscription, tuple(positions))))
        found = self._topic(topic)
        sub = self._subscription(topic, subscription)
        for ledger_id, entry_id in positions:
            if ledger_id != LEDGER_ID or entry_id >= found.entries:
                raise InvalidArgument(f"{ledger_id}:{entry_id} is past the last entry")
            sub.acknowledged.add(entry_id)
        while sub.next_entry in sub.acknowledged:
            sub.acknowledged.discard(sub.next_entry)
            sub.next_entry += 1

    async def sync_state(self, topic: TopicName) -> Any:
        found = self._topic(topic)
        subscriptions = {}
        for name, sub in sorted(found.subscriptions.items()):
            acked = sorted(entry for entry in sub.acknowledged if entry >= sub.next_entry)
            subscriptions[name] = {
                "markDelete": {"ledgerId": LEDGER_ID, "entryId": sub.next_entry - 1},
                "ranges": [
                    {
                        "first": {"ledgerId": LEDGER_ID, "entryId": entry},
                        "last": {"ledgerId": LEDGER_ID, "entryId": entry},
                    }
                    for entry in acked
                ],
                "batches": [],
                "consumers": sub.consumers,
                "replicated": sub.replicated,
                "type": None,
            }
        last = {"ledgerId": LEDGER_ID, "entryId": found.entries - 1} if found.entries else None
        return {"lastPosition": last, "subscriptions": subscriptions}

    async def sync_changes(
        self, namespace: str, *, epoch: str | None, after: int, wait_s: float
    ) -> Any:
        self.calls.append(("sync_changes", (namespace, epoch, after, wait_s)))
        changes = await self.change_feed.changes(namespace, epoch, after, wait_s)
        return {
            "epoch": changes.epoch,
            "sequence": changes.sequence,
            "topics": list(changes.topics),
            "reset": changes.reset,
        }

    async def sync_subscription(
        self,
        topic: TopicName,
        subscription: str,
        *,
        mark_delete: Position | None,
        ranges: Sequence[tuple[Position, Position]],
        batches: Mapping[Position, frozenset[int]],
        replicated: bool,
    ) -> Any:
        self.calls.append(
            ("sync_subscription", (topic, subscription, mark_delete, tuple(ranges), replicated))
        )
        found = self._topic(topic)
        created = subscription not in found.subscriptions
        sub = found.subscriptions.setdefault(subscription, MemorySubscription(0))
        sub.replicated = sub.replicated or replicated
        entries = range(found.entries)
        if mark_delete is not None and mark_delete[0] == LEDGER_ID:
            sub.next_entry = max(sub.next_entry, min(mark_delete[1] + 1, found.entries))
        for low, high in ranges:
            sub.acknowledged.update(entry for entry in entries if low <= (LEDGER_ID, entry) <= high)
        while sub.next_entry in sub.acknowledged:
            sub.acknowledged.discard(sub.next_entry)
            sub.next_entry += 1
        return {
            "markDelete": {"ledgerId": LEDGER_ID, "entryId": sub.next_entry - 1},
            "rangesCount": len([e for e in sub.acknowledged if e >= sub.next_entry]),
            "created": created,
        }

    # --- helpers ----------------------------------------------------------------------
    def _topic(self, topic: TopicName) -> MemoryTopic:
        found = self.topics.get(str(topic))
        if found is None:
            raise NotFound(f"topic {topic} does not exist")
        return found

    def _subscription(self, topic: TopicName, subscription: str) -> MemorySubscription:
        found = self._topic(topic).subscriptions.get(subscription)
        if found is None:
            raise NotFound(f"subscription {subscription} does not exist on {topic}")
        return found

    @staticmethod
    def _entry_of(topic: MemoryTopic, position: Position) -> int:
        if position == Position.EARLIEST:
            return 0
        if position == Position.LATEST:
            return topic.entries
        ledger_id, entry_id = position
        if ledger_id != LEDGER_ID or entry_id > topic.entries:
            raise InvalidArgument(f"position {ledger_id}:{entry_id} is not in the topic")
        return entry_id

    @staticmethod
    def _backlog(topic: MemoryTopic, name: str) -> int:
        sub = topic.subscriptions[name]
        return topic.entries - sub.next_entry - len(sub.acknowledged)


@dataclass
class Answer:
    status: int
    body: Any
    headers: Any


class Admin:
    """A test client for the admin app, sending the admin token by default when tokens
    are configured."""

    def __init__(self, client: TestClient, cluster: MemoryCluster, app: web.Application,
                 default_token: str | None) -> None:  # fmt: skip
        self.client = client
        self.cluster = cluster
        self.app = app
        self.default_token = default_token

    async def request(
        self,
        method: str,
        path: str,
        json: Any = ...,
        *,
        token: str | EllipsisType | None = ...,  # ...: the default token; None: none
        data: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> Answer:
        sent = dict(headers or {})
        chosen = self.default_token if token is ... else token
        if chosen is not None:
            sent.setdefault("Authorization", f"Bearer {chosen}")
        kwargs: dict[str, Any] = {"headers": sent}
        if json is not ...:
            kwargs["json"] = json
        elif data is not None:
            kwargs["data"] = data
        elif method != "GET":
            # Like every client of ours: a mutation says JSON even without a body.
            sent.setdefault("Content-Type", "application/json")
        async with self.client.request(method, path, **kwargs) as response:
            raw = await response.read()
            body: Any = raw.decode()
            if response.content_type == "application/json":
                body = json_module.loads(raw) if raw else None
            return Answer(response.status, body, response.headers)

    async def get(self, path: str, **kwargs: Any) -> Answer:
        return await self.request("GET", path, **kwargs)

    async def put(self, path: str, json: Any = ..., **kwargs: Any) -> Answer:
        return await self.request("PUT", path, json, **kwargs)

    async def post(self, path: str, json: Any = ..., **kwargs: Any) -> Answer:
        return await self.request("POST", path, json, **kwargs)

    async def delete(self, path: str, **kwargs: Any) -> Answer:
        return await self.request("DELETE", path, **kwargs)


@contextlib.asynccontextmanager
async def running_admin(
    metadata_url: str,
    *,
    tokens: bool = False,
    cluster: MemoryCluster | None = None,
    **settings: Any,
) -> AsyncIterator[Admin]:
    if tokens:
        settings.setdefault("admin_tokens", [ADMIN_TOKEN])
        settings.setdefault("read_only_tokens", [READ_TOKEN])
    admin_settings = AdminSettings(cluster_name="A", metadata_url=metadata_url, **settings)
    cluster = cluster or MemoryCluster()
    app = create_app(admin_settings, cluster)
    async with TestClient(TestServer(app)) as client:
        yield Admin(client, cluster, app, ADMIN_TOKEN if tokens else None)
