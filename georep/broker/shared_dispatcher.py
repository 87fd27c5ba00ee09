"""Shared: entries go round-robin to the consumers that have permits.

Each entry goes to one consumer: the next one after the last served that can receive
(permits left, below its unacknowledged limit, connection writable). Entries a consumer
gave back (it closed, disconnected, negatively acknowledged them, or its ack timeout
fired) wait in the *replay queue*, in position order, and are dispatched before any new
entry is read. Entries read when no consumer can take them wait there too. While the
replay queue holds ``limits.dispatcher_replay_entries_max`` entries the dispatcher reads
nothing new.

Worked example, consumers A and B with permits 2 and 1, entries e1..e4 read: e1 -> A,
e2 -> B, e3 -> A, e4 -> replay (nobody has permits). B closes holding e2: e2 joins the
replay queue with redelivery count 1; A's next FLOW gets e2 then e4, in that order.
"""

from __future__ import annotations

import bisect
import logging

from georep import limits
from georep.broker.consumer import Consumer
from georep.broker.dispatcher import Dispatcher, DispatcherSubscription
from georep.broker.entry import Entry
from georep.domain.position import Position
from georep.storage.errors import NoSuchEntry

log = logging.getLogger(__name__)


class ReplayQueue:
    """Positions waiting for (re)delivery, in order, each with the key hash it had when
    added (-1 when the dispatcher does not use keys)."""

    def __init__(self) -> None:
        self._positions: list[Position] = []
        self._hashes: dict[Position, int] = {}
        self._hash_counts: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self._positions)

    def __contains__(self, position: Position) -> bool:
        return position in self._hashes

    def add(self, position: Position, key_hash: int = -1) -> None:
        if position in self._hashes:
            return
        bisect.insort(self._positions, position)
        self._hashes[position] = key_hash
        self._hash_counts[key_hash] = self._hash_counts.get(key_hash, 0) + 1

    def discard(self, position: Position) -> None:
        key_hash = self._hashes.pop(position, None)
        if key_hash is None:
            return
        index = bisect.bisect_left(self._positions, position)
        del self._positions[index]
        left = self._hash_counts[key_hash] - 1
        if left:
            self._hash_counts[key_hash] = left
        else:
            del self._hash_counts[key_hash]

    def first(self, count: int) -> list[Position]:
        return self._positions[:count]

    def positions(self) -> list[Position]:
        return list(self._positions)

    def holds_hash(self, key_hash: int) -> bool:
        return key_hash in self._hash_counts

    def clear(self) -> None:
        self._positions.clear()
        self._hashes.clear()
        self._hash_counts.clear()


class SharedDispatcher(Dispatcher):
    def __init__(self, subscription: DispatcherSubscription) -> None:
        super().__init__(subscription)
        self.replay = ReplayQueue()
        self._next_index = 0

    def add_consumer(self, consumer: Consumer) -> None:
        self.consumers.append(consumer)
        self.wake()

    def remove_consumer(self, consumer: Consumer) -> None:
        self.consumers.remove(consumer)
        self._give_back(consumer.take_pending())
        self.wake()

    def redeliver(self, consumer: Consumer, positions: list[Position] | None) -> None:
        self._give_back(consumer.take_pending(positions))
        self.wake()

    def acknowledged(self, positions: list[Position]) -> None:
        for position in positions:
            self.replay.discard(position)

    def held(self) -> list[Position]:
        return self.replay.positions()

    def cursor_was_reset(self) -> None:
        self.replay.clear()
        for consumer in self.consumers:
            consumer.take_pending()

    def _give_back(self, positions: list[Position]) -> None:
        if positions:
            self.subscription.count_redelivery(positions)
            for position in positions:
                self.replay.add(position, self._hash_of_held(position))

    def _any_can_receive(self) -> bool:
        return any(consumer.can_receive for consumer in self.consumers)

    async def _round(self) -> bool:
        if not self._any_can_receive():
            return False
        progress = False
        if len(self.replay):
            progress = await self._dispatch_replay()
        if len(self.replay) < limits.dispatcher_replay_entries_max and self._any_can_receive():
            permits = sum(max(0, c.permits) for c in self.consumers if c.can_receive)
            entries = await self._read_new(min(permits, limits.dispatcher_read_entries_max))
            if entries:
                self._dispatch_new(self.subscription.deliverable(entries))
                progress = True
        return progress

    async def _dispatch_replay(self) -> bool:
        entries = []
        for position in self.replay.first(limits.dispatcher_read_entries_max):
            if self.subscription.is_acknowledged(position):
                self.replay.discard(position)
                continue
            try:
                data = await self.subscription.ledger.read_entry(position)
            except NoSuchEntry:  # acknowledged and trimmed meanwhile
                self.replay.discard(position)
                continue
            entries.append(Entry.of(position, data))
        self._start_pass()
        sent = 0
        for entry in entries:
            if entry.position not in self.replay:
                continue  # acknowledged while the reads were in flight
            if entry.is_marker and not self.subscription.receives_markers:
                self.replay.discard(entry.position)
                self.subscription.note_marker(entry.position)
                continue
            consumer = self._select(entry, from_replay=True)
            if consumer is None:
                continue
            self.replay.discard(entry.position)
            self.subscription.send(consumer, entry)
            sent += 1
        return sent > 0

    def _dispatch_new(self, entries: list[Entry]) -> None:
        self._start_pass()
        for entry in entries:
            consumer = self._select(entry, from_replay=False)
            if consumer is None:
                self.replay.add(entry.position, self._hash_of(entry))
            else:
                self.subscription.send(consumer, entry)

    # -- the choice of consumer (Key_Shared overrides these) --

    def _start_pass(self) -> None:
        """A pass over a list of entries begins."""

    def _hash_of(self, entry: Entry) -> int:
        return -1

    def _hash_of_held(self, position: Position) -> int:
        return -1

    def _select(self, entry: Entry, *, from_replay: bool) -> Consumer | None:
        """The consumer ``entry`` goes to now, or None to keep it for later."""
        count = len(self.consumers)
        for step in range(count):
            index = (self._next_index + step) % count
            consumer = self.consumers[index]
            if consumer.can_receive:
                self._next_index = (index + 1) % count
                return consumer
        return None
