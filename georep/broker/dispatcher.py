"""Dispatchers: what moves entries from a subscription's cursor to its consumers.

One asyncio task per dispatcher runs rounds while they make progress and sleeps on an
event otherwise; anything that may let it make progress wakes it: new entries on the
topic, FLOW, an acknowledgement, a consumer joining or leaving, a redelivery request.
A round reads at most ``limits.dispatcher_read_entries_max`` entries, so one busy
subscription never holds the event loop for long.

Reads that move the cursor's read position (reads, rewinds, resets) happen under the
subscription's ``cursor_lock``, so a seek never interleaves with a read in flight. After
a read returns the dispatcher checks that what it read for is still true (the consumer is
still active, no rewind was asked meanwhile) and otherwise drops the entries: they are
read again after the rewind.

The kinds (one module each):

- ``single_active_dispatcher``: Exclusive and Failover, one active consumer at a time;
- ``shared_dispatcher``: Shared, round-robin over consumers with permits;
- ``key_shared_dispatcher``: Key_Shared, each key's hash owned by one consumer.

Each kind's module imports this one, and a subscription holds its dispatcher, so neither
this module nor the subscription imports the kinds: ``dispatcher_factory.new_dispatcher``
chooses the kind for a subscription type, and the topic hands it to every subscription
it makes (a :data:`DispatcherFactory`). A dispatcher sees its subscription as a
:class:`DispatcherSubscription`.
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Protocol

from georep import limits
from georep.broker.consumer import Consumer
from georep.broker.entry import Entry
from georep.broker.ports import SubscriptionCursor, TopicLog
from georep.domain.position import Position
from georep.domain.topic_name import TopicName
from georep.invariant import InvariantViolation, invariant

log = logging.getLogger(__name__)

#: Rounds run back to back before the dispatcher yields to the event loop once.
_ROUNDS_PER_YIELD = 4


class NamedTopic(Protocol):
    @property
    def name(self) -> TopicName: ...


class DispatcherSubscription(Protocol):
    """What a dispatcher needs of its subscription (``subscription.Subscription``)."""

    @property
    def name(self) -> str: ...

    @property
    def topic(self) -> NamedTopic: ...

    @property
    def ledger(self) -> TopicLog: ...

    @property
    def cursor(self) -> SubscriptionCursor: ...

    @property
    def cursor_lock(self) -> asyncio.Lock: ...

    @property
    def receives_markers(self) -> bool: ...

    def is_acknowledged(self, position: Position) -> bool: ...

    def deliverable(self, entries: list[Entry]) -> list[Entry]: ...

    def send(self, consumer: Consumer, entry: Entry) -> None: ...

    def count_redelivery(self, positions: list[Position]) -> None: ...

    def note_marker(self, position: Position) -> None: ...


class Dispatcher(ABC):
    def __init__(self, subscription: DispatcherSubscription) -> None:
        self.subscription = subscription
        self.consumers: list[Consumer] = []
        self._wakeup = asyncio.Event()
        self._closed = False
        self.stats = {"rounds": 0, "entries_read": 0, "read_errors": 0}
        self._task = asyncio.get_running_loop().create_task(self._run())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.subscription})"

    @property
    def cursor(self) -> SubscriptionCursor:
        return self.subscription.cursor

    # -- what the subscription calls --

    @abstractmethod
    def add_consumer(self, consumer: Consumer) -> None:
        """Attach ``consumer`` or raise a BrokerError (ConsumerBusy, ...)."""

    @abstractmethod
    def remove_consumer(self, consumer: Consumer) -> None:
        """Detach ``consumer``; what it held unacknowledged is delivered again."""

    @abstractmethod
    def redeliver(self, consumer: Consumer, positions: list[Position] | None) -> None:
        """Deliver again what ``consumer`` holds (all of it when ``positions`` is None)."""

    def acknowledged(self, positions: list[Position]) -> None:  # noqa: B027 - a hook
        """Entries acknowledged individually (a dispatcher holding them for replay drops them)."""

    def held(self) -> list[Position]:
        """Positions the dispatcher itself holds for (re)delivery (its replay queue)."""
        return []

    @abstractmethod
    def cursor_was_reset(self) -> None:
        """The cursor was reset (seek): forget positions held for redelivery."""

    def wake(self) -> None:
        self._wakeup.set()

    async def close(self) -> None:
        self._closed = True
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)

    # -- the loop --

    async def _run(self) -> None:
        while not self._closed:
            await self._wakeup.wait()
            self._wakeup.clear()
            try:
                rounds = 0
                while not self._closed and await self._round():
                    self.stats["rounds"] += 1
                    rounds += 1
                    if rounds % _ROUNDS_PER_YIELD == 0:
                        await asyncio.sleep(0)
            except asyncio.CancelledError:
                raise
            except InvariantViolation as error:
                asyncio.get_running_loop().call_exception_handler(
                    {"message": f"{self}: invariant violated", "exception": error}
                )
                raise
            except Exception as error:
                self.stats["read_errors"] += 1
                log.warning("%s: dispatch round failed: %s", self, error)
                await asyncio.sleep(limits.dispatcher_error_backoff_s)
                self.wake()

    @abstractmethod
    async def _round(self) -> bool:
        """Dispatch what can be dispatched now; True if another round may do more."""

    async def _read_new(self, count: int) -> list[Entry]:
        """Read up to ``count`` entries at the cursor's read position (which moves)."""
        invariant(count > 0, "read of no entries")
        async with self.subscription.cursor_lock:
            raw = await self.cursor.read_entries(count)
        self.stats["entries_read"] += len(raw)
        return [Entry.of(position, data) for position, data in raw]


#: Makes the dispatcher of a subscription for a subscription type
#: (``dispatcher_factory.new_dispatcher``).
DispatcherFactory = Callable[[DispatcherSubscription, int], Dispatcher]
