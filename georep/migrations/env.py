"""Alembic environment for the metadata store.

Normally run by ``georep.storage.meta.migrate``, which passes a connection that already
holds the migration lock (``config.attributes["connection"]``). From the alembic command
line the URL comes from ``-x url=...`` and no lock is taken.

On SQLite the whole upgrade runs in one transaction (``BEGIN IMMEDIATE``: SQLite's DDL is
transactional once pysqlite stops managing transactions) and uses batch mode, which
rebuilds a table for the ALTERs SQLite lacks.
"""

from __future__ import annotations

import sqlalchemy
from alembic import context
from sqlalchemy.engine import Connection

from georep.migrations.tables import metadata
from georep.storage.meta import migrate

config = context.config


def _url() -> str:
    url = context.get_x_argument(as_dictionary=True).get("url")
    url = url or config.get_main_option("sqlalchemy.url")
    if not url:
        raise SystemExit("give the database with: alembic -x url=sqlite:///path.db ...")
    return url


def _run(connection: Connection) -> None:
    sqlite = connection.dialect.name == "sqlite"
    context.configure(
        connection=connection,
        target_metadata=metadata,
        transactional_ddl=True,
        render_as_batch=sqlite,
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_offline() -> None:
    url = migrate.database_url(_url())
    context.configure(
        url=url,
        target_metadata=metadata,
        literal_binds=True,
        render_as_batch=url.get_backend_name() == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = migrate.create_engine(_url(), poolclass=sqlalchemy.NullPool)
    try:
        with engine.connect() as new_connection:
            _run(new_connection.execution_options(**{migrate.BEGIN_OPTION: "IMMEDIATE"}))
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
