"""Which topics' subscriptions changed, per namespace: the broker's push to subscription sync.

Subscription sync must learn that a subscription moved without asking every topic
partition again and again (at 10,000 idle partitions that is thousands of requests a
second, all answered "nothing changed"). The broker sees every change as it happens, so
it keeps, per namespace, a counter and the topics whose subscriptions changed:

- :meth:`ChangeFeed.note` is called on every change of an application subscription:
  its cursor's state (acknowledgements, mark-delete, reset, batch members, creation,
  deletion: ``ManagedLedger.cursor_listener``) and its consumers coming and going
  (a subscription with consumers is a sync source, without them a standby). The
  gateway's own subscriptions (``georep.*``), the broker's (``pulsar.*``) and readers are
  never noted: a replicator acknowledging each message it copied would be a change per
  message, and it is no subscription anybody syncs;
- :meth:`ChangeFeed.changes` is a long poll: the topics changed after sequence ``after``,
  or, when there are none yet, the first ones to change within ``wait_s``, gathered for
  ``limits.change_feed_gather_s`` more so that a burst of acknowledgements answers once.

Worked example, namespace ``t/ns``: ``note("persistent://t/ns/a")`` (sequence 1),
``note(".../b")`` (2), ``note(".../a")`` (3). ``changes("t/ns", epoch, after=0)`` answers
sequence 3 and topics ``[a, b]`` (a at 3, b at 2); ``changes(after=2)`` answers ``[a]``;
``changes(after=3)`` waits.

What is kept is bounded: at most ``limits.change_feed_topics_max`` topics per namespace
(the oldest changes go first, and ``floor`` rises past them). A reader whose ``after``
is below the floor, or who names another ``epoch`` (this broker restarted: sequences start
again), is told ``reset``: it must read every topic of the namespace once, then follow
the feed from the sequence it was given.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field

from georep import limits
from georep.runtime.awaiting import within


@dataclass(frozen=True, slots=True)
class Changes:
    """An answer of :meth:`ChangeFeed.changes`."""

    epoch: str
    #: The namespace's newest sequence: the ``after`` of the next request.
    sequence: int
    #: Topics (full names) changed after the request's ``after``, oldest change first.
    topics: tuple[str, ...]
    #: The reader missed changes (another epoch, or ``after`` below the floor): read
    #: every topic of the namespace once.
    reset: bool


@dataclass(slots=True)
class _Namespace:
    sequence: int = 0
    #: Below it, changes were forgotten (``limits.change_feed_topics_max``).
    floor: int = 0
    #: topic -> the sequence of its latest change; insertion order is change order.
    changed: dict[str, int] = field(default_factory=dict)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)


class ChangeFeed:
    def __init__(self, *, epoch: str | None = None) -> None:
        #: Names this broker's run: sequences mean nothing across restarts.
        self.epoch = epoch or uuid.uuid4().hex
        self._namespaces: dict[str, _Namespace] = {}
        self.stats = {"notes": 0, "requests": 0, "resets": 0, "forgotten": 0}

    def note(self, topic: str) -> None:
        """``topic`` (a full topic name) had a subscription change."""
        namespace = _namespace_of(topic)
        state = self._namespaces.get(namespace)
        if state is None:
            state = self._namespaces[namespace] = _Namespace()
        state.sequence += 1
        state.changed.pop(topic, None)
        state.changed[topic] = state.sequence
        if len(state.changed) > limits.change_feed_topics_max:
            oldest = next(iter(state.changed))
            state.floor = state.changed.pop(oldest)
            self.stats["forgotten"] += 1
        self.stats["notes"] += 1
        state.arrived.set()

    async def changes(
        self, namespace: str, epoch: str | None, after: int, wait_s: float
    ) -> Changes:
        """The topics of ``namespace`` changed after ``after`` (see the module docstring);
        waits up to ``wait_s`` for the first when there is none."""
        self.stats["requests"] += 1
        state = self._namespaces.get(namespace)
        if state is None:
            state = self._namespaces[namespace] = _Namespace()
        if epoch != self.epoch or after < state.floor or after > state.sequence:
            self.stats["resets"] += 1
            return Changes(self.epoch, state.sequence, (), reset=True)
        if state.sequence == after and wait_s > 0:
            state.arrived.clear()
            try:
                await within(state.arrived.wait(), wait_s)
            except TimeoutError:
                return Changes(self.epoch, state.sequence, (), reset=False)
            await asyncio.sleep(limits.change_feed_gather_s)
        if after < state.floor:  # forgotten while it waited
            self.stats["resets"] += 1
            return Changes(self.epoch, state.sequence, (), reset=True)
        topics = tuple(topic for topic, sequence in state.changed.items() if sequence > after)
        return Changes(self.epoch, state.sequence, topics, reset=False)

    def namespaces(self) -> int:
        return len(self._namespaces)


def _namespace_of(topic: str) -> str:
    """``persistent://t/ns/x`` -> ``t/ns``."""
    _, _, rest = topic.partition("://")
    tenant, _, rest = rest.partition("/")
    namespace, _, _ = rest.partition("/")
    return f"{tenant}/{namespace}"
