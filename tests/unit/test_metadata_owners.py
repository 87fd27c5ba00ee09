"""Each layer's data lives beside its owner (docs/ARCHITECTURE.md): storage keeps the
engine and its own tables (ledgers, bookies, leases, managed ledgers); the broker's
catalog and schemas live in ``broker/meta``, the gateway's policies and members in
``gateway/meta``. Storage never imports either, and defines none of their tables; one
``MetaData`` (one chain of migrations) still holds every table. And the Pulsar tooling
stays outside georep's runtime: no module of georep imports it at import."""

from __future__ import annotations

import ast
from pathlib import Path

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
    assert broker_models.TenantRow.metadata is gateway_models.GatewayMemberRow.metadata is metadata


def module_level_imports(path: Path) -> set[str]:
    """The modules ``path`` imports outside any function (``TYPE_CHECKING`` blocks
    excluded: they never run)."""
    found: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and not node.level:
                found.add(node.module or "")
            elif isinstance(node, ast.If):
                if "TYPE_CHECKING" not in ast.unparse(node.test):
                    visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
            elif isinstance(node, ast.ClassDef):
                visit(node.body)

    visit(ast.parse(path.read_text(), str(path)).body)
    return found


def test_georep_never_imports_the_pulsar_tooling_at_import() -> None:
    """The Pulsar tooling (``pulsar_tools/``, beside georep) is development tooling: a
    module of georep imports it only inside the function that uses it."""
    eager = {
        name
        for name, path in module_files().items()
        if any(
            target == "pulsar_tools" or target.startswith("pulsar_tools.")
            for target in module_level_imports(path)
        )
    }
    assert eager == set()
