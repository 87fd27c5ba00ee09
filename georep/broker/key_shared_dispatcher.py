"""Key_Shared: each key's hash belongs to one consumer, and each key stays in order.

The owner of an entry is the consumer owning its key's hash (``hash_ranges.py``: auto-split
by default, or the ranges a sticky consumer states). Per-key order rests on three rules:

1. *Replay first, per hash.* Entries given back (consumer left, redelivery) or held
   (owner without permits) wait in the replay queue. A new entry whose hash still has an
   entry waiting there waits too, behind it; within one pass, once an entry of a hash
   could not be delivered no later entry of that hash is.
2. *Recently joined consumers* (Pulsar's rule for auto-split): a consumer that joins
   while others are attached may take over hashes whose earlier entries are still
   unacknowledged at their old owner. So it receives no entry at or beyond the read
   position of the moment it joined until every entry before that position is
   acknowledged (the mark-delete position reaches it). Entries before it (replays) it may
   receive.
3. A consumer that asked for ``allow_out_of_order_delivery`` is exempt from 1 and 2.

Worked example: A alone has read e1..e10 (keys k1 and k2), acked e1..e4; B joins at read
position e11 and takes k2's hash. e11 (k2) is held for B until e5..e10 are acknowledged,
because A may still hold k2 entries among them; e11 (k1) goes to A at once.
"""

from __future__ import annotations

from georep.broker.consumer import Consumer
from georep.broker.dispatcher import DispatcherSubscription
from georep.broker.entry import Entry
from georep.broker.errors import ConsumerAssignError
from georep.broker.hash_ranges import AutoSplitRanges, StickyRanges, key_hash
from georep.broker.shared_dispatcher import SharedDispatcher
from georep.domain.position import Position
from georep.wire import pulsar_wire_pb2 as pb


class KeySharedDispatcher(SharedDispatcher):
    def __init__(self, subscription: DispatcherSubscription) -> None:
        super().__init__(subscription)
        self._auto: AutoSplitRanges[Consumer] = AutoSplitRanges()
        self._sticky: StickyRanges[Consumer] = StickyRanges()
        self._mode: int | None = None
        #: consumer -> read position when it joined (rule 2)
        self._recently_joined: dict[Consumer, Position] = {}
        #: key hash of every entry sent and not yet acknowledged or given back
        self._sent_hashes: dict[Position, int] = {}
        self._blocked: set[int] = set()

    # -- consumers --

    def add_consumer(self, consumer: Consumer) -> None:
        meta = consumer.key_shared_meta
        mode = meta.key_shared_mode if meta is not None else pb.KEY_SHARED_AUTO_SPLIT
        if self.consumers and mode != self._mode:
            current = pb.KeySharedMode.Name(self._mode) if self._mode is not None else "none"
            raise ConsumerAssignError(
                f"subscription {self.subscription.name!r} uses Key_Shared mode"
                f" {current}, not {pb.KeySharedMode.Name(mode)}"
            )
        if meta is not None and mode == pb.KEY_SHARED_STICKY:
            ranges = [(r.start, r.end) for r in meta.hash_ranges]
            self._sticky.add(consumer, ranges)
        else:
            self._auto.add(consumer)
        self._mode = mode
        if self.consumers and not self._out_of_order(consumer):
            self._recently_joined[consumer] = self.cursor.read_position
        self.consumers.append(consumer)
        self.wake()

    def remove_consumer(self, consumer: Consumer) -> None:
        self._auto.remove(consumer)
        self._sticky.remove(consumer)
        self._recently_joined.pop(consumer, None)
        super().remove_consumer(consumer)

    def acknowledged(self, positions: list[Position]) -> None:
        super().acknowledged(positions)
        for position in positions:
            self._sent_hashes.pop(position, None)

    def cursor_was_reset(self) -> None:
        super().cursor_was_reset()
        self._sent_hashes.clear()
        self._recently_joined.clear()

    # -- choosing --

    def _owner(self, key_hash_value: int) -> Consumer | None:
        if self._mode == pb.KEY_SHARED_STICKY:
            return self._sticky.owner_of(key_hash_value)
        return self._auto.owner_of(key_hash_value)

    @staticmethod
    def _out_of_order(consumer: Consumer) -> bool:
        meta = consumer.key_shared_meta
        return meta is not None and meta.allow_out_of_order_delivery

    def _start_pass(self) -> None:
        self._blocked = set()
        if self._recently_joined:
            self._release_joined()

    def _release_joined(self) -> None:
        mark_delete = self.cursor.mark_delete_position
        following = self.subscription.ledger.next_position(mark_delete)
        done_up_to = following if following is not None else mark_delete
        for consumer, joined_at in list(self._recently_joined.items()):
            if done_up_to >= joined_at:
                del self._recently_joined[consumer]

    def _hash_of(self, entry: Entry) -> int:
        return key_hash(entry.key)

    def _hash_of_held(self, position: Position) -> int:
        return self._sent_hashes.pop(position, -1)

    def _select(self, entry: Entry, *, from_replay: bool) -> Consumer | None:
        hash_value = self._hash_of(entry)
        consumer = self._owner(hash_value)
        if consumer is None:
            self._blocked.add(hash_value)
            return None
        in_order = not self._out_of_order(consumer)
        if in_order and hash_value in self._blocked:
            return None
        if in_order and not from_replay and self.replay.holds_hash(hash_value):
            return None
        joined_at = self._recently_joined.get(consumer)
        if not consumer.can_receive or (joined_at is not None and entry.position >= joined_at):
            self._blocked.add(hash_value)
            return None
        self._sent_hashes[entry.position] = hash_value
        return consumer
