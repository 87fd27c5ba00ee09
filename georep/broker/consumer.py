"""One consumer of a subscription: its permits, and what it holds unacknowledged.

Permits: the client grants them with FLOW (1,000 at subscribe for the default receiver
queue, then half of it at a time as the application takes messages). Dispatch sends an
entry only to a consumer with permits left and takes the entry's message count off them
(a batch of 10 costs 10), so permits may dip below zero after a large batch, as in
Pulsar; the client hands back the permits of batch members it skips (already
acknowledged ones, see ``ack_set``).

Pending acks: every entry sent and not yet acknowledged, with its message count. When
the consumer closes, disconnects, or asks for redelivery, its pending entries go back to
the dispatcher to be delivered again (to it or to another consumer) with their
redelivery count raised. Past ``limits.consumer_unacked_messages_max`` unacknowledged
messages dispatch to the consumer pauses until it acknowledges some.
"""

from __future__ import annotations

import logging
from typing import Protocol

from georep import limits
from georep.broker.entry import Entry
from georep.broker.message_id import message_id, words_from_bits
from georep.broker.rate_meter import RateMeter
from georep.domain.position import Position
from georep.wire import commands, frames
from georep.wire import pulsar_wire_pb2 as pb

log = logging.getLogger(__name__)

SubType = pb.Subscribe.SubType

#: Subscription types as Pulsar's admin JSON spells them (stats, sync-state).
SUB_TYPE_NAMES: dict[int, str] = {
    SubType.EXCLUSIVE: "Exclusive",
    SubType.SHARED: "Shared",
    SubType.FAILOVER: "Failover",
    SubType.KEY_SHARED: "Key_Shared",
}


class ConsumerConnection(Protocol):
    """What a consumer needs of the connection it was opened on."""

    @property
    def is_writable(self) -> bool: ...

    def write(self, data: bytes) -> None: ...

    def send_command(self, command: pb.BaseCommand) -> None: ...

    @property
    def peer(self) -> str: ...

    def close_consumer_from_broker(self, consumer: Consumer) -> None: ...


class Consumer:
    def __init__(
        self,
        *,
        connection: ConsumerConnection,
        consumer_id: int,
        name: str,
        sub_type: int,
        rate_window_s: int,
        priority_level: int = 0,
        key_shared_meta: pb.KeySharedMeta | None = None,
        partition_index: int = -1,
    ) -> None:
        self.connection = connection
        self.consumer_id = consumer_id
        self.name = name
        self.sub_type = sub_type
        self.priority_level = priority_level
        self.key_shared_meta = key_shared_meta
        self.partition_index = partition_index
        self.permits = 0
        #: position -> messages in that entry, for every entry sent and not acknowledged
        self.pending: dict[Position, int] = {}
        self.unacked_messages = 0
        self.closed = False
        self.stats = {"messages_out": 0, "entries_out": 0, "bytes_out": 0, "redelivered": 0}
        #: msgRateOut / msgThroughputOut: the counters above over the stats window (the
        #: topic's ``rate_window_s``)
        self.rate_out = RateMeter(rate_window_s)

    def __repr__(self) -> str:
        return f"Consumer({self.consumer_id} {self.name!r} on {self.connection.peer})"

    # -- permits --

    def flow(self, permits: int) -> None:
        self.permits += permits

    @property
    def can_receive(self) -> bool:
        return (
            not self.closed
            and self.permits > 0
            and self.unacked_messages < limits.consumer_unacked_messages_max
            and self.connection.is_writable
        )

    # -- dispatch --

    def send(self, entry: Entry, redelivery_count: int, unacked_bits: int | None) -> None:
        """Push ``entry`` to the client behind a MESSAGE command."""
        ack_set = words_from_bits(unacked_bits, entry.messages) if unacked_bits is not None else ()
        command = commands.message(
            self.consumer_id,
            message_id(entry.position, self.partition_index),
            redelivery_count=redelivery_count,
            ack_set=ack_set,
        )
        frame = frames.encode_stored_payload_command(command, entry.data)
        self.connection.write(frame)
        messages = entry.messages
        self.permits -= messages
        if entry.position not in self.pending:
            self.unacked_messages += messages
        self.pending[entry.position] = messages
        self.stats["messages_out"] += messages
        self.stats["entries_out"] += 1
        self.stats["bytes_out"] += len(entry.data)
        self.rate_out.record(messages, len(entry.data))

    def notify_active(self, is_active: bool) -> None:
        self.connection.send_command(commands.active_consumer_change(self.consumer_id, is_active))

    # -- acknowledgements and redelivery --

    def acknowledged(self, position: Position) -> bool:
        """Forget ``position``; False if this consumer did not hold it."""
        messages = self.pending.pop(position, None)
        if messages is None:
            return False
        self.unacked_messages -= messages
        return True

    def acknowledged_up_to(self, position: Position) -> None:
        for held in [p for p in self.pending if p <= position]:
            self.acknowledged(held)

    def take_pending(self, positions: list[Position] | None = None) -> list[Position]:
        """Remove and return the pending positions (all, or those of ``positions`` held
        here), in position order, for redelivery."""
        if positions is None:
            taken = sorted(self.pending)
        else:
            taken = sorted(p for p in set(positions) if p in self.pending)
        for position in taken:
            self.acknowledged(position)
        self.stats["redelivered"] += len(taken)
        return taken
