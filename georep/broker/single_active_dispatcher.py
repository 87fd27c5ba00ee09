"""Exclusive and Failover: one active consumer reads the subscription in order.

Exclusive admits one consumer; a second gets ConsumerBusy. Failover admits many and
picks the active one: consumers are ranked by priority level (lower first), then for a
partition of a partitioned topic by name, and partition N goes to the
``N % k``-th of the k consumers of the best priority, spreading partitions over
consumers as Pulsar does; for a non-partitioned topic the one that joined first among
the best priority is active, so the active consumer changes only when it leaves or a
better-priority one joins. Every consumer is told with ACTIVE_CONSUMER_CHANGE whether
it is the active one when the choice changes, and a joining consumer is told at once.

Redelivery is by rewind: when the active consumer changes, leaves, or asks for
redelivery (the client asks for all of it on Exclusive and Failover, whatever ids it
lists), the cursor's read position goes back to just after the mark-delete position, so
every unacknowledged entry is read again in order; individually acknowledged ones are
skipped by the cursor. Redelivery counts of what the consumer held are raised.
"""

from __future__ import annotations

import itertools
from typing import Any

from georep import limits
from georep.broker.consumer import Consumer, SubType
from georep.broker.dispatcher import Dispatcher, DispatcherSubscription
from georep.broker.errors import ConsumerBusy
from georep.domain.position import Position


class SingleActiveConsumerDispatcher(Dispatcher):
    def __init__(self, subscription: DispatcherSubscription, sub_type: int) -> None:
        super().__init__(subscription)
        self.sub_type = sub_type
        self.active: Consumer | None = None
        self._rewind_wanted = False
        self._join_order: dict[Consumer, int] = {}
        self._joins = itertools.count()

    def add_consumer(self, consumer: Consumer) -> None:
        if self.sub_type == SubType.EXCLUSIVE and self.consumers:
            raise ConsumerBusy(
                f"exclusive subscription {self.subscription.name!r} already has a consumer"
            )
        self.consumers.append(consumer)
        self._join_order[consumer] = next(self._joins)
        if not self._pick_active() and self.sub_type == SubType.FAILOVER:
            consumer.notify_active(consumer is self.active)
        self.wake()

    def remove_consumer(self, consumer: Consumer) -> None:
        self.consumers.remove(consumer)
        self._join_order.pop(consumer, None)
        self._take_back(consumer)
        if consumer is self.active:
            self.active = None
        self._pick_active()
        self.wake()

    def redeliver(self, consumer: Consumer, positions: list[Position] | None) -> None:
        # Exclusive and Failover redeliver everything unacknowledged, in order.
        self._take_back(consumer)
        self.wake()

    def cursor_was_reset(self) -> None:
        self._rewind_wanted = False
        for consumer in self.consumers:
            consumer.take_pending()

    def _take_back(self, consumer: Consumer) -> None:
        held = consumer.take_pending()
        if held:
            self.subscription.count_redelivery(held)
        self._rewind_wanted = True

    def _rank(self, consumer: Consumer) -> tuple[Any, ...]:
        if self.subscription.topic.name.is_partition:
            return (consumer.priority_level, consumer.name, self._join_order[consumer])
        return (consumer.priority_level, self._join_order[consumer])

    def _pick_active(self) -> bool:
        """Choose the active consumer; True (and everyone told) if it changed."""
        if not self.consumers:
            self.active = None
            return False
        ranked = sorted(self.consumers, key=self._rank)
        best = [c for c in ranked if c.priority_level == ranked[0].priority_level]
        partition = self.subscription.topic.name.partition_index
        chosen = best[partition % len(best)] if partition >= 0 else best[0]
        if chosen is self.active:
            return False
        previous, self.active = self.active, chosen
        if previous is not None:
            self._take_back(previous)
        if self.sub_type == SubType.FAILOVER:
            for consumer in self.consumers:
                consumer.notify_active(consumer is chosen)
        return True

    async def _round(self) -> bool:
        consumer = self.active
        if consumer is None or not consumer.can_receive:
            return False
        if self._rewind_wanted:
            async with self.subscription.cursor_lock:
                self._rewind_wanted = False
                self.cursor.rewind()
        count = min(consumer.permits, limits.dispatcher_read_entries_max)
        entries = await self._read_new(count)
        if not entries:
            return False
        if consumer is not self.active or consumer.closed or self._rewind_wanted:
            self._rewind_wanted = True  # what was read is read again after the rewind
            return True
        for entry in self.subscription.deliverable(entries):
            self.subscription.send(consumer, entry)
        return True
