"""Alembic migrations of the metadata schema, on a fresh SQLite file and (with
GEOREP_TEST_POSTGRES_URL) a fresh PostgreSQL schema: every revision up, down to base and
up again; the models match the migrated schema; concurrent upgrades are safe."""

from __future__ import annotations

import asyncio
import concurrent.futures
import multiprocessing
import time

import pytest
import sqlalchemy
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from georep.migrations.tables import metadata
from georep.storage.meta import migrate
from georep.storage.meta.store import MetadataStore

VERSION_TABLE = "alembic_version"


def _tables(url: str) -> set[str]:
    engine = migrate.create_engine(url, poolclass=sqlalchemy.NullPool)
    try:
        with engine.connect() as connection:
            names = set(sqlalchemy.inspect(connection).get_table_names())
    finally:
        engine.dispose()
    return names - {VERSION_TABLE, "sqlite_sequence"}


def _schema_diff(url: str) -> list:
    engine = migrate.create_engine(url, poolclass=sqlalchemy.NullPool)
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"compare_type": True})
            return compare_metadata(context, metadata)
    finally:
        engine.dispose()


def test_revisions_form_one_line_ending_at_head() -> None:
    revisions = migrate.revisions()
    assert revisions[0] == "0001"
    assert revisions[-1] == migrate.head()
    assert len(set(revisions)) == len(revisions)


def test_every_revision_up_down_and_up_again(metadata_url: str) -> None:
    revisions = migrate.revisions()
    assert migrate.current(metadata_url) is None
    for revision in revisions:
        migrate.upgrade(metadata_url, revision)
        assert migrate.current(metadata_url) == revision
    assert _tables(metadata_url) == set(metadata.tables)
    for previous in [*reversed(revisions[:-1]), "base"]:
        migrate.downgrade(metadata_url, "-1")
        assert migrate.current(metadata_url) == (None if previous == "base" else previous)
    assert _tables(metadata_url) == set()
    migrate.upgrade(metadata_url)
    assert migrate.current(metadata_url) == migrate.head()
    assert _schema_diff(metadata_url) == []


def test_models_match_migrated_schema(metadata_url: str) -> None:
    migrate.upgrade(metadata_url)
    assert _schema_diff(metadata_url) == []


def test_upgrade_at_head_is_a_no_op(metadata_url: str) -> None:
    migrate.upgrade(metadata_url)
    migrate.upgrade(metadata_url)
    assert migrate.current(metadata_url) == migrate.head()


async def test_store_data_survives_reopen(metadata_url: str) -> None:
    store = await MetadataStore.open(metadata_url)
    ledger = await store.ledgers.create_ledger(
        ensemble_size=2, write_quorum=2, ack_quorum=1, ensemble=["b1", "b2"]
    )
    await store.close()
    store = await MetadataStore.open(metadata_url)  # upgrade finds head: nothing to do
    try:
        assert await store.ledgers.get_ledger(ledger.ledger_id) == ledger
    finally:
        await store.close()


def _upgrade_in_process(url: str, start_at: float) -> str | None:
    time.sleep(max(0.0, start_at - time.time()))
    migrate.upgrade(url)
    return migrate.current(url)


@pytest.mark.slow
async def test_concurrent_upgrades_from_several_processes(metadata_url: str) -> None:
    processes_count = 5
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(processes_count, mp_context=context) as pool:
        start_at = time.time() + 3.0  # after every child has imported
        futures = [
            pool.submit(_upgrade_in_process, metadata_url, start_at) for _ in range(processes_count)
        ]
        revisions = await asyncio.gather(*(asyncio.wrap_future(future) for future in futures))
    assert revisions == [migrate.head()] * processes_count
    assert _schema_diff(metadata_url) == []
