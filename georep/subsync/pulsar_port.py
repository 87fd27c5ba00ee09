"""Subscription sync beside a real Apache Pulsar cluster, through its public interfaces.

A real Pulsar broker offers none of georep's sync paths, and hides every marker from
every reader. So, beside real Pulsar (``kind = "pulsar"`` in the gateway's ``[local]``
table; docs/SUBSYNC.md "Beside real Pulsar"):

- **State** is read over admin v2: ``internalStats`` gives each cursor's
  ``markDeletePosition`` and ``individuallyDeletedMessages``; ``stats`` gives each
  subscription's consumers and Pulsar's ``isReplicated`` flag. Cursors of Pulsar's own
  replicators (``pulsar.*``), the gateway's own (``georep.*``) and readers (no
  subscription in ``stats``) are left out, and so is the gateway's acknowledger among
  the consumers.
- **Apply** acknowledges exact entries with a consumer of the gateway's own
  (:data:`ACKNOWLEDGER`): Shared, asking for no messages (receiver queue 0, so the
  broker dispatches nothing to it), attached only for the apply. It acknowledges each
  entry of the plan's ranges that the cursor does not hold yet, then closes: the broker
  handles the acknowledgements before the close. Pulsar 4.0 has no admin call that
  acknowledges given entries, and moving a cursor with ``resetcursor`` would disturb
  the application's consumers.
- **Markers** go on the namespace's side topic (:func:`side_topic`) as ordinary
  messages: payload the marker, properties the topic partition, the kind and the source
  cluster. Pulsar's geo-replication (or the gateway's replicators) carry it like any
  topic of the namespace.

What cannot be synced here, and why: partially acknowledged batches (``internalStats``
does not show batch indexes, so a batch counts as acknowledged only when all of it is,
and a failover redelivers the rest of it), and a subscription whose application holds
it Exclusive or Failover on this cluster (the acknowledger cannot attach: it is the
source now, and what the other cluster sent is dropped).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging

from georep import limits
from georep.broker.topic_name import TopicName
from georep.client.admin import ClusterAdminClient
from georep.client.consumer import InitialPosition, SubType
from georep.client.errors import LinkError, ServerError
from georep.client.link import PulsarLink
from georep.position import Position
from georep.protocol import pulsar_wire_pb2 as wire
from georep.pulsar.cursor_text import acknowledged, parse_cursor
from georep.subsync.core import Apply, SubscriptionState
from georep.subsync.ports import Applied

log = logging.getLogger(__name__)

#: The consumer name of the gateway's acknowledger (left out of consumer counts).
ACKNOWLEDGER = "georep-acknowledger"
#: The local name of each namespace's side topic.
SIDE_TOPIC = "georep-subscription-sync"
#: Properties of a side message: the topic partition it is about, the marker kind, the
#: cluster whose gateway wrote it.
TOPIC_PROPERTY = "georep.sync.topic"
KIND_PROPERTY = "georep.sync.kind"
SOURCE_PROPERTY = "georep.sync.source"
#: Subscriptions that are never an application's.
_NOT_APPLICATIONS = ("georep.", "pulsar.")


def side_topic(topic: TopicName) -> str:
    """The side topic of ``topic``'s namespace.

    >>> side_topic(TopicName.parse("persistent://t/ns/orders-partition-2"))
    'persistent://t/ns/georep-subscription-sync'
    """
    return f"persistent://{topic.namespace}/{SIDE_TOPIC}"


def is_side_topic(topic: str) -> bool:
    return topic.rpartition("/")[2] == SIDE_TOPIC


def side_producer_name(local_cluster: str, topic: str) -> str:
    """One producer per synced topic partition writes on the side topic; names must
    differ, and stay short whatever the topic's length."""
    digest = hashlib.sha256(topic.encode()).hexdigest()[:16]
    return f"georep.sync.{local_cluster}.{digest}"


class SideMessageError(ValueError):
    """A side message without the properties of one."""


def side_properties(metadata: wire.MessageMetadata) -> tuple[str, int, str]:
    """(topic partition, marker kind, source cluster) of a side message."""
    found = {kv.key: kv.value for kv in metadata.properties}
    try:
        return found[TOPIC_PROPERTY], int(found[KIND_PROPERTY]), found[SOURCE_PROPERTY]
    except (KeyError, ValueError):
        raise SideMessageError(f"not a side message: {sorted(found)}") from None


def pulsar_states(internal: dict, stats: dict) -> dict[str, SubscriptionState]:
    """Every application subscription's state from ``internalStats`` and ``stats``.

    >>> internal = {"cursors": {
    ...     "s": {"markDeletePosition": "3:4", "individuallyDeletedMessages": "[(3:5..3:7]]"},
    ...     "pulsar.repl.B": {"markDeletePosition": "3:9", "individuallyDeletedMessages": "[]"}}}
    >>> stats = {"subscriptions": {"s": {"isReplicated": True, "consumers": [
    ...     {"consumerName": "app"}, {"consumerName": "georep-acknowledger"}]}}}
    >>> state = pulsar_states(internal, stats)["s"]
    >>> state.mark_delete, state.ranges, state.consumers, state.replicated
    (Position(ledger_id=3, entry_id=4), ((Position(ledger_id=3, entry_id=6), \
Position(ledger_id=3, entry_id=7)),), 1, True)
    """
    subscriptions = stats.get("subscriptions") or {}
    out: dict[str, SubscriptionState] = {}
    for name, cursor in (internal.get("cursors") or {}).items():
        subscription = subscriptions.get(name)
        if subscription is None or name.startswith(_NOT_APPLICATIONS):
            continue
        try:
            mark_delete, ranges = parse_cursor(cursor)
        except (KeyError, TypeError, ValueError) as error:
            log.warning("cursor %s: unreadable state (%s); left out", name, error)
            continue
        consumers = [
            c for c in subscription.get("consumers") or () if c.get("consumerName") != ACKNOWLEDGER
        ]
        out[name] = SubscriptionState(
            mark_delete=mark_delete,
            # Closed ranges, as the sync core keeps them: the entry after the lower end.
            ranges=tuple(
                (Position(lower.ledger_id, lower.entry_id + 1), upper) for lower, upper in ranges
            ),
            consumers=len(consumers),
            replicated=bool(subscription.get("isReplicated")),
        )
    return out


def entries_to_acknowledge(action: Apply, cursor: dict | None) -> list[Position]:
    """The entries of ``action``'s ranges that ``cursor`` (internalStats; None: no such
    subscription yet) does not hold, lowest first, at most
    ``limits.sync_pulsar_apply_entries_max``. Each range lies in one ledger (the sync
    core maps ranges run by run); one that does not is skipped.

    >>> action = Apply("s", "A", ranges=[((3, 2), (3, 6)), ((5, 0), (5, 1))])
    >>> cursor = {"markDeletePosition": "3:2", "individuallyDeletedMessages": "[(3:3..3:5]]"}
    >>> [str(p) for p in entries_to_acknowledge(action, cursor)]
    ['3:3', '3:6', '5:0', '5:1']
    """
    mark_delete, ranges = parse_cursor(cursor) if cursor is not None else (Position(-1, -1), [])
    out: list[Position] = []
    for first, last in action.ranges:
        if first[0] != last[0]:
            log.warning("range %s..%s spans ledgers; not applied", first, last)
            continue
        for entry_id in range(first[1], last[1] + 1):
            where = Position(first[0], entry_id)
            if not acknowledged(where, mark_delete, ranges):
                out.append(where)
                if len(out) >= limits.sync_pulsar_apply_entries_max:
                    return out
    return out


class ApplyRefused(LinkError):
    """The subscription is held by the application's own Exclusive or Failover consumer
    here: this cluster is the source now; what another cluster sent is dropped."""

    retriable = False


class PulsarPort:
    """A real Pulsar cluster: state over admin v2, apply by acknowledging, markers aside."""

    in_band = False

    def __init__(self, admin: ClusterAdminClient, link: PulsarLink) -> None:
        self._admin = admin
        self._link = link
        self.partial_batches_skipped = 0

    async def states(self, topic: TopicName) -> dict[str, SubscriptionState]:
        internal, stats = await asyncio.gather(
            self._admin.internal_stats(topic), self._admin.topic_stats(topic)
        )
        return pulsar_states(internal, stats)

    async def apply(self, topic: TopicName, action: Apply) -> Applied:
        if action.batches:
            self.partial_batches_skipped += len(action.batches)
        internal = await self._admin.internal_stats(topic)
        cursor = (internal.get("cursors") or {}).get(action.subscription)
        entries = entries_to_acknowledge(action, cursor)
        if not entries:
            return Applied(None, 0)
        try:
            consumer = await self._link.subscribe(
                str(topic),
                action.subscription,
                sub_type=SubType.SHARED,
                initial_position=InitialPosition.EARLIEST,
                receiver_queue=0,
                consumer_name=ACKNOWLEDGER,
            )
        except ServerError as error:
            if error.code == wire.CONSUMER_BUSY:
                raise ApplyRefused(
                    f"{topic} {action.subscription}: held by its application here: {error}"
                ) from None
            raise
        try:
            consumer.ack_individual(entries)
        finally:
            await consumer.close()  # answered after the broker took the acknowledgements
        return Applied(None, len(entries))
