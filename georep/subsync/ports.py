"""What subscription sync needs of the local cluster, and how georep's own clusters give it.

A gateway syncs subscriptions on the cluster beside it through one :class:`SyncPort`:

- ``states``: every subscription's acknowledgement state on a topic partition;
- ``apply``: bring one subscription up to the state another cluster sent;
- ``changes``: which topics of a namespace had subscriptions change since the last
  call (``change_watch.py`` asks, one watch per namespace), so that an idle topic is never
  asked for its states;
- ``in_band``: whether markers may sit in the topic itself. A georep cluster shows them to
  the gateway's reader; a real Pulsar broker hides every marker from every reader, so
  beside real Pulsar the markers travel on a side topic (``pulsar_port.py``).

:class:`GeorepPort` is the georep cluster's answer: its own admin paths
(``/admin/georep/v1/.../sync-state``, ``.../subscription/{s}/sync``, and the namespace's
change feed ``/admin/georep/v1/namespaces/{t}/{ns}/sync-changes``, a long poll that the
broker answers as acknowledgements happen: ``broker/change_feed.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from georep import limits
from georep.client.admin import ClusterAdminClient
from georep.position import Position
from georep.subsync.core import Apply, SubscriptionState
from georep.topic_name import TopicName


@dataclass(frozen=True, slots=True)
class Applied:
    """What the cluster said after an apply: its mark-delete position (None: not said)
    and how many acknowledged ranges the subscription holds (or acknowledgements sent)."""

    mark_delete: Position | None
    ranges: int


#: What a port remembers between two ``changes`` of one namespace (its own business).
ChangeMark = object


@dataclass(frozen=True, slots=True)
class Changed:
    """An answer of ``SyncPort.changes``: where to go on from, and the topics (full
    names) whose subscriptions changed; None: any may have (read them all once)."""

    mark: ChangeMark
    topics: frozenset[str] | None


class SyncPort(Protocol):
    in_band: bool

    async def states(self, topic: TopicName) -> dict[str, SubscriptionState]: ...

    async def apply(self, topic: TopicName, action: Apply) -> Applied: ...

    async def changes(self, namespace: str, mark: ChangeMark | None) -> Changed:
        """Waits for the next changes in ``namespace`` after ``mark`` (None: the first
        call, answered at once with every topic). LinkError when the cluster could not
        say: changes may have been missed, so the next call starts again from None."""
        ...


class GeorepPort:
    """A georep cluster: state and apply over its own admin paths, markers in band."""

    in_band = True

    def __init__(self, admin: ClusterAdminClient) -> None:
        self._admin = admin

    async def changes(self, namespace: str, mark: ChangeMark | None) -> Changed:
        epoch, after = mark if isinstance(mark, tuple) else (None, 0)
        answer = await self._admin.sync_changes(
            namespace, epoch=epoch, after=after, wait_s=limits.sync_change_wait_s
        )
        mark = (answer["epoch"], answer["sequence"])
        return Changed(mark, None if answer["reset"] else frozenset(answer["topics"]))

    async def states(self, topic: TopicName) -> dict[str, SubscriptionState]:
        answer = await self._admin.sync_state(topic)
        return {
            name: SubscriptionState(
                mark_delete=state.mark_delete,
                ranges=state.ranges,
                batches=state.batches,
                consumers=state.consumers,
                consumers_attached=state.consumers_attached,
                replicated=state.replicated,
            )
            for name, state in answer["subscriptions"].items()
        }

    async def apply(self, topic: TopicName, action: Apply) -> Applied:
        answer = await self._admin.sync_subscription(
            topic,
            action.subscription,
            mark_delete=action.mark_delete,
            ranges=action.ranges,
            batches=action.batches,
            replicated=True,
        )
        mark_delete = answer.get("markDelete")
        where = Position(mark_delete["ledgerId"], mark_delete["entryId"]) if mark_delete else None
        return Applied(where, answer.get("rangesCount", 0))
