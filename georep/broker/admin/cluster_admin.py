"""What the admin REST asks of the cluster: the ``ClusterAdmin`` protocol.

The admin app keeps tenants and namespaces itself (in the metadata store); everything about
topics and subscriptions it asks the cluster through this protocol. The broker's cluster
implements it; the app never reaches into the broker otherwise.

Contract, for every method:

- names arrive already validated: a ``namespace`` is ``"tenant/name"`` of an existing
  namespace, a ``topic`` a :class:`~georep.domain.topic_name.TopicName`, a ``subscription``
  a non-empty name of at most ``limits.subscription_name_chars_max`` printable characters
  without ``/``;
- a position is ``(ledger_id, entry_id)``; `Position.EARLIEST` and `Position.LATEST` are the
  client's ``MessageId.earliest`` / ``MessageId.latest`` (``georep/domain/position.py``);
- refusals are the typed errors below, which the app answers with the status in
  parentheses: :class:`NotFound` (404) for a topic or subscription that does not exist,
  :class:`Conflict` (409) for one that already exists or is busy (a subscription with
  connected consumers), :class:`InvalidArgument` (400) for a request the cluster cannot
  honour as asked (a position on no ledger of the topic), :class:`Unavailable` (503) for
  "try again" (the topic is loading or fenced). The broker's own ``BrokerError``\\ s are
  also accepted and mapped (see ``middleware.py``). Anything else is a bug: 500, logged.
- returned documents use Pulsar's JSON field names; the TypedDicts below list the fields
  the app requires (it checks them on the way out; see ``shapes.py``). More fields are
  welcome and passed through.

Worked example: ``POST /admin/v2/persistent/public/default/orders/subscription/s/resetcursor``
with ``{"ledgerId": 7, "entryId": 12}`` becomes ``await cluster.reset_cursor(TopicName(
public, default, orders), "s", (7, 12))``; a :class:`NotFound` from it answers 404
``{"reason": "..."}`` with the error's text.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar, NotRequired, Protocol, TypedDict, runtime_checkable

from georep.domain.position import Position
from georep.domain.topic_name import TopicName
from georep.rest.errors import RestError


# --- errors ---------------------------------------------------------------------------
class AdminError(RestError):
    """Base of the errors a ``ClusterAdmin`` refuses a request with; ``status`` is the
    HTTP status the app answers."""

    status: ClassVar[int] = 500


class InvalidArgument(AdminError):
    """The request is malformed or asks for something impossible (bad name, bad JSON,
    a field out of range)."""

    status = 400


class NotFound(AdminError):
    """The tenant, namespace, topic or subscription does not exist."""

    status = 404


class Conflict(AdminError):
    """The resource already exists, is not empty, is busy, or changed concurrently."""

    status = 409


class Unavailable(AdminError):
    """The cluster cannot serve this now; the client may retry."""

    status = 503


# --- documents returned ---------------------------------------------------------------
class ConsumerStats(TypedDict):
    consumerName: str
    msgRateOut: float
    msgThroughputOut: float
    availablePermits: int
    unackedMessages: int


class SubscriptionStats(TypedDict):
    #: Messages not yet acknowledged (entries past the mark-delete position, less the
    #: individually acknowledged ones).
    msgBacklog: int
    #: ``Exclusive``, ``Shared``, ``Failover`` or ``Key_Shared``.
    type: str
    consumers: list[ConsumerStats]
    msgRateOut: float
    msgThroughputOut: float
    #: Whether the subscription is replicated (cursor property ``georep.replicated``).
    isReplicated: NotRequired[bool]


class TopicStats(TypedDict):
    msgRateIn: float
    msgThroughputIn: float
    msgRateOut: float
    msgThroughputOut: float
    averageMsgSize: float
    #: Bytes of the topic's ledgers.
    storageSize: int
    #: Bytes not yet acknowledged by the slowest subscription.
    backlogSize: int
    publishers: list[dict[str, object]]
    subscriptions: dict[str, SubscriptionStats]


class LedgerInfo(TypedDict):
    ledgerId: int
    entries: int
    size: int


class CursorStats(TypedDict):
    #: ``"L:E"`` (``str(position)``).
    markDeletePosition: str
    readPosition: str
    #: ``"[(L:E..L:E], ...]"`` (:func:`format_ranges`).
    individuallyDeletedMessages: str
    messagesConsumedCounter: int
    properties: NotRequired[dict[str, int]]


class PersistentTopicInternalStats(TypedDict):
    entriesAddedCounter: int
    numberOfEntries: int
    totalSize: int
    currentLedgerEntries: int
    currentLedgerSize: int
    #: ``"L:E"`` of the last entry written.
    lastConfirmedEntry: str
    #: The managed ledger's state, e.g. ``LedgerOpened``.
    state: str
    ledgers: list[LedgerInfo]
    cursors: dict[str, CursorStats]


class MessageIdDocument(TypedDict):
    ledgerId: int
    entryId: int
    #: The partition's index, -1 for a non-partitioned topic.
    partitionIndex: int


class PositionDocument(TypedDict):
    ledgerId: int
    entryId: int


class RangeDocument(TypedDict):
    """A closed range: both ends acknowledged, and every entry between them."""

    first: PositionDocument
    last: PositionDocument


class BatchDocument(TypedDict):
    """A partially acknowledged batch entry."""

    ledgerId: int
    entryId: int
    #: Messages in the batch (its metadata's ``num_messages_in_batch``).
    batchSize: int
    #: Indexes of the members acknowledged, ascending.
    ackedIndexes: list[int]


class SubscriptionSyncState(TypedDict):
    markDelete: PositionDocument
    #: Acknowledged above ``markDelete``: closed ranges whose ends are entries, sorted,
    #: joined where no entry lies between two.
    ranges: list[RangeDocument]
    batches: list[BatchDocument]
    #: Consumers connected now.
    consumers: int
    #: Consumers ever attached since the topic was loaded: a reader of the state sees
    #: that consumers came (and maybe went) since its previous read.
    consumersAttached: NotRequired[int]
    #: Whether the subscription is replicated (cursor property ``georep.replicated``).
    replicated: bool
    #: ``Exclusive``, ``Shared``, ``Failover`` or ``Key_Shared``; null when not loaded.
    type: str | None
    #: More ranges / batches than reported (``limits.sync_state_*_count_max``).
    rangesTruncated: NotRequired[bool]
    batchesTruncated: NotRequired[bool]


class SyncState(TypedDict):
    #: The topic's last entry; null when it holds none.
    lastPosition: PositionDocument | None
    #: Every subscription but the gateway's (``georep.*``) and the broker's (``pulsar.*``).
    subscriptions: dict[str, SubscriptionSyncState]


class SyncChanges(TypedDict):
    #: Names this broker's run; a request naming another is answered ``reset``.
    epoch: str
    #: The namespace's newest change: the ``after`` of the next request.
    sequence: int
    #: Topics whose application subscriptions changed after ``after``, oldest first.
    topics: list[str]
    #: Changes were missed: read every topic of the namespace once.
    reset: bool


class SubscriptionSyncResult(TypedDict):
    #: The mark-delete position after the sync (and after stepping over markers).
    markDelete: PositionDocument
    #: Acknowledged ranges the subscription holds above it after the sync.
    rangesCount: int
    #: Whether the sync created the subscription.
    created: bool


#: What the document methods below return: a plain dict, checked against the TypedDict
#: their docstring names before it is sent (``shapes.py``); further fields pass through.
Document = dict[str, Any]


# --- the protocol ---------------------------------------------------------------------
@runtime_checkable
class ClusterAdmin(Protocol):
    """Topic and subscription administration, implemented by the broker's cluster."""

    async def list_topics(self, namespace: str) -> list[str]:
        """Full names (``persistent://t/ns/x``) of the namespace's topics: non-partitioned
        topics and each partition (``...-partition-N``) of partitioned ones, as Pulsar's
        ``GET /admin/v2/persistent/{tenant}/{namespace}`` lists them."""
        ...

    async def namespace_deleted(self, namespace: str) -> None:
        """The admin has just deleted ``namespace`` (it had no topics) from the metadata
        store: forget any cached word that it exists (``Namespaces.forget``), so that new
        topics in it are refused at once."""
        ...

    async def namespace_changed(self, namespace: str) -> None:
        """The admin has just changed ``namespace``'s policies in the metadata store: a
        topic loaded from now on reads them afresh (``Namespaces.forget``); the topics
        loaded already take them at the broker's next policy pass."""
        ...

    async def create_partitioned_topic(self, topic: TopicName, partitions: int) -> None:
        """Create ``topic`` with ``partitions`` (1..``limits.partitions_count_max``)
        partitions. Conflict when a topic (partitioned or not) of that name exists."""
        ...

    async def partitioned_metadata(self, topic: TopicName) -> int:
        """Partitions of ``topic``: N for a partitioned topic, 0 for an existing
        non-partitioned one; NotFound when there is no such topic."""
        ...

    async def delete_topic(self, topic: TopicName) -> None:
        """Delete a non-partitioned topic, or a partitioned topic with all its partitions,
        its subscriptions and its data. NotFound when absent; Conflict while producers or
        consumers are connected."""
        ...

    async def topic_stats(self, topic: TopicName) -> Document:
        """:class:`TopicStats` of a non-partitioned topic or one partition; NotFound
        otherwise."""
        ...

    async def internal_stats(self, topic: TopicName) -> Document:
        """The managed ledger and cursors of a non-partitioned topic or one partition:
        :class:`PersistentTopicInternalStats`."""
        ...

    async def last_message_id(self, topic: TopicName) -> Document:
        """Position of the last entry written (``entryId`` -1 and the current ledger's id
        when the topic is empty): :class:`MessageIdDocument`."""
        ...

    async def create_subscription(
        self, topic: TopicName, subscription: str, position: Position | None
    ) -> None:
        """A durable subscription whose first message delivered is the one at ``position``
        (as Pulsar's create-subscription); at `Position.LATEST` when None. For a partitioned
        topic's base name: on every partition. Conflict when it exists; NotFound when the
        topic does not."""
        ...

    async def delete_subscription(self, topic: TopicName, subscription: str) -> None:
        """NotFound when absent; Conflict while consumers are connected."""
        ...

    async def reset_cursor(self, topic: TopicName, subscription: str, position: Position) -> None:
        """Move the subscription so that the next message delivered is the one at
        ``position`` (`Position.EARLIEST` / `Position.LATEST` allowed); acknowledgements above
        it are forgotten, connected consumers are redelivered from there."""
        ...

    async def reset_cursor_by_time(
        self, topic: TopicName, subscription: str, timestamp_ms: int
    ) -> None:
        """Like :meth:`reset_cursor`, to the first message published at or after
        ``timestamp_ms`` (milliseconds since the epoch)."""
        ...

    async def skip(self, topic: TopicName, subscription: str, messages: int) -> None:
        """Acknowledge the next ``messages`` unacknowledged messages of the subscription
        (Pulsar's ``skip``)."""
        ...

    async def acknowledge(
        self, topic: TopicName, subscription: str, positions: Sequence[Position]
    ) -> None:
        """Individually acknowledge each of ``positions`` (sorted, distinct, at most
        ``limits.acknowledge_positions_count_max``), advancing the mark-delete position
        over any contiguous prefix. Positions already acknowledged are no-ops;
        InvalidArgument for a position past the last entry."""
        ...

    async def sync_state(self, topic: TopicName) -> Document:
        """The acknowledgement state of every subscription of ``topic`` (a
        non-partitioned topic or one partition, loaded if need be) as its consumers
        would see it, unpersisted acknowledgements included; NotFound otherwise:
        :class:`SyncState`."""
        ...

    async def sync_changes(
        self, namespace: str, *, epoch: str | None, after: int, wait_s: float
    ) -> Document:
        """The topics of ``namespace`` whose application subscriptions changed after
        sequence ``after`` of run ``epoch``, waiting up to ``wait_s`` for the first
        (``broker/change_feed.py``): :class:`SyncChanges`."""
        ...

    async def sync_subscription(
        self,
        topic: TopicName,
        subscription: str,
        *,
        mark_delete: Position | None,
        ranges: Sequence[tuple[Position, Position]],
        batches: Mapping[Position, frozenset[int]],
        replicated: bool,
    ) -> Document:
        """Bring ``subscription`` (created when missing, durable) up to a synced state
        without disconnecting its consumers: the mark-delete moves to ``mark_delete``
        only forward; every entry inside the closed ``ranges`` (sorted, disjoint) and
        the given members of ``batches`` (entry -> acknowledged indexes) are
        acknowledged; positions past the last entry or not entries are ignored;
        ``replicated`` sets the replicated flag. InvalidArgument, with nothing changed,
        for a batch index at or past its batch's size or a ``georep.*`` / ``pulsar.*``
        name; NotFound for a missing topic. A :class:`SubscriptionSyncResult`."""
        ...


# --- formatting helpers for implementations -------------------------------------------
def format_ranges(ranges: Iterable[tuple[Position, Position]]) -> str:
    """Pulsar's ``individuallyDeletedMessages``: each ``(lower, upper)`` range is open below
    and closed above. Example: entries 3:6, 3:7 and 3:10 acknowledged above a mark-delete
    position of 3:4 read ``"[(3:5..3:7], (3:9..3:10]]"``; no ranges read ``"[]"``."""
    parts = [f"({lower}..{upper}]" for lower, upper in ranges]
    return "[" + ", ".join(parts) + "]"
