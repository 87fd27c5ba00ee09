"""A subscription: a durable cursor on the topic, its consumers, and its dispatcher.

Acknowledgement state has one owner, the cursor (``storage/managed_ledger/cursor.py``):
mark-delete position (MDP), individually deleted ranges and partially acknowledged
batches (entry -> bitset of the members still unacknowledged). An acknowledgement from a
client changes it in memory at once, as in Pulsar's ``ManagedCursorImpl`` (dispatch, the
change feed and the sync-state read it from there); the cursor batches and retries its
persistence on its own. An ACK_RESPONSE, the answer to CLOSE_CONSUMER, an admin's
acknowledge and a sync wait for it (:meth:`Subscription.flush`), which returns once the
acknowledgements taken so far are durable, or given up by the cursor after its retries
(logged: they are then delivered again after a restart, never lost). In memory only:
redelivery counts and the markers waiting for the MDP. Partial batches past the cursor's
persisted bound (``limits.cursor_batch_entries_persisted_max``) are forgotten by a crash,
and those batches are delivered whole again (at-least-once); the client's own tracker
filters what it acknowledged before, a new client gets the whole batch.

Batches: an entry of a batch is deleted on the cursor only when every member is
acknowledged. Worked example, a batch of 3 at (5, 7): ``ack (5,7) ack_set=[0b110]``
(member 0 done) leaves 0b110 remembered; ``ack (5,7) ack_set=[0b011]`` (member 2 done,
as the client's bitset says) leaves 0b010; ``ack (5,7)`` without a bitset (member 1,
the last) deletes (5,7) on the cursor. A redelivered (5,7) carries ``ack_set`` = the
remembered bits, so the client skips the members already acknowledged; so does one
redelivered after a restart, the bits coming back from the cursor.

Markers (entries with ``marker_type``): dispatched like any entry to the gateway's own
subscriptions (names starting ``georep.``, ``entry.GEOREP_NAME_PREFIX``: its replication
subscriptions and its sync reader read them and acknowledge them as usual), never to any
other. For those the dispatcher hands them to :meth:`Subscription.note_marker`; a marker
is deleted on the cursor only when it is the entry right after the MDP, so acknowledging
it moves the MDP over it and never leaves a hole in a lagging subscription's
acknowledged ranges (the failure mode of Pulsar issue 10054, where dispatchers
auto-acknowledged markers wherever they were read). Example: MDP (5,2), marker at (5,4)
read while (5,3) is unacknowledged: nothing happens; when (5,3) is acknowledged the MDP
reaches (5,3), the marker is next, and it is deleted too, so the MDP reaches (5,4).

Synced acknowledgements (:meth:`Subscription.acknowledge_synced`, from the admin's
subscription sync, ``subscription_sync.py``) go the way a client's do: a forward
mark-delete, closed ranges (taken by the cursor as ranges, never as lists of
positions) and partial batches; consumers and the dispatcher forget what they held of
them, so nothing acknowledged there is delivered again, and no consumer is disconnected.

Replicated subscriptions: a SUBSCRIBE with ``replicate_subscription_state`` (or the
subscription property ``georep.replicated=true``) marks the subscription's cursor with
the property ``georep.replicated=true`` (:data:`REPLICATED_PROPERTY`); nothing clears it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Protocol

from georep import limits
from georep.broker.consumer import Consumer, SubType
from georep.broker.dispatcher import Dispatcher, DispatcherFactory
from georep.broker.entry import Entry, is_georep_name
from georep.broker.errors import ConsumerBusy, NotAllowed
from georep.broker.message_id import position_of, unacknowledged_bits
from georep.broker.ports import SubscriptionCursor, TopicLog
from georep.broker.rate_meter import RateMeter
from georep.domain.position import Position
from georep.domain.topic_name import TopicName
from georep.storage.errors import (
    InvalidArgument,
    ManagedLedgerClosed,
    ManagedLedgerFenced,
    NoSuchCursor,
    StorageError,
)
from georep.storage.managed_ledger import RangeSet
from georep.wire import pulsar_wire_pb2 as pb

log = logging.getLogger(__name__)


#: Cursor errors a retry cannot cure: the cursor is gone, closed, or owned elsewhere.
_PERMANENT = (ManagedLedgerClosed, ManagedLedgerFenced, NoSuchCursor, InvalidArgument)

SHARED_TYPES = frozenset({SubType.SHARED, SubType.KEY_SHARED})

#: Cursor property of a replicated subscription, and its value.
REPLICATED_PROPERTY = "georep.replicated"
REPLICATED_VALUE = "true"


def is_replicated(cursor: SubscriptionCursor) -> bool:
    return cursor.properties.get(REPLICATED_PROPERTY) == REPLICATED_VALUE


async def mark_replicated(cursor: SubscriptionCursor) -> None:
    """Set the replicated property (durable when this returns); a no-op when set."""
    if not is_replicated(cursor):
        await cursor.set_properties({**cursor.properties, REPLICATED_PROPERTY: REPLICATED_VALUE})


def asks_replicated(command: pb.Subscribe) -> bool:
    """Whether a SUBSCRIBE asks for a replicated subscription: the client's
    ``replicate_subscription_state`` or the subscription property ``georep.replicated``."""
    if command.HasField("replicate_subscription_state") and command.replicate_subscription_state:
        return True
    return any(
        kv.key == REPLICATED_PROPERTY and kv.value == REPLICATED_VALUE
        for kv in command.subscription_properties
    )


class SubscriptionTopic(Protocol):
    """What a subscription needs of its topic (``topic.PersistentTopic``, which holds its
    subscriptions and so sits above this module)."""

    @property
    def name(self) -> TopicName: ...

    @property
    def ledger(self) -> TopicLog: ...

    @property
    def rate_window_s(self) -> int: ...

    @property
    def rate_out(self) -> RateMeter: ...

    def subscription_changed(self, name: str) -> None: ...

    async def delete_subscription(self, name: str) -> None: ...


class Subscription:
    def __init__(
        self,
        topic: SubscriptionTopic,
        name: str,
        cursor: SubscriptionCursor,
        *,
        dispatcher_factory: DispatcherFactory,
        durable: bool = True,
    ) -> None:
        self.topic = topic
        self.name = name
        self.cursor = cursor
        self.durable = durable
        #: Makes the dispatcher when the first consumer comes or the type changes.
        self._new_dispatcher = dispatcher_factory
        #: The gateway's subscriptions are dispatched markers; others step over them.
        self.receives_markers = is_georep_name(name)
        self.sub_type: int | None = None
        #: Consumers attached since the topic was loaded (sync-state: ``consumersAttached``).
        self.consumers_attached = 0
        self.dispatcher: Dispatcher | None = None
        self.redelivery_counts: dict[Position, int] = {}
        self._markers: set[Position] = set()
        #: Held by whoever moves the cursor's read position (dispatch reads, rewind, reset).
        self.cursor_lock = asyncio.Lock()
        self.closed = False
        self.stats = {
            "messages_acked": 0,
            "markers_skipped": 0,
            "redeliveries": 0,
            "expiries": 0,
            "syncs": 0,
        }
        #: What its consumers were sent, over the stats window (outlives the consumers).
        self.rate_out = RateMeter(topic.rate_window_s)

    def __repr__(self) -> str:
        return f"Subscription({self.topic.name} {self.name!r})"

    @property
    def ledger(self) -> TopicLog:
        return self.topic.ledger

    @property
    def consumers(self) -> list[Consumer]:
        return list(self.dispatcher.consumers) if self.dispatcher is not None else []

    # -- consumers --

    async def add_consumer(self, consumer: Consumer) -> None:
        if self.closed:
            raise ConsumerBusy(f"subscription {self.name!r} is closing")
        if self.dispatcher is not None and self.dispatcher.consumers:
            if consumer.sub_type != self.sub_type:
                current = SubType.Name(self.sub_type) if self.sub_type is not None else "none"
                raise ConsumerBusy(
                    f"subscription {self.name!r} is {current} and has consumers;"
                    f" cannot attach a {SubType.Name(consumer.sub_type)} consumer"
                )
        elif self.dispatcher is None or self.sub_type != consumer.sub_type:
            if self.dispatcher is not None:
                await self.dispatcher.close()
            async with self.cursor_lock:
                # What the old dispatcher read and nobody acknowledged (its consumers left,
                # its replay queue goes with it) is read again from the first unacked.
                self.cursor.rewind()
            self.sub_type = consumer.sub_type
            self.dispatcher = self._new_dispatcher(self, consumer.sub_type)
        self.dispatcher.add_consumer(consumer)
        self.consumers_attached += 1
        self._consumers_changed()

    async def remove_consumer(self, consumer: Consumer) -> None:
        """The consumer closed or its connection went away: redeliver what it held.
        Returns once the acknowledgements taken so far are persisted."""
        self._detach(consumer)
        self._consumers_changed()
        await self.flush()
        if not self.durable and not self.consumers and not self.closed:
            await self.topic.delete_subscription(self.name)

    def _consumers_changed(self) -> None:
        """With consumers a subscription is a sync source, without them a standby."""
        if self.durable:
            self.topic.subscription_changed(self.name)

    def _detach(self, consumer: Consumer) -> None:
        consumer.closed = True
        if self.dispatcher is not None and consumer in self.dispatcher.consumers:
            self.dispatcher.remove_consumer(consumer)

    def can_unsubscribe(self, consumer: Consumer) -> bool:
        return self.consumers == [consumer]

    # -- what dispatchers ask --

    def is_acknowledged(self, position: Position) -> bool:
        return self.cursor.is_acknowledged(position)

    def deliverable(self, entries: list[Entry]) -> list[Entry]:
        """``entries`` without entries acknowledged since they were read, and without
        markers (noted for MDP advancement) unless this subscription receives them."""
        out = []
        for entry in entries:
            if entry.is_marker and not self.receives_markers:
                self.note_marker(entry.position)
            elif not self.is_acknowledged(entry.position):
                out.append(entry)
        return out

    def send(self, consumer: Consumer, entry: Entry) -> None:
        consumer.send(
            entry,
            self.redelivery_counts.get(entry.position, 0),
            self.cursor.batch_bits(entry.position),
        )
        self.rate_out.record(entry.messages, len(entry.data))
        self.topic.rate_out.record(entry.messages, len(entry.data))

    def count_redelivery(self, positions: list[Position]) -> None:
        for position in positions:
            self.redelivery_counts[position] = self.redelivery_counts.get(position, 0) + 1
        self.stats["redeliveries"] += len(positions)

    def note_marker(self, position: Position) -> None:
        self.stats["markers_skipped"] += 1
        if len(self._markers) >= limits.subscription_markers_max:
            mark_delete = self.cursor.mark_delete_position
            self._markers = {p for p in self._markers if p > mark_delete}
        if len(self._markers) >= limits.subscription_markers_max:
            # Too many markers waiting for the MDP: acknowledge this one where it is. It
            # leaves a hole in the ranges, which is the lesser harm than forgetting it.
            log.warning(
                "%s: %d markers pending; deleting %s individually",
                self,
                len(self._markers),
                position,
            )
            self._take(lambda: self.cursor.delete([position]))
            return
        self._markers.add(position)
        self._advance_over_markers()

    # -- acknowledgements --

    def acknowledge(self, consumer: Consumer, ack: pb.Ack) -> None:
        if ack.ack_type == pb.Ack.CUMULATIVE:
            self._acknowledge_cumulative(consumer, ack)
        else:
            self._acknowledge_individual(consumer, ack)
        if self.dispatcher is not None:
            self.dispatcher.wake()

    def _in_range(self, position: Position) -> bool:
        """An entry of the log above the MDP (anything else a client acknowledges is
        ignored: already acknowledged, or not a message of this topic)."""
        return (
            position[0] >= 0
            and position[1] >= 0
            and position > self.cursor.mark_delete_position
            and self.ledger.is_entry(position)
        )

    def _acknowledge_cumulative(self, consumer: Consumer, ack: pb.Ack) -> None:
        if self.sub_type in SHARED_TYPES:
            raise NotAllowed(
                f"cumulative acknowledgement on a {SubType.Name(self.sub_type)} subscription"
            )
        if len(ack.message_id) != 1:
            raise NotAllowed(f"a cumulative ack names one message, not {len(ack.message_id)}")
        data = ack.message_id[0]
        position = position_of(data)
        if not self._in_range(position):
            return
        remaining = unacknowledged_bits(data.ack_set)
        target: Position | None = position
        if remaining is not None:
            self._merge_partial(position, remaining)
            target = position.predecessor() if position.entry_id > 0 else None
        if target is None:
            return
        self._forget_through(target)
        self.stats["messages_acked"] += 1
        self._take(lambda: self.cursor.mark_delete(target))

    def expire_through(self, position: Position) -> None:
        """Message expiry (TTL, ``message_expiry.py``): everything <= ``position`` is
        acknowledged as by a cumulative acknowledgement, whatever the subscription type."""
        self._forget_through(position)
        self.stats["expiries"] += 1
        self._take(lambda: self.cursor.mark_delete(position))
        if self.dispatcher is not None:
            self.dispatcher.wake()

    def _forget_through(self, target: Position) -> None:
        """Drop what is kept of entries <= ``target``: they are acknowledged."""
        for held in [p for p in self.redelivery_counts if p <= target]:
            del self.redelivery_counts[held]
        for member in self.consumers:
            member.acknowledged_up_to(target)

    def _acknowledge_individual(self, consumer: Consumer, ack: pb.Ack) -> None:
        whole: list[Position] = []
        for data in ack.message_id:
            position = position_of(data)
            if not self._in_range(position):
                continue
            remaining = unacknowledged_bits(data.ack_set)
            if remaining is not None and self._merge_partial(position, remaining):
                continue
            whole.append(position)
        if not whole:
            return
        others = [c for c in self.consumers if c is not consumer]
        for position in whole:
            self.redelivery_counts.pop(position, None)
            if not consumer.acknowledged(position):
                for other in others:
                    if other.acknowledged(position):
                        break
        if self.dispatcher is not None:
            self.dispatcher.acknowledged(whole)
        self.stats["messages_acked"] += len(whole)
        self._take(lambda: self.cursor.delete(whole))

    def acknowledge_synced(
        self,
        mark_delete: Position | None,
        ranges: list[tuple[Position, Position]],
        batches: dict[Position, int],
    ) -> None:
        """Acknowledgements from the admin's subscription sync, taken as a client's are:
        ``mark_delete`` only if beyond the MDP; every entry inside the closed ``ranges``
        (ends are entries of the log); ``batches`` maps an entry to the bits of its
        members still unacknowledged as the sync sees them (merged with what is known;
        none left is a whole acknowledgement). Consumers and the dispatcher forget what
        they held of them; the caller awaits :meth:`flush` for durability."""
        self.stats["syncs"] += 1
        if mark_delete is not None and mark_delete > self.cursor.mark_delete_position:
            self._forget_through(mark_delete)
            self._take(lambda: self.cursor.mark_delete(mark_delete))
        if ranges:
            self._take(lambda: self.cursor.delete_ranges(ranges))
            covered = RangeSet.of(ranges)
            self._forget(sorted(p for p in self._held_positions() if covered.contains(p)))
        whole = []
        for position, remaining in sorted(batches.items()):
            if self.is_acknowledged(position):
                continue
            if not self._merge_partial(position, remaining):
                whole.append(position)
        self.acknowledge_entries(whole)
        if self.dispatcher is not None:
            self.dispatcher.wake()

    def acknowledge_entries(self, positions: list[Position]) -> None:
        """Whole entries acknowledged outside any consumer (the admin's acknowledge and
        skip, subscription sync): taken by the cursor, and forgotten by the consumers and
        the dispatcher that held them (the caller awaits :meth:`flush`)."""
        if positions:
            self._take(lambda: self.cursor.delete(positions))
            self._forget(positions)
            if self.dispatcher is not None:
                self.dispatcher.wake()

    def _held_positions(self) -> set[Position]:
        """Every position kept in memory for delivery or redelivery (all bounded)."""
        held = set(self.redelivery_counts)
        for consumer in self.consumers:
            held.update(consumer.pending)
        if self.dispatcher is not None:
            held.update(self.dispatcher.held())
        return held

    def _forget(self, positions: list[Position]) -> None:
        """``positions`` were acknowledged outside any consumer: drop what is kept of them."""
        for position in positions:
            self.redelivery_counts.pop(position, None)
            for consumer in self.consumers:
                consumer.acknowledged(position)
        if positions and self.dispatcher is not None:
            self.dispatcher.acknowledged(positions)

    def _merge_partial(self, position: Position, remaining: int) -> bool:
        """Take a partial batch ack; True while some members remain unacknowledged (the
        cursor keeps them; past its bound it forgets them and the batch is delivered
        whole again)."""
        known = self.cursor.batch_bits(position)
        merged = remaining if known is None else known & remaining
        if merged == 0:
            return False
        self._take(lambda: self.cursor.delete_batch_members({position: remaining}))
        return True

    def _take(self, change: Callable[[], object]) -> None:
        """Hand one change to the cursor: in effect at once, persisted by the cursor,
        waited for by :meth:`flush`. A cursor closed, fenced or gone takes nothing; as
        before any acknowledgement reaches a persisted state, the entries are delivered
        again by whoever owns the cursor now (logged)."""
        try:
            change()  # the cursor persists it; flush() waits for that
        except _PERMANENT as error:
            log.warning("cursor %s: acknowledgements not taken: %s", self.cursor.name, error)
            return
        self._advance_over_markers()

    def _advance_over_markers(self) -> None:
        """Acknowledge each marker that is the entry right after the MDP, as long as one
        is. Markers the MDP passed stay in the set, harmless (never the entry after it),
        until :meth:`note_marker` finds the set full and drops them."""
        while self._markers:
            following = self.ledger.next_position(self.cursor.mark_delete_position)
            if following not in self._markers:
                return
            self._markers.discard(following)
            try:
                self.cursor.delete([following])
            except _PERMANENT as error:
                log.warning("cursor %s: marker not acknowledged: %s", self.cursor.name, error)
                return

    async def flush(self) -> None:
        """Return once the acknowledgements taken so far are durable, or given up by the
        cursor after its retries (logged there: they are delivered again after a
        restart, never lost); never raises a storage error."""
        try:
            await self.cursor.flush()
        except StorageError as error:
            log.warning("cursor %s: acknowledgements not persisted: %s", self.cursor.name, error)

    # -- redelivery, reset, removal --

    def redeliver(self, consumer: Consumer, message_ids: list[pb.MessageIdData]) -> None:
        if self.dispatcher is None:
            return
        positions = [position_of(data) for data in message_ids] if message_ids else None
        self.dispatcher.redeliver(consumer, positions)

    async def reset_cursor(self, position: Position) -> None:
        """Seek: every consumer is disconnected (the clients reconnect and read from
        ``position``), partial state is dropped, and the cursor is reset."""
        for consumer in self.consumers:
            consumer.connection.close_consumer_from_broker(consumer)
            self._detach(consumer)
        async with self.cursor_lock:
            await self.flush()
            await self.cursor.reset(position)
            self.redelivery_counts.clear()
            self._markers.clear()
            if self.dispatcher is not None:
                self.dispatcher.cursor_was_reset()

    async def close(self, *, disconnect: bool = True) -> None:
        self.closed = True
        for consumer in self.consumers:
            if disconnect:
                consumer.connection.close_consumer_from_broker(consumer)
            consumer.closed = True
        if self.dispatcher is not None:
            await self.dispatcher.close()
        with contextlib.suppress(Exception):
            await self.flush()
