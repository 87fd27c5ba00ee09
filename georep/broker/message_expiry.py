"""Message expiry (TTL): every subscription's MDP moves past messages older than the TTL.

As Pulsar's expiry monitor does, periodically (the service runs one pass over every
loaded topic each ``message_expiry_interval_s``) and with bounded work: a pass reads the
topic from just after the lowest mark-delete position of its subscriptions, at most
``limits.message_expiry_entries_per_pass_max`` entries (``topic_scan_read_entries_max``
per read), and stops at the first entry published at or after ``now - TTL``. The last
entry before that is the *horizon*: every subscription whose MDP is below it is
mark-deleted up to it, so the expired messages are never delivered (the dispatchers skip
what is acknowledged) and drop out of the backlog. A longer expired backlog is expired
over several passes.

"Published" is the producer's ``publish_time`` in the entry's metadata. The scan stops
at the first unexpired entry even if later ones are older (producers with skewed clocks):
nothing younger than the TTL is ever expired. An entry whose metadata does not parse
stops the scan too.

Which subscriptions: every subscription of the topic, durable or a reader's, with
consumers or without, loaded or known only as a cursor; never the broker's own cursors
(``pulsar.dedup``). A loaded subscription expires through the same path as a cumulative
acknowledgement (``Subscription.expire_through``), so what its consumers hold of the
expired messages stops counting against them.

Worked example, TTL 60 s at 12:00:00: subscription a at MDP (5,3), b at (5,6); entries
(5,4)..(5,9) published at 11:58, 11:58, 11:58:30, 11:59:30, 11:59:45, 12:00. The scan
starts at (5,4), stops at (5,7) (11:59:30 is not older than 11:59:00): horizon (5,6). a
moves to (5,6); b is there already.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Protocol

from georep import limits
from georep.broker.entry import parse_metadata
from georep.broker.ports import SubscriptionCursor, TopicLog
from georep.domain.position import Position
from georep.domain.topic_name import TopicName
from georep.storage.errors import StorageError

log = logging.getLogger(__name__)


class ExpiringSubscription(Protocol):
    """What expiry needs of a loaded subscription (``subscription.Subscription``)."""

    @property
    def cursor(self) -> SubscriptionCursor: ...

    def expire_through(self, position: Position) -> None: ...


class ExpiringTopic(Protocol):
    """What expiry needs of its topic (``topic.PersistentTopic``, which runs the passes
    and so sits above this module)."""

    @property
    def name(self) -> TopicName: ...

    @property
    def ledger(self) -> TopicLog: ...

    @property
    def subscriptions(self) -> Mapping[str, ExpiringSubscription]: ...

    def subscription_names(self) -> list[str]: ...


class MessageExpiryMonitor:
    """One per topic; :meth:`expire` runs one pass."""

    def __init__(
        self,
        topic: ExpiringTopic,
        *,
        entries_per_pass_max: int = limits.message_expiry_entries_per_pass_max,
    ) -> None:
        self.topic = topic
        self.entries_per_pass_max = entries_per_pass_max
        self.stats = {"passes": 0, "entries_read": 0, "subscriptions_expired": 0}

    async def expire(self, ttl_s: int, now_ms: int) -> Position | None:
        """One pass with ``ttl_s`` seconds at ``now_ms`` (ms since the epoch); returns
        the horizon (None when nothing is expired)."""
        self.stats["passes"] += 1
        topic = self.topic
        ledger = topic.ledger
        targets: dict[str, tuple[SubscriptionCursor, ExpiringSubscription | None]] = {
            name: (ledger.cursors[name], None) for name in topic.subscription_names()
        }
        for name, loaded in list(topic.subscriptions.items()):
            targets[name] = (loaded.cursor, loaded)
        if not targets:
            return None
        lowest = min(cursor.mark_delete_position for cursor, _ in targets.values())
        horizon = await self._horizon(lowest, now_ms - ttl_s * 1000)
        if horizon is None:
            return None
        for name, (cursor, subscription) in targets.items():
            if cursor.mark_delete_position >= horizon:
                continue
            try:
                if subscription is not None:
                    subscription.expire_through(horizon)
                else:
                    await cursor.mark_delete(horizon)
            except StorageError as error:  # deleted or closed meanwhile; next pass
                log.info("topic %s: expiring %r: %s", topic.name, name, error)
                continue
            self.stats["subscriptions_expired"] += 1
        log.debug("topic %s: messages through %s expired (TTL %d s)", topic.name, horizon, ttl_s)
        return horizon

    async def _horizon(self, mark_delete: Position, published_before_ms: int) -> Position | None:
        """The last entry of the expired run that follows ``mark_delete``."""
        ledger = self.topic.ledger
        horizon = None
        position = ledger.next_position(mark_delete)
        read = 0
        while read < self.entries_per_pass_max:
            wanted = min(limits.topic_scan_read_entries_max, self.entries_per_pass_max - read)
            entries = await ledger.read(position, wanted)
            read += len(entries)
            self.stats["entries_read"] += len(entries)
            for entry_position, data in entries:
                metadata = parse_metadata(data)
                if metadata is None or metadata.publish_time >= published_before_ms:
                    return horizon
                horizon = entry_position
            if len(entries) < wanted:
                break  # the end of the log
            position = ledger.next_position(entries[-1][0])
        return horizon
