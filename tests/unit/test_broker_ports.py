"""The broker's seams to storage (broker/ports.py), and the cursor's port to its managed
ledger (cursor_ledger.CursorStorage), against what storage provides: every
member a Protocol names exists on its implementation, with the same kind (coroutine,
method, property or attribute), so a change to either side shows here."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from georep.broker import ports
from georep.broker.cluster import BrokerStore
from georep.broker.meta.catalog import CatalogRepository
from georep.storage.managed_ledger.cursor import ManagedCursor
from georep.storage.managed_ledger.cursor_ledger import CursorStorage
from georep.storage.managed_ledger.factory import ManagedLedgerFactory
from georep.storage.managed_ledger.managed_ledger import ManagedLedger

PAIRS = [
    (ports.TopicLog, ManagedLedger),
    (ports.SubscriptionCursor, ManagedCursor),
    (ports.TopicLogFactory, ManagedLedgerFactory),
    (ports.BrokerMetadata, BrokerStore),
    (ports.NamespaceCatalog, CatalogRepository),
    (CursorStorage, ManagedLedger),  # the port a cursor persists through
]


def members(protocol: type) -> dict[str, str]:
    out = {name: "attribute" for name in protocol.__annotations__}
    for name, value in vars(protocol).items():
        if name.startswith("_"):
            continue
        if isinstance(value, property):
            out[name] = "property"
        elif inspect.iscoroutinefunction(value):
            out[name] = "coroutine"
        elif inspect.isfunction(value):
            out[name] = "method"
    return out


def kind_on(implementation: type[Any], name: str) -> str | None:
    value = inspect.getattr_static(implementation, name, None)
    if value is None:
        source = inspect.getsource(implementation.__init__)
        return "attribute" if f"self.{name} =" in source or f"self.{name}:" in source else None
    if isinstance(value, property):
        return "property"
    if inspect.iscoroutinefunction(value):
        return "coroutine"
    if inspect.isfunction(value):
        return "method"
    return "attribute"


@pytest.mark.parametrize(("protocol", "implementation"), PAIRS)
def test_storage_provides_every_member_the_broker_asks_for(protocol, implementation) -> None:
    wanted = members(protocol)
    assert wanted, protocol
    for name, kind in wanted.items():
        found = kind_on(implementation, name)
        # A read-only property of a Protocol is met by a plain attribute too (mypy agrees).
        met = found == kind or (kind == "property" and found == "attribute")
        assert met, f"{implementation.__name__}.{name}: {found}, the broker needs {kind}"
