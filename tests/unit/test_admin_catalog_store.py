"""The broker's tenants and namespaces (revision 0003), on SQLite and, with
GEOREP_TEST_POSTGRES_URL, PostgreSQL: outcomes of create and delete, CAS on updates,
checks on the way in."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from georep import limits
from georep.broker.meta.catalog import CatalogOutcome
from georep.broker.meta.store import BrokerRepositories
from georep.storage.errors import BadVersion, InvalidArgument

DONE, EXISTS, MISSING = CatalogOutcome.DONE, CatalogOutcome.EXISTS, CatalogOutcome.MISSING


async def test_tenant_create_get_list_delete(broker_meta: BrokerRepositories) -> None:
    meta = broker_meta
    assert await meta.catalog.list_tenants() == []
    assert await meta.catalog.create_tenant("t1", admin_roles=["ops", "ops", "dev"]) is DONE
    assert await meta.catalog.create_tenant("t1") is EXISTS
    assert await meta.catalog.create_tenant("t0", allowed_clusters=["A", "B"]) is DONE
    assert await meta.catalog.list_tenants() == ["t0", "t1"]
    tenant = await meta.catalog.get_tenant("t1")
    assert tenant is not None
    assert (tenant.admin_roles, tenant.allowed_clusters, tenant.version) == (("ops", "dev"), (), 1)
    assert await meta.catalog.get_tenant("nope") is None
    assert await meta.catalog.delete_tenant("t1") is DONE
    assert await meta.catalog.delete_tenant("t1") is MISSING
    assert await meta.catalog.list_tenants() == ["t0"]


async def test_tenant_update_is_compare_and_set(broker_meta: BrokerRepositories) -> None:
    meta = broker_meta
    await meta.catalog.create_tenant("t", admin_roles=["a"])
    first = await meta.catalog.get_tenant("t")
    assert first is not None
    second = await meta.catalog.update_tenant(dataclasses.replace(first, admin_roles=("b",)))
    assert (second.admin_roles, second.version) == (("b",), 2)
    with pytest.raises(BadVersion):
        await meta.catalog.update_tenant(dataclasses.replace(first, admin_roles=("c",)))
    stored = await meta.catalog.get_tenant("t")
    assert stored is not None and stored.admin_roles == ("b",)
    await meta.catalog.delete_tenant("t")
    with pytest.raises(BadVersion):
        await meta.catalog.update_tenant(second)


async def test_namespace_lifecycle_and_policies(broker_meta: BrokerRepositories) -> None:
    meta = broker_meta
    assert await meta.catalog.create_namespace("t", "ns") is MISSING  # no tenant
    await meta.catalog.create_tenant("t")
    assert (
        await meta.catalog.create_namespace("t", "ns", retention=(60, 100), message_ttl_s=30)
        is DONE
    )
    assert await meta.catalog.create_namespace("t", "ns") is EXISTS
    assert await meta.catalog.create_namespace("t", "a") is DONE
    assert await meta.catalog.list_namespaces("t") == ["a", "ns"]
    assert await meta.catalog.list_namespaces("other") == []
    record = await meta.catalog.get_namespace("t", "ns")
    assert record is not None
    assert (record.retention, record.message_ttl_s, record.version) == ((60, 100), 30, 1)
    updated = await meta.catalog.update_namespace(
        dataclasses.replace(record, retention=(-1, -1), message_ttl_s=None)
    )
    assert (updated.retention, updated.message_ttl_s, updated.version) == ((-1, -1), None, 2)
    with pytest.raises(BadVersion):
        await meta.catalog.update_namespace(dataclasses.replace(record, retention=None))
    assert await meta.catalog.delete_tenant("t") is CatalogOutcome.NOT_EMPTY
    assert await meta.catalog.delete_namespace("t", "ns") is DONE
    assert await meta.catalog.delete_namespace("t", "ns") is MISSING
    assert await meta.catalog.get_namespace("t", "ns") is None
    assert await meta.catalog.delete_namespace("t", "a") is DONE
    assert await meta.catalog.delete_tenant("t") is DONE


async def test_concurrent_policy_updates_one_wins(broker_meta: BrokerRepositories) -> None:
    meta = broker_meta
    await meta.catalog.create_tenant("t")
    await meta.catalog.create_namespace("t", "ns")
    record = await meta.catalog.get_namespace("t", "ns")
    assert record is not None
    results = await asyncio.gather(
        *(
            meta.catalog.update_namespace(dataclasses.replace(record, message_ttl_s=ttl))
            for ttl in (10, 20, 30, 40)
        ),
        return_exceptions=True,
    )
    winners = [result for result in results if not isinstance(result, BaseException)]
    assert len(winners) == 1
    assert all(isinstance(result, BadVersion) for result in results if result not in winners)
    stored = await meta.catalog.get_namespace("t", "ns")
    assert stored is not None and stored.message_ttl_s == winners[0].message_ttl_s


async def test_concurrent_creates_one_done(broker_meta: BrokerRepositories) -> None:
    meta = broker_meta
    outcomes = await asyncio.gather(*(meta.catalog.create_tenant("t") for _ in range(5)))
    assert sorted(outcome.value for outcome in outcomes) == ["done"] + ["exists"] * 4
    outcomes = await asyncio.gather(*(meta.catalog.create_namespace("t", "ns") for _ in range(5)))
    assert sorted(outcome.value for outcome in outcomes) == ["done"] + ["exists"] * 4


async def test_tenant_count_limit(broker_meta: BrokerRepositories, monkeypatch) -> None:
    monkeypatch.setattr(limits, "tenants_count_max", 2)
    monkeypatch.setattr(limits, "namespaces_count_max", 1)
    meta = broker_meta
    assert await meta.catalog.create_tenant("a") is DONE
    assert await meta.catalog.create_tenant("b") is DONE
    assert await meta.catalog.create_tenant("c") is CatalogOutcome.FULL
    assert await meta.catalog.create_namespace("a", "x") is DONE
    assert await meta.catalog.create_namespace("a", "y") is CatalogOutcome.FULL
    assert await meta.catalog.list_tenants() == ["a", "b"]


@pytest.mark.parametrize(
    "call",
    [
        lambda meta: meta.catalog.create_tenant(""),
        lambda meta: meta.catalog.create_tenant("x" * 256),
        lambda meta: meta.catalog.create_tenant("t", admin_roles="ops"),
        lambda meta: meta.catalog.create_tenant("t", allowed_clusters=[7]),
        lambda meta: meta.catalog.create_namespace("t", "ns", retention=(-2, 0)),
        lambda meta: meta.catalog.create_namespace("t", "ns", retention=(1, 2, 3)),
        lambda meta: meta.catalog.create_namespace("t", "ns", message_ttl_s=-1),
        lambda meta: meta.catalog.create_namespace("t", "ns", message_ttl_s=True),
        lambda meta: meta.catalog.create_namespace("t", "ns", message_ttl_s=2**31),
        lambda meta: meta.catalog.update_tenant("t"),
        lambda meta: meta.catalog.update_namespace(None),
    ],
)
async def test_bad_arguments_are_refused_before_storage(
    broker_meta: BrokerRepositories, call
) -> None:
    with pytest.raises(InvalidArgument):
        await call(broker_meta)
    assert await broker_meta.catalog.list_tenants() == []
