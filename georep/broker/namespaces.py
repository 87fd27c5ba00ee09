"""Which namespaces exist, as the broker sees them.

Tenants and namespaces live in the metadata store (tables ``tenants`` and ``namespaces``),
kept by the cluster admin REST; the broker only reads them, to refuse topics of a
namespace that does not exist and to apply a namespace's policies to its topics
(``topic_policies.py``), and creates the defaults, tenant ``public`` with namespace
``public/default``, when the cluster starts.

Every lookup, producer and consumer asks, so answers are cached: a namespace seen to exist
is trusted for ``limits.namespace_cache_s_default`` seconds (or until :meth:`forget`, which
the admin REST calls when it deletes or changes one); a missing one is asked again each
time, so a namespace just created is usable at once. A topic's load reads its namespace's
policies through the same cache (thousands of topics loading at once would otherwise read
one row thousands of times); the broker's periodic pass reads them fresh.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from georep import limits
from georep.broker.ports import NamespaceCatalog
from georep.broker.topic_policies import TopicPolicies
from georep.domain.topic_name import check_namespace

DEFAULT_TENANT = "public"
DEFAULT_NAMESPACE = "public/default"


class Namespaces:
    def __init__(
        self,
        store: NamespaceCatalog,
        *,
        cache_s: float = limits.namespace_cache_s_default,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._cache_s = cache_s
        self._clock = clock
        #: namespace -> when it was last seen to exist
        self._seen: dict[str, float] = {}
        #: namespace -> (when read, its policies)
        self._policies: dict[str, tuple[float, TopicPolicies]] = {}

    async def exists(self, namespace: str) -> bool:
        seen = self._seen.get(namespace)
        now = self._clock()
        if seen is not None and now - seen < self._cache_s:
            return True
        tenant, _, name = namespace.partition("/")
        found = await self._store.get_namespace(tenant, name) is not None
        if found:
            if len(self._seen) >= limits.namespaces_count_max:
                self._seen.clear()
            self._seen[namespace] = now
        else:
            self._seen.pop(namespace, None)
        return found

    async def policies(self, namespace: str, *, fresh: bool = False) -> TopicPolicies:
        """The namespace's retention and message TTL (the defaults when it is gone): read
        within the last ``limits.namespace_cache_s_default`` seconds, or from the store
        when ``fresh`` (the periodic pass that applies them to every loaded topic)."""
        now = self._clock()
        cached = self._policies.get(namespace)
        if not fresh and cached is not None and now - cached[0] < self._cache_s:
            return cached[1]
        tenant, _, name = namespace.partition("/")
        policies = TopicPolicies.of(await self._store.get_namespace(tenant, name))
        if len(self._policies) >= limits.namespaces_count_max:
            self._policies.clear()
        self._policies[namespace] = (now, policies)
        return policies

    def forget(self, namespace: str) -> None:
        """Deleted or changed: ask the store next time."""
        self._seen.pop(namespace, None)
        self._policies.pop(namespace, None)

    async def ensure(self, namespace: str, *, cluster_name: str | None = None) -> None:
        """Create ``namespace`` (and its tenant, allowed on ``cluster_name``) unless they
        exist. Creating what exists is an ordinary answer of the store, not an error."""
        check_namespace(namespace)
        tenant, _, name = namespace.partition("/")
        clusters = [cluster_name] if cluster_name else []
        await self._store.create_tenant(tenant, allowed_clusters=clusters)
        await self._store.create_namespace(tenant, name)

    async def ensure_defaults(self, cluster_name: str | None = None) -> None:
        await self.ensure(DEFAULT_NAMESPACE, cluster_name=cluster_name)
