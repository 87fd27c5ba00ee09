"""Which subscriptions each synced topic partition syncs: the stored subscription-sync
policies (``gateway/meta/subscription_sync_policies.py``, changed over the gateway's REST)
over the ``[subscription_sync]`` table (``subsync/settings.py``).

Precedence, first found wins: a policy on the topic partition, on its partitioned
topic, on its namespace; else the configuration's table for the namespace, else its top
table. A policy chooses the subscriptions only; the mode is always the configuration's.

Built once per change of the stored policies (the manager reads them all in one query a
discovery pass, and builds a new :class:`SyncChoices` only when they differ), and asked
once per topic partition by dictionary lookups: at 10,000 partitions no partition costs a
query or a pattern compiled. Example: a namespace policy ``flagged`` + ``orders-.*`` on
``shop/eu`` and a topic policy ``flagged`` (no pattern) on ``persistent://shop/eu/audit``
give ``shop/eu/audit-partition-3`` the flag alone and every other topic of ``shop/eu``
the flag or the pattern.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Iterable

from georep.domain.names import InvalidName, check_subscription_pattern
from georep.domain.topic_name import InvalidTopicName, TopicName
from georep.gateway.meta.subscription_sync_policies import SubscriptionSyncPolicyRecord
from georep.subsync import NamespaceSync, Selection, SyncSettings

log = logging.getLogger(__name__)

_Choice = tuple[Selection, re.Pattern[str] | None]


class SyncChoices:
    def __init__(
        self, settings: SyncSettings, policies: Iterable[SubscriptionSyncPolicyRecord]
    ) -> None:
        self.settings = settings
        self._namespaces: dict[str, _Choice] = {}
        self._topics: dict[str, _Choice] = {}
        unreadable = []
        for policy in policies:
            try:
                pattern = None
                if policy.pattern is not None:
                    pattern = check_subscription_pattern(policy.pattern)
                choice = (Selection(policy.subscriptions), pattern)
            except (InvalidName, ValueError):  # stored before a stricter rule: say it, skip it
                unreadable.append(f"{policy.scope} {policy.name}")
                continue
            scopes = self._namespaces if policy.scope == "namespace" else self._topics
            scopes[policy.name] = choice
        if unreadable:
            log.warning(
                "%d subscription-sync policies cannot be used (their choice or pattern is"
                " not valid any more) and are left out: %s",
                len(unreadable),
                ", ".join(unreadable[:10]),
            )
        #: (namespace, where the choice comes from) -> the one NamespaceSync they share.
        self._memo: dict[tuple[str, str], NamespaceSync] = {}

    def namespaces(self) -> set[str]:
        """The namespaces some policy covers (their topics are synced)."""
        out = set(self._namespaces)
        for name in self._topics:
            with contextlib.suppress(InvalidTopicName):
                out.add(TopicName.parse(name).namespace)
        return out

    def for_topic(self, topic: TopicName) -> NamespaceSync:
        """The mode and the choice of subscriptions of one topic partition."""
        namespace = topic.namespace
        for key in (str(topic), str(topic.base)):
            choice = self._topics.get(key)
            if choice is not None:
                return self._chosen(namespace, f"topic {key}", "topic policy", choice)
        choice = self._namespaces.get(namespace)
        if choice is not None:
            return self._chosen(namespace, "namespace", "namespace policy", choice)
        return self.settings.for_namespace(namespace)

    def _chosen(self, namespace: str, where: str, chosen_by: str, choice: _Choice) -> NamespaceSync:
        memo = self._memo.get((namespace, where))
        if memo is None:
            base = self.settings.for_namespace(namespace)
            memo = base.choosing(choice[0], choice[1], chosen_by)
            self._memo[(namespace, where)] = memo
        return memo
