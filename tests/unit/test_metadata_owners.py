"""Each layer's metadata lives beside its owner (docs/ARCHITECTURE.md): storage keeps the
engine and its own tables (ledgers, bookies, leases, managed ledgers); the broker's
catalog and schemas live in ``broker/meta``, the gateway's policies and members in
``gateway/meta``. Storage never imports either, and defines none of their tables; one
``MetaData`` (one chain of migrations) still holds every table."""

from __future__ import annotations

import georep.broker.meta.models as broker_models
import georep.gateway.meta.models as gateway_models
import georep.storage.meta.models as storage_models
from georep.migrations.tables import metadata
from tests.unit.test_import_graph import ROOT, imports_of, module_files

STORAGE_TABLES = {
    "ledgers",
    "bookies",
    "underreplicated_ledgers",
    "leases",
    "managed_ledgers",
    "managed_cursors",
}
BROKER_TABLES = {
    "tenants",
    "namespaces",
    "partitioned_topics",
    "topic_schemas",
    "schema_compatibility",
}
GATEWAY_TABLES = {
    "remote_clusters",
    "replication_policies",
    "subscription_sync_policies",
    "gateway_members",
}


def tables_declared_in(module: object) -> set[str]:
    return {
        value.__tablename__
        for value in vars(module).values()
        if isinstance(value, type)
        and issubclass(value, storage_models.Base)
        and value.__module__ == getattr(module, "__name__", None)
        and hasattr(value, "__tablename__")
    }


def test_storage_imports_no_broker_or_gateway_module() -> None:
    files = module_files()
    modules = set(files)
    upward = {
        (name, target)
        for name, path in files.items()
        if name.startswith("georep.storage")
        for target in imports_of(name, path, modules)
        if target.startswith(("georep.broker", "georep.gateway"))
    }
    assert upward == set()


def test_storage_meta_defines_no_repository_of_another_layer() -> None:
    names = {path.stem for path in (ROOT / "storage" / "meta").glob("*.py")}
    others = {"catalog", "schemas", "replication_policies", "subscription_sync_policies"}
    assert names & (others | {"gateway_members", "members"}) == set()


def test_each_layer_declares_its_own_tables_on_the_one_metadata() -> None:
    assert tables_declared_in(storage_models) == STORAGE_TABLES
    assert tables_declared_in(broker_models) == BROKER_TABLES
    assert tables_declared_in(gateway_models) == GATEWAY_TABLES
    assert set(metadata.tables) == STORAGE_TABLES | BROKER_TABLES | GATEWAY_TABLES
    assert broker_models.Base.metadata is gateway_models.Base.metadata is metadata
