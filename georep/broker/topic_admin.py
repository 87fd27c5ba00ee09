"""The broker's side of the admin REST: topic and subscription administration.

:class:`BrokerAdmin` implements the ``ClusterAdmin`` protocol the admin app
(``broker/admin/``) calls, over the broker service. It raises only the broker's own
errors (``TopicNotFound`` 404, ``TopicExists``/``ConsumerBusy``/``NotAllowed`` 409,
``ServiceNotReady`` 503) and the storage ``InvalidArgument`` (400), which the app maps to
those statuses; this module imports nothing of the admin package, so imports still point
down the data path.

Positions are ``(ledger id, entry id)``; ``(-1, -1)`` and ``(2**63-1, 2**63-1)`` are the
client's earliest and latest. Stats follow Pulsar's JSON field names. Counters
(``msgInCounter``, ``bytesInCounter``, ...) are exact; rates (``msgRateIn``,
``msgThroughputOut``, ...) are those counts over the last ``stats_rate_window_s`` seconds
(10 by default) divided by it, per second (``rate_meter.py``), so they read 0.0 one
window after traffic stops. The topic's rates count everything published to it and
dispatched from it, a subscription's everything it dispatched (to consumers since gone
too), a consumer's what it was sent. A subscription's ``isReplicated`` is its cursor
property ``georep.replicated``. The gateway's subscription sync (``sync_state``,
``sync_subscription``) is done by ``subscription_sync.py``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from georep import limits
from georep.broker import subscription_sync
from georep.broker.consumer import SUB_TYPE_NAMES
from georep.broker.entry import parse_metadata
from georep.broker.errors import (
    ConsumerBusy,
    NotAllowed,
    SubscriptionNotFound,
    TopicExists,
    TopicNotFound,
)
from georep.broker.rate_meter import RateMeter
from georep.broker.service import BrokerService
from georep.broker.subscription import is_replicated
from georep.broker.topic import PersistentTopic, SeekTarget, is_system_cursor
from georep.domain.position import InvalidPosition, Position
from georep.domain.topic_name import TopicName
from georep.storage.errors import InvalidArgument

log = logging.getLogger(__name__)


class BrokerAdmin:
    def __init__(self, service: BrokerService) -> None:
        self.service = service

    # -- topics --

    async def list_topics(self, namespace: str) -> list[str]:
        return await self.service.topics_of_namespace(namespace)

    async def namespace_deleted(self, namespace: str) -> None:
        self.service.namespaces.forget(namespace)

    async def namespace_changed(self, namespace: str) -> None:
        self.service.namespaces.forget(namespace)

    async def create_partitioned_topic(self, topic: TopicName, partitions: int) -> None:
        if self.service.catalog.partitions_of(topic):
            raise TopicExists(f"partitioned topic {topic} exists")
        await self.service.create_partitioned_topic(topic, partitions)

    async def partitioned_metadata(self, topic: TopicName) -> int:
        partitions = await self.service.partitions_of(topic)
        if partitions:
            return partitions
        if not await self._exists(topic):
            raise TopicNotFound(f"topic {topic} does not exist")
        return 0

    async def delete_topic(self, topic: TopicName) -> None:
        partitions = self.service.catalog.partitions_of(topic)
        if partitions:
            members = [topic.partition(index) for index in range(partitions)]
            for member in members:
                self._check_idle(self.service.loaded_topic(member))
            for member in members:
                if await self._exists(member):
                    await self._delete_one(member)
            await self.service.catalog.delete_partitioned_topic(topic)
            return
        if not await self._exists(topic):
            raise TopicNotFound(f"topic {topic} does not exist")
        self._check_idle(self.service.loaded_topic(topic))
        await self._delete_one(topic)

    @staticmethod
    def _check_idle(topic: PersistentTopic | None) -> None:
        if topic is None:
            return
        if topic.producers or any(s.consumers for s in topic.subscriptions.values()):
            raise ConsumerBusy(f"topic {topic.name} has producers or consumers connected")

    async def _delete_one(self, topic: TopicName) -> None:
        await self.service.unload_topic(topic)
        await self.service.factory.delete(topic.managed_ledger_name)
        self.service.forget_listing()
        log.info("topic %s deleted", topic)

    async def _exists(self, topic: TopicName) -> bool:
        if self.service.loaded_topic(topic) is not None:
            return True
        return topic.managed_ledger_name in await self.service.factory.list_names()

    async def _topic(self, topic: TopicName) -> PersistentTopic:
        """The loaded topic; NotFound (without creating it) when it does not exist."""
        if not await self._exists(topic):
            raise TopicNotFound(f"topic {topic} does not exist")
        return await self.service.get_topic(topic)

    # -- stats --

    async def topic_stats(self, topic: TopicName) -> dict[str, Any]:
        loaded = await self._topic(topic)
        ledger_stats = loaded.ledger.stats()
        entries = max(1, ledger_stats["entries"])
        storage = int(ledger_stats["bytes"])
        publishers = [
            {
                "producerName": p.name,
                "producerId": p.producer_id,
                "address": p.connection.peer,
                **_rates(p.rate_in, "In"),
                "msgInCounter": p.stats["messages_in"],
                "bytesInCounter": p.stats["bytes_in"],
            }
            for p in loaded.producers.values()
        ]
        subscriptions = {}
        slowest_backlog = 0
        for name in loaded.subscription_names():
            cursor = loaded.ledger.cursors[name]
            backlog = int(cursor.backlog)
            slowest_backlog = max(slowest_backlog, backlog)
            subscription = loaded.subscriptions.get(name)
            consumers = subscription.consumers if subscription is not None else []
            sub_type = subscription.sub_type if subscription is not None else None
            type_name = SUB_TYPE_NAMES.get(sub_type, "Exclusive") if sub_type is not None else None
            rate_out = subscription.rate_out if subscription is not None else None
            subscriptions[name] = {
                "msgBacklog": backlog,
                "type": type_name or "Exclusive",
                **_rates(rate_out, "Out"),
                "markDeletePosition": str(cursor.mark_delete_position),
                "isReplicated": is_replicated(cursor),
                "consumers": [
                    {
                        "consumerName": c.name,
                        **_rates(c.rate_out, "Out"),
                        "availablePermits": max(0, c.permits),
                        "unackedMessages": c.unacked_messages,
                        "msgOutCounter": c.stats["messages_out"],
                        "bytesOutCounter": c.stats["bytes_out"],
                        "address": c.connection.peer,
                    }
                    for c in consumers
                ],
            }
        return {
            **_rates(loaded.rate_in, "In"),
            **_rates(loaded.rate_out, "Out"),
            # since the topic was loaded here, as Pulsar's
            "msgInCounter": loaded.rate_in.messages_total,
            "bytesInCounter": loaded.rate_in.bytes_total,
            "msgOutCounter": loaded.rate_out.messages_total,
            "bytesOutCounter": loaded.rate_out.bytes_total,
            "averageMsgSize": float(storage / entries if ledger_stats["entries"] else 0.0),
            "storageSize": storage,
            "backlogSize": int(storage * slowest_backlog / entries),
            "publishers": publishers,
            "subscriptions": subscriptions,
        }

    async def internal_stats(self, topic: TopicName) -> dict[str, Any]:
        loaded = await self._topic(topic)
        ledger = loaded.ledger
        ledger_stats = ledger.stats()
        info = await self.service.factory_store.get_managed_ledger(ledger.name)
        ledgers = []
        for listed in info.ledgers:
            count = ledger.entries_in(
                Position(listed.ledger_id, 0), Position.end_of_ledger(listed.ledger_id)
            )
            ledgers.append(
                {"ledgerId": listed.ledger_id, "entries": count, "size": listed.size_bytes}
            )
        current = ledgers[-1] if ledgers else {"entries": 0, "size": 0}
        closed_bytes = sum(item["size"] for item in ledgers[:-1])
        current_size = max(0, int(ledger_stats["bytes"]) - closed_bytes)
        if ledgers:
            ledgers[-1]["size"] = current_size
        last = ledger.last_confirmed
        cursors = {}
        for name, cursor in sorted(ledger.cursors.items()):
            cursors[name] = {
                "markDeletePosition": str(cursor.mark_delete_position),
                "readPosition": str(cursor.read_position),
                "individuallyDeletedMessages": _ranges(cursor.individually_deleted),
                "messagesConsumedCounter": int(ledger_stats["entries"] - cursor.backlog),
                "properties": {k: _int_or_zero(v) for k, v in cursor.properties.items()},
            }
        return {
            "entriesAddedCounter": int(ledger_stats["appends"]),
            "numberOfEntries": int(ledger_stats["entries"]),
            "totalSize": int(ledger_stats["bytes"]),
            "currentLedgerEntries": int(current["entries"]),
            "currentLedgerSize": current_size,
            "lastConfirmedEntry": str(last)
            if last is not None
            else str(Position(ledger.tail_position.ledger_id, -1)),
            "state": "LedgerOpened" if ledger_stats["state"] == "open" else "Closed",
            "ledgers": ledgers,
            "cursors": cursors,
        }

    async def last_message_id(self, topic: TopicName) -> dict[str, Any]:
        loaded = await self._topic(topic)
        (ledger_id, entry_id), batch_index = await loaded.last_message_id()
        document = {
            "ledgerId": ledger_id,
            "entryId": entry_id,
            "partitionIndex": topic.partition_index,
        }
        if batch_index >= 0:
            document["batchIndex"] = batch_index
        return document

    # -- subscriptions --

    async def create_subscription(
        self, topic: TopicName, subscription: str, position: Position | None
    ) -> None:
        partitions = self.service.catalog.partitions_of(topic)
        members = [topic.partition(i) for i in range(partitions)] if partitions else [topic]
        if not partitions and not await self._exists(topic):
            raise TopicNotFound(f"topic {topic} does not exist")
        if is_system_cursor(subscription):
            raise NotAllowed(f"subscription name {subscription!r} is reserved (pulsar.*)")
        loaded_members = [await self.service.get_topic(member) for member in members]
        for loaded in loaded_members:
            if subscription in loaded.ledger.cursors:
                raise TopicExists(f"subscription {subscription!r} exists on {loaded.name}")
        for loaded in loaded_members:
            await loaded.ledger.open_cursor(subscription, start=_start(position))

    async def delete_subscription(self, topic: TopicName, subscription: str) -> None:
        loaded = await self._subscription_topic(topic, subscription)
        live = loaded.subscriptions.get(subscription)
        if live is not None and live.consumers:
            raise ConsumerBusy(f"subscription {subscription!r} has consumers connected")
        await loaded.delete_subscription(subscription)

    async def reset_cursor(self, topic: TopicName, subscription: str, position: Position) -> None:
        loaded = await self._subscription_topic(topic, subscription)
        if position == Position.EARLIEST:
            target = await loaded.seek_target("earliest")
        elif position == Position.LATEST:
            target = await loaded.seek_target("latest")
        else:
            target = await loaded.seek_target(position)
        await self._reset(loaded, subscription, target)

    async def reset_cursor_by_time(
        self, topic: TopicName, subscription: str, timestamp_ms: int
    ) -> None:
        loaded = await self._subscription_topic(topic, subscription)
        target = await loaded.find_by_publish_time(timestamp_ms)
        await self._reset(loaded, subscription, target)

    @staticmethod
    async def _reset(loaded: PersistentTopic, subscription: str, target: Position) -> None:
        live = loaded.subscriptions.get(subscription)
        if live is not None:
            await live.reset_cursor(target)  # consumers reconnect and read from there
        else:
            await loaded.ledger.cursors[subscription].reset(target)

    async def skip(self, topic: TopicName, subscription: str, messages: int) -> None:
        loaded = await self._subscription_topic(topic, subscription)
        cursor = loaded.ledger.cursors[subscription]
        ledger = loaded.ledger
        chosen: list[Position] = []
        position = ledger.next_position(cursor.mark_delete_position)
        last = ledger.last_confirmed
        while len(chosen) < messages and last is not None and position <= last:
            batch = await ledger.read(position, limits.topic_scan_read_entries_max)
            if not batch:
                break
            for entry_position, data in batch:
                if len(chosen) >= messages:
                    break
                if cursor.is_acknowledged(entry_position):
                    continue
                metadata = parse_metadata(data)
                if metadata is not None and metadata.HasField("marker_type"):
                    continue  # markers are not messages; they do not count
                chosen.append(entry_position)
            position = ledger.next_position(batch[-1][0])
        await self._acknowledge(loaded, subscription, chosen)

    async def acknowledge(
        self, topic: TopicName, subscription: str, positions: Sequence[Position]
    ) -> None:
        loaded = await self._subscription_topic(topic, subscription)
        cursor = loaded.ledger.cursors[subscription]
        wanted = []
        for ledger_id, entry_id in positions:
            position = _checked(ledger_id, entry_id)
            if cursor.is_acknowledged(position):
                continue
            if not loaded.ledger.is_entry(position):
                raise InvalidArgument(f"{position!s} is not an entry of {topic}")
            wanted.append(position)
        await self._acknowledge(loaded, subscription, wanted)

    @staticmethod
    async def _acknowledge(
        loaded: PersistentTopic, subscription: str, positions: list[Position]
    ) -> None:
        if not positions:
            return
        live = loaded.subscriptions.get(subscription)
        if live is not None:
            live.acknowledge_entries(positions)
            await live.flush()
        else:
            await loaded.ledger.cursors[subscription].delete(sorted(positions))

    # -- subscription sync (the gateway's) --

    async def sync_state(self, topic: TopicName) -> dict[str, Any]:
        """Every subscription's acknowledgement state (``subscription_sync.py``)."""
        return await subscription_sync.sync_state(await self._topic(topic))

    async def sync_changes(
        self, namespace: str, *, epoch: str | None, after: int, wait_s: float
    ) -> dict[str, Any]:
        changes = await self.service.change_feed.changes(namespace, epoch, after, wait_s)
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
    ) -> dict[str, Any]:
        """Create or move one subscription to a synced state (``subscription_sync.py``)."""
        return await subscription_sync.sync_subscription(
            await self._topic(topic),
            subscription,
            mark_delete=mark_delete,
            ranges=ranges,
            batches=batches,
            replicated=replicated,
        )

    async def _subscription_topic(self, topic: TopicName, subscription: str) -> PersistentTopic:
        loaded = await self._topic(topic)
        if subscription not in loaded.ledger.cursors or is_system_cursor(subscription):
            raise SubscriptionNotFound(f"no subscription {subscription!r} on {topic}")
        return loaded


def _rates(meter: RateMeter | None, direction: str) -> dict[str, float]:
    """``msgRate<direction>`` (messages/s) and ``msgThroughput<direction>`` (bytes/s)."""
    messages, size_bytes = meter.rates() if meter is not None else (0.0, 0.0)
    return {f"msgRate{direction}": messages, f"msgThroughput{direction}": size_bytes}


def _start(position: Position | None) -> SeekTarget:
    if position is None or position == Position.LATEST:
        return "latest"
    if position == Position.EARLIEST:
        return "earliest"
    return _checked(*position)


def _checked(ledger_id: object, entry_id: object) -> Position:
    """``Position.checked``, refused as the storage InvalidArgument the app answers 400."""
    try:
        return Position.checked(ledger_id, entry_id)
    except InvalidPosition as error:
        raise InvalidArgument(str(error)) from None


def _ranges(ranges: Iterable[tuple[Position, Position]]) -> str:
    parts = [f"({low!s}..{high!s}]" for low, high in _open_closed(ranges)]
    return "[" + ", ".join(parts) + "]"


def _open_closed(
    ranges: Iterable[tuple[Position, Position]],
) -> Iterator[tuple[Position, Position]]:
    """Pulsar writes each acknowledged range ``[a, b]`` as ``(a-1, b]``."""
    for low, high in ranges:
        yield low.predecessor(), high


def _int_or_zero(value: str) -> int:
    """Pulsar's cursor properties are numbers: a flag ``true`` reads 1, anything else
    that is not a number 0."""
    if value == "true":
        return 1
    try:
        return int(value)
    except ValueError:
        return 0
