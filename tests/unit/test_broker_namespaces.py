"""The broker's cache of namespaces (broker/namespaces.py): a topic's load reads its
namespace's policies at most once per ``cache_s``; a change or a delete told by the admin,
and the periodic pass, read them afresh."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from georep.broker.meta.catalog import CatalogOutcome, NamespaceRecord
from georep.broker.namespaces import Namespaces
from georep.broker.topic_policies import TopicPolicies


class _Store:
    """One namespace row, counting the reads."""

    def __init__(self) -> None:
        self.record: NamespaceRecord | None = NamespaceRecord(
            "acme", "orders", retention=(60, -1), message_ttl_s=None, created_at=0.0, version=1
        )
        self.reads = 0

    async def get_namespace(self, tenant: str, name: str) -> NamespaceRecord | None:
        self.reads += 1
        return self.record

    async def create_tenant(
        self, name: str, *, admin_roles: Iterable[str] = (), allowed_clusters: Iterable[str] = ()
    ) -> CatalogOutcome:
        raise AssertionError("not asked")

    async def create_namespace(
        self,
        tenant: str,
        name: str,
        *,
        retention: tuple[int, int] | None = None,
        message_ttl_s: int | None = None,
    ) -> CatalogOutcome:
        raise AssertionError("not asked")


async def test_loads_share_one_read_until_the_window_passes_or_the_admin_changes_it() -> None:
    store = _Store()
    now = [100.0]
    namespaces = Namespaces(store, cache_s=5.0, clock=lambda: now[0])

    for _ in range(1_000):  # a thousand topics of the namespace loading at once
        assert await namespaces.policies("acme/orders") == TopicPolicies((60, -1), None)
    assert store.reads == 1

    assert store.record is not None
    store.record = dataclasses.replace(store.record, message_ttl_s=30)
    assert (await namespaces.policies("acme/orders")).message_ttl_s is None  # within the window
    namespaces.forget("acme/orders")  # the admin changed it
    assert (await namespaces.policies("acme/orders")).message_ttl_s == 30
    assert store.reads == 2

    store.record = dataclasses.replace(store.record, retention=None)
    now[0] += 5.0
    assert (await namespaces.policies("acme/orders")).retention is None  # the window passed
    assert store.reads == 3

    store.record = None  # deleted: the defaults, read afresh by the periodic pass
    assert await namespaces.policies("acme/orders", fresh=True) == TopicPolicies()
    assert store.reads == 4
