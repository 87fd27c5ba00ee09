"""A persistent topic: one managed ledger, its producers and its subscriptions.

Publishing: ``publish`` hands the entry to the managed ledger (``append_async``, which
confirms in order), records the sequence id with deduplication, and when storage
confirms wakes every subscription's dispatcher. If a write fails the topic *fences*: it
refuses new publishes and closes every producer, until all writes in flight have
completed; then deduplication forgets what was pushed and not persisted, and the topic
takes producers again. When storage refused the write (no writable ensemble: full disks,
too few bookies), each producer's re-creation is refused once with a final error
(``connection.refuse_producer``), so the official client fails the sends it holds within
moments instead of resending them for ever; when another owner took the log, the clients
just reconnect. Without the fence a later write could succeed after an earlier one
failed, and the resent earlier message would land after it (or be dropped as a duplicate
of a higher sequence id).

Subscriptions are created on first subscribe and kept while the topic is loaded; their
cursors persist in the managed ledger. Cursors named ``pulsar.*`` are the broker's own
(deduplication; non-durable readers under ``pulsar.reader.``) and are never
subscriptions. A subscription name starting with ``pulsar.`` is refused, as in Pulsar.
A durable subscription asked for as replicated (``subscription.asks_replicated``) gets
the cursor property ``georep.replicated=true``, kept by later subscribes without it.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import logging
from collections.abc import Callable
from typing import Any, Literal

from georep import limits
from georep.broker.consumer import Consumer
from georep.broker.deduplication import CURSOR_NAME as DEDUP_CURSOR
from georep.broker.deduplication import MessageDeduplication
from georep.broker.dispatcher_factory import new_dispatcher
from georep.broker.entry import is_georep_name, parse_metadata
from georep.broker.errors import NotAllowed, ProducerBusy, ServiceNotReady, SubscriptionNotFound
from georep.broker.message_expiry import MessageExpiryMonitor
from georep.broker.message_id import position_of
from georep.broker.ports import TopicLog
from georep.broker.producer import Producer
from georep.broker.rate_meter import RateMeter
from georep.broker.subscription import Subscription, asks_replicated, mark_replicated
from georep.broker.topic_policies import TopicPolicies
from georep.domain import names
from georep.domain.position import Position
from georep.domain.topic_name import TopicName
from georep.invariant import invariant
from georep.storage.errors import ManagedLedgerClosed, ManagedLedgerFenced
from georep.storage.managed_ledger import ManagedLedgerConfig
from georep.wire import pulsar_wire_pb2 as pb

log = logging.getLogger(__name__)

#: Where a subscription is reset to or a reader starts: either end of the topic, or a
#: position (clamped to the entries that exist).
SeekTarget = Literal["earliest", "latest"] | Position

SYSTEM_CURSOR_PREFIX = "pulsar."
READER_CURSOR_PREFIX = "pulsar.reader."


def is_system_cursor(name: str) -> bool:
    return name.startswith(SYSTEM_CURSOR_PREFIX)


class PersistentTopic:
    def __init__(
        self,
        name: TopicName,
        ledger: TopicLog,
        *,
        on_dead: Callable[[PersistentTopic], None] = lambda _topic: None,
        on_subscription_change: Callable[[str], None] = lambda _topic: None,
        rate_window_s: int = limits.stats_rate_window_s_default,
    ) -> None:
        self.name = name
        self.ledger = ledger
        self._on_dead = on_dead
        #: Told this topic's name when an application subscription's state or consumers
        #: change (the broker's change feed, ``change_feed.py``).
        self._on_subscription_change = on_subscription_change
        self._full_name = str(name)
        ledger.cursor_listener = self.subscription_changed
        #: Window of every rate in this topic's stats (see ``rate_meter.py``): what its
        #: producers published, and what all its subscriptions dispatched.
        self.rate_window_s = rate_window_s
        self.rate_in = RateMeter(rate_window_s)
        self.rate_out = RateMeter(rate_window_s)
        #: Its namespace's retention and TTL, as last read (``topic_policies.py``).
        self.policies = TopicPolicies()
        self.expiry = MessageExpiryMonitor(self)
        #: Entries handed to ``publish`` and not yet handed to the managed ledger.
        self._appends: collections.deque[tuple[bytes, asyncio.Future[Position]]] = (
            collections.deque()
        )
        self._appender: asyncio.Task[None] | None = None
        self.producers: dict[str, Producer] = {}
        self.subscriptions: dict[str, Subscription] = {}
        self.dedup = MessageDeduplication(ledger, is_connected=lambda n: n in self.producers)
        self._fenced = False
        self._pending_publishes = 0
        #: Held while a subscription is found or created and changed outside its consumers
        #: (subscribe, the admin's subscription sync), so the two never interleave.
        self.subscribe_lock = asyncio.Lock()
        self.closed = False
        self.stats = {"publish_failures": 0, "fences": 0}

    def __repr__(self) -> str:
        return f"PersistentTopic({self.name})"

    @classmethod
    async def load(cls, name: TopicName, ledger: TopicLog, **options: Any) -> PersistentTopic:
        topic = cls(name, ledger, **options)
        for cursor_name in list(ledger.cursors):
            if cursor_name.startswith(READER_CURSOR_PREFIX):  # left by a crash
                await ledger.delete_cursor(cursor_name)
        await topic.dedup.recover()
        return topic

    def subscription_changed(self, name: str) -> None:
        """Subscription (or cursor) ``name`` changed; only applications' are told on."""
        if not (is_georep_name(name) or is_system_cursor(name)):
            self._on_subscription_change(self._full_name)

    # -- producers --

    def add_producer(self, producer: Producer) -> None:
        if self.closed:
            raise ServiceNotReady(f"topic {self.name} is closing")
        if self._fenced:
            raise ServiceNotReady(f"topic {self.name} is fenced after a storage failure")
        if producer.name in self.producers:
            raise ProducerBusy(f"producer {producer.name!r} is already connected to {self.name}")
        exclusive = pb.PRODUCER_ACCESS_EXCLUSIVE
        if self.producers and (
            producer.access_mode == exclusive
            or any(p.access_mode == exclusive for p in self.producers.values())
        ):
            raise ProducerBusy(f"topic {self.name} has an exclusive producer, or you asked for one")
        self.producers[producer.name] = producer

    def remove_producer(self, producer: Producer) -> None:
        if self.producers.get(producer.name) is producer:
            del self.producers[producer.name]

    def publish(
        self, producer_name: str, highest_sequence_id: int, data: bytes
    ) -> asyncio.Future[Position]:
        """Queue ``data`` for the managed ledger; the future resolves to its position once
        durable. Entries reach the ledger in call order, so positions follow it too."""
        if self._fenced or self.closed:
            raise ServiceNotReady(f"topic {self.name} is not taking writes now; retry")
        # The producer refused every SEND storage cannot take (``producer.py``); storage
        # failing an entry for its size would make a permanent refusal look transient.
        invariant(len(data) <= limits.entry_payload_bytes_max, "an entry storage refuses")
        self.dedup.record_pushed(producer_name, highest_sequence_id)
        future: asyncio.Future[Position] = asyncio.get_running_loop().create_future()
        self._appends.append((data, future))
        if self._appender is None or self._appender.done():
            self._appender = asyncio.get_running_loop().create_task(self._append_queued())
        self._pending_publishes += 1

        def done(completed: asyncio.Future[Position]) -> None:
            self._pending_publishes -= 1
            error = completed.exception() if not completed.cancelled() else None
            if completed.cancelled() or error is not None:
                self.stats["publish_failures"] += 1
                self._fence(error or asyncio.CancelledError())
            else:
                self.dedup.record_persisted(producer_name, highest_sequence_id, completed.result())
                self.notify_new_entries()
            if self._fenced and self._pending_publishes == 0:
                self._unfence()

        future.add_done_callback(done)
        return future

    async def _append_queued(self) -> None:
        while self._appends:
            data, future = self._appends.popleft()
            if future.done():
                continue
            try:
                stored = await self.ledger.append_async(data)
            except asyncio.CancelledError:
                future.cancel()
                raise
            except Exception as error:
                if not future.done():
                    future.set_exception(error)
                continue
            stored.add_done_callback(functools.partial(_copy_outcome, target=future))

    def _fence(self, error: BaseException) -> None:
        if not self._fenced:
            self._fenced = True
            self.stats["fences"] += 1
            log.warning("topic %s fenced after a failed write: %r", self.name, error)
            queued, self._appends = self._appends, collections.deque()
            for _data, future in queued:  # not yet sent: fail them, keep the order
                if not future.done():
                    future.set_exception(
                        ServiceNotReady(f"topic {self.name}: an earlier write failed")
                    )
            moved = isinstance(error, ManagedLedgerFenced | ManagedLedgerClosed)
            for producer in list(self.producers.values()):
                if moved:
                    producer.connection.close_producer_from_broker(producer)
                else:
                    # Storage refused (no writable ensemble: full disks, bookies down).
                    # The client would resend for ever; refusing the producer's
                    # re-creation once fails its pending sends in the application.
                    producer.connection.refuse_producer(
                        producer, f"topic {self.name}: storage refused a write: {error}"
                    )
            if moved:
                self._on_dead(self)  # another owner has the log: this instance is done
        if self._pending_publishes == 0:
            self._unfence()

    def _unfence(self) -> None:
        if self.closed:
            return
        self.dedup.reset_pushed(ServiceNotReady(f"topic {self.name}: an earlier write failed"))
        self._fenced = False
        log.info("topic %s takes writes again", self.name)

    def notify_new_entries(self) -> None:
        for subscription in self.subscriptions.values():
            if subscription.dispatcher is not None:
                subscription.dispatcher.wake()

    # -- subscriptions --

    async def subscribe(
        self, consumer_factory: Callable[[Subscription], Consumer], command: pb.Subscribe
    ) -> tuple[Subscription, Consumer]:
        """Find or create the subscription ``command`` names and attach a consumer made by
        ``consumer_factory(subscription)``."""
        name = command.subscription
        try:
            names.check("subscription", name)
        except names.InvalidName as error:
            raise NotAllowed(str(error)) from None
        if is_system_cursor(name):
            raise NotAllowed(f"subscription name {name!r} is reserved (pulsar.*)")
        if self.closed:
            raise ServiceNotReady(f"topic {self.name} is closing")
        async with self.subscribe_lock:
            subscription = self.subscriptions.get(name)
            if subscription is None:
                subscription = await self._new_subscription(command)
                self.subscriptions[name] = subscription
            if subscription.durable and asks_replicated(command):
                await mark_replicated(subscription.cursor)
            consumer = consumer_factory(subscription)
            await subscription.add_consumer(consumer)
        return subscription, consumer

    async def _new_subscription(self, command: pb.Subscribe) -> Subscription:
        name = command.subscription
        if command.durable:
            if command.initial_position == pb.Subscribe.EARLIEST:
                start = "earliest"
            else:
                start = "latest"
            cursor = await self.ledger.open_cursor(name, start=start)
            return Subscription(self, name, cursor, dispatcher_factory=new_dispatcher, durable=True)
        cursor = await self.ledger.open_cursor(
            f"{READER_CURSOR_PREFIX}{name}", start=_reader_start(command), durable=False
        )
        return Subscription(self, name, cursor, dispatcher_factory=new_dispatcher, durable=False)

    async def delete_subscription(self, name: str) -> None:
        subscription = self.subscriptions.pop(name, None)
        if subscription is None:
            if name in _cursor_names(self.ledger) and not is_system_cursor(name):
                await self.ledger.delete_cursor(name)
                return
            raise SubscriptionNotFound(f"no subscription {name!r} on {self.name}")
        await subscription.close()
        await self.ledger.delete_cursor(subscription.cursor.name)

    def subscription_names(self) -> list[str]:
        return sorted(n for n in _cursor_names(self.ledger) if not is_system_cursor(n))

    # -- reading --

    async def last_message_id(self) -> tuple[Position, int]:
        """((ledger id, entry id), batch index) of the last message; entry id -1 if the
        topic holds none. The batch index is that of the last message of a batch. Marker
        entries are stepped over (at most ``limits.last_message_id_markers_skipped_max``):
        a reader told that a marker is the last message would wait for it forever."""
        position = self.ledger.last_confirmed
        for _ in range(limits.last_message_id_markers_skipped_max):
            if position is None:
                break
            metadata = parse_metadata(await self.ledger.read_entry(position))
            if metadata is None or not metadata.HasField("marker_type"):
                if metadata is not None and metadata.HasField("num_messages_in_batch"):
                    return position, max(0, metadata.num_messages_in_batch - 1)
                return position, -1
            position = self._entry_before(position)
        return Position(self.ledger.tail_position.ledger_id, -1), -1

    def _entry_before(self, position: Position) -> Position | None:
        if position.entry_id > 0:
            before = Position(position.ledger_id, position.entry_id - 1)
            return before if self.ledger.is_entry(before) else None
        ledger_ids = self.ledger.stats()["ledger_ids"]
        earlier = [i for i in ledger_ids if i < position.ledger_id]
        while earlier:
            ledger_id = earlier.pop()
            count = self.ledger.entries_in(
                Position(ledger_id, 0), Position.end_of_ledger(ledger_id)
            )
            if count:
                return Position(ledger_id, count - 1)
        return None

    async def seek_target(self, target: SeekTarget) -> Position:
        """The position a subscription reset to ``target`` ("earliest", "latest" or a
        position) should read next, clamped to the entries that exist; on a topic that
        holds none, where its next entry will go."""
        last = self.ledger.last_confirmed
        after_last = self.ledger.next_position(last) if last is not None else None
        first = self.ledger.first_position
        if target == "latest":
            return after_last or first or self.ledger.tail_position
        if target == "earliest":
            return first or after_last or self.ledger.tail_position
        position = target
        if after_last is not None and position >= after_last:
            return after_last
        if first is not None and position < first:
            return first
        return position

    async def find_by_publish_time(self, publish_time_ms: int) -> Position:
        """The first entry published at or after ``publish_time_ms`` (a linear scan from
        the oldest entry, ``limits.topic_scan_read_entries_max`` at a time), or the end."""
        last = self.ledger.last_confirmed
        position = self.ledger.first_position
        while position is not None and last is not None and position <= last:
            batch = await self.ledger.read(position, limits.topic_scan_read_entries_max)
            if not batch:
                break
            for entry_position, data in batch:
                metadata = parse_metadata(data)
                if metadata is not None and metadata.publish_time >= publish_time_ms:
                    return entry_position
            position = self.ledger.next_position(batch[-1][0])
        return await self.seek_target("latest")

    # -- namespace policies --

    def apply_policies(self, policies: TopicPolicies, base: ManagedLedgerConfig) -> None:
        """Take the namespace's policies: retention becomes the managed ledger's (from
        its next trim on), the TTL is used from the next expiry pass on."""
        self.policies = policies
        config = policies.ledger_config(base)
        if self.ledger.config != config:
            self.ledger.config = config

    async def expire_messages(self, now_ms: int) -> None:
        """One expiry pass (``message_expiry.py``) if the namespace has a TTL."""
        ttl_s = self.policies.message_ttl_s
        if ttl_s and not self.closed:
            await self.expiry.expire(ttl_s, now_ms)

    # -- life cycle --

    async def close(self) -> None:
        """Disconnect producers and consumers (they reconnect elsewhere or later), persist
        what is pending, and close the ledger."""
        if self.closed:
            return
        self.closed = True
        for producer in list(self.producers.values()):
            producer.connection.close_producer_from_broker(producer)
        for subscription in list(self.subscriptions.values()):
            await subscription.close()
        for _data, future in self._appends:
            if not future.done():
                future.set_exception(ServiceNotReady(f"topic {self.name} is closing"))
        self._appends.clear()
        await self.dedup.close()
        await self.ledger.close()


def _cursor_names(ledger: TopicLog) -> list[str]:
    return list(ledger.cursors)


def _copy_outcome(source: asyncio.Future[Position], target: asyncio.Future[Position]) -> None:
    if target.done():
        return
    if source.cancelled():
        target.cancel()
    elif (error := source.exception()) is not None:
        target.set_exception(error)
    else:
        target.set_result(source.result())


def _reader_start(command: pb.Subscribe) -> SeekTarget:
    """Where a non-durable cursor starts: at the given message id (the client drops what
    it should not see, honouring its own ``start_message_id_inclusive``), or at either end."""
    if not command.HasField("start_message_id"):
        return "earliest" if command.initial_position == pb.Subscribe.EARLIEST else "latest"
    position = position_of(command.start_message_id)
    if position == Position.EARLIEST or position.ledger_id < 0:
        return "earliest"
    if position == Position.LATEST:
        return "latest"
    return position


__all__ = ["DEDUP_CURSOR", "PersistentTopic", "is_system_cursor"]
