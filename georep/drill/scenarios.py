"""How consumers on A consume: the drill's scenarios, as acknowledgement policies.

A scenario names a subscription type, a number of consumers, and one
:class:`AckPolicy` per consumer: given each message a consumer receives, the policy says
what to do with it and with the messages it holds (acknowledge, acknowledge
cumulatively, negatively acknowledge). Policies are pure (no client, no clock: "a while"
is counted in messages), so their guarantees are unit-tested. On B every scenario uses
:class:`AckEach`: the drain acknowledges everything it receives; with ``--failback``,
:class:`PartialAcks` instead (about half, out of order, so that B's subscription holds
acknowledged ranges when A returns), and on A again after the return :class:`AckEach`.

Scenarios (``i`` is a message's index in production order, which is its position order
on A):

- ``shared-out-of-order``: Shared, 2 consumers. Each acknowledges in shuffled windows of
  8; every 50th message (i % 50 == 25) is held for the next 60 messages of its consumer;
  and one message, ``i = target // 2`` (target = the messages delivered on A before the
  failure), is held until the failure, while those above it are acknowledged at once
  (the windows and holds apply below it).
  Worked example with 300 messages and ``--at 0.5``: target 150, message 75 is never
  acknowledged on A, so A's mark-delete position stays below 75 while 76..~150 are
  acknowledged as they arrive: at the failure A holds acknowledged ranges above its
  mark-delete position — exactly what syncing the mark-delete position alone (Pulsar)
  loses. Of ``target`` distinct messages delivered at most ``target // 2 + 1`` are at
  or below 75, so for a target of 3 or more at least one above it is delivered.
- ``key-shared``: Key_Shared, 2 consumers; each acknowledges in delivery order, with the
  same periodic holds (no pinned message).
- ``exclusive-cumulative``: Exclusive, 1 consumer; a cumulative acknowledgement every 10
  messages (up to 9 are unacknowledged at the failure, none above an acknowledged one).
- ``failover``: Failover, 2 consumers (one active); each message acknowledged on receipt.
- ``with-nacks``: Shared, 2 consumers; every 7th message (i % 7 == 3) is negatively
  acknowledged on its first delivery and acknowledged when redelivered (after
  :data:`NACK_REDELIVERY_DELAY_MS`); the others on receipt.
- ``avro-evolving``: ``shared-out-of-order``'s consumers and acknowledgements, on Avro
  records whose schema gains a field half-way through production (a compatible v2,
  avro_records.py); the consumers on B decode each message by its schema version, as
  ``AUTO_CONSUME`` does, and the report counts those undecodable on B.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

SHARED = "Shared"
KEY_SHARED = "Key_Shared"
EXCLUSIVE = "Exclusive"
FAILOVER = "Failover"

ACK = "ack"
ACK_CUMULATIVE = "ack-cumulative"
NACK = "nack"

#: Negative-acknowledgement redelivery delay the with-nacks consumers ask for.
NACK_REDELIVERY_DELAY_MS = 100


@dataclass(frozen=True, slots=True)
class Received:
    """One message as a policy sees it; ``handle`` is the client's message, opaque here."""

    index: int
    redelivery_count: int
    handle: Any


@dataclass(frozen=True, slots=True)
class Action:
    kind: str  # ACK, ACK_CUMULATIVE or NACK
    message: Received


class AckPolicy:
    """What one consumer does with each message it receives."""

    def on_message(self, message: Received) -> list[Action]:
        raise NotImplementedError


class AckEach(AckPolicy):
    """Acknowledge every message on receipt (consumers on B; the failover scenario)."""

    def on_message(self, message: Received) -> list[Action]:
        return [Action(ACK, message)]


@dataclass
class HoldingAcks(AckPolicy):
    """Acknowledge in shuffled windows, hold some messages for a while, one for ever.

    - ``pinned_index``: this message is never acknowledged (held until the failure);
    - above the pinned message: acknowledged at once, so that whichever consumer gets
      them, messages above the pinned one are acknowledged before the failure;
    - ``i % hold_every == hold_every // 2``: held until this consumer received
      ``hold_for`` more messages, then acknowledged;
    - the rest go into a window acknowledged in a random order once it holds ``window``
      messages (``window=1``: in delivery order).
    """

    rng: random.Random
    window: int = 8
    hold_every: int = 50
    hold_for: int = 60
    pinned_index: int | None = None
    _received: int = 0
    _window: list[Received] = field(default_factory=list)
    _held: list[tuple[int, Received]] = field(default_factory=list)  # (release at, message)

    def on_message(self, message: Received) -> list[Action]:
        self._received += 1
        actions = []
        if message.index == self.pinned_index:
            pass  # held until the failure
        elif self.pinned_index is not None and message.index > self.pinned_index:
            actions.append(Action(ACK, message))
        elif message.index % self.hold_every == self.hold_every // 2:
            self._held.append((self._received + self.hold_for, message))
        else:
            self._window.append(message)
        if len(self._window) >= self.window:
            self.rng.shuffle(self._window)
            actions += [Action(ACK, held) for held in self._window]
            self._window = []
        due = [held for release, held in self._held if release <= self._received]
        self._held = [(r, held) for r, held in self._held if r > self._received]
        actions += [Action(ACK, held) for held in due]
        return actions


@dataclass
class CumulativeAcks(AckPolicy):
    """A cumulative acknowledgement of every ``every``-th message received."""

    every: int = 10
    _received: int = 0

    def on_message(self, message: Received) -> list[Action]:
        self._received += 1
        if self._received % self.every == 0:
            return [Action(ACK_CUMULATIVE, message)]
        return []


@dataclass
class NackThenAck(AckPolicy):
    """Negatively acknowledge ``i % nack_every == nack_every // 2`` when first delivered;
    acknowledge everything else, and those when redelivered."""

    nack_every: int = 7

    def on_message(self, message: Received) -> list[Action]:
        first = message.redelivery_count == 0
        if first and message.index % self.nack_every == self.nack_every // 2:
            return [Action(NACK, message)]
        return [Action(ACK, message)]


@dataclass
class PartialAcks(AckPolicy):
    """The consumers on B before a failback: acknowledge about half of what they receive,
    out of order, and hold the rest unacknowledged until they move home.

    Messages whose index falls in an even pair (``(i // 2) % 2 == 0``: 0, 1, 4, 5, 8, 9,
    ...) are acknowledged, in shuffled windows of ``window``; the others never are. So
    B's subscription holds an acknowledged range for every pair, which only a sync of
    ranges carries back to A; whatever is left in the last window stays unacknowledged.
    """

    rng: random.Random
    window: int = 8
    _window: list[Received] = field(default_factory=list)

    @staticmethod
    def acknowledges(index: int) -> bool:
        return (index // 2) % 2 == 0

    def on_message(self, message: Received) -> list[Action]:
        if not self.acknowledges(message.index):
            return []
        self._window.append(message)
        if len(self._window) < self.window:
            return []
        self.rng.shuffle(self._window)
        actions = [Action(ACK, held) for held in self._window]
        self._window = []
        return actions


@dataclass(frozen=True)
class Scenario:
    name: str
    subscription_type: str
    consumers: int
    summary: str
    #: (consumer number, seed, target on A) -> the consumer's policy on A.
    policy_on_a: Callable[[int, int, int], AckPolicy]
    negative_ack_redelivery_delay_ms: int | None = None
    #: Messages are Avro records under an evolving schema (avro_records.py), decoded on B
    #: by their schema version.
    avro: bool = False


def _shared_out_of_order(consumer: int, seed: int, target: int) -> AckPolicy:
    return HoldingAcks(random.Random(seed * 1_000 + consumer), pinned_index=target // 2)


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario(
            "shared-out-of-order",
            SHARED,
            2,
            "Shared, 2 consumers: shuffled acks, some held a while, one held until the failure",
            _shared_out_of_order,
        ),
        Scenario(
            "key-shared",
            KEY_SHARED,
            2,
            "Key_Shared, 2 consumers: acks in delivery order, some held a while",
            lambda consumer, seed, target: HoldingAcks(random.Random(seed), window=1),
        ),
        Scenario(
            "exclusive-cumulative",
            EXCLUSIVE,
            1,
            "Exclusive, 1 consumer: a cumulative ack every 10 messages",
            lambda consumer, seed, target: CumulativeAcks(),
        ),
        Scenario(
            "failover",
            FAILOVER,
            2,
            "Failover, 2 consumers (one active): each message acked on receipt",
            lambda consumer, seed, target: AckEach(),
        ),
        Scenario(
            "with-nacks",
            SHARED,
            2,
            "Shared, 2 consumers: every 7th message nacked once, then acked when redelivered",
            lambda consumer, seed, target: NackThenAck(),
            negative_ack_redelivery_delay_ms=NACK_REDELIVERY_DELAY_MS,
        ),
        Scenario(
            "avro-evolving",
            SHARED,
            2,
            "as shared-out-of-order, on Avro records whose schema gains a field half-way;"
            " decoded on B by version",
            _shared_out_of_order,
            avro=True,
        ),
    )
}
