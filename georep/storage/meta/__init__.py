"""Metadata: ledger metadata values and the store that keeps them.

``ledger_metadata`` is the value type (no I/O); ``store.MetadataStore`` opens one
``engine.MetadataEngine`` on SQLite or PostgreSQL and holds one repository per domain
(ledgers, bookies, under-replication markers, leases, managed ledgers, the catalog,
replication policies, gateway members), each given that engine; a component is given the
repository it uses. ``models`` describes the tables and ``migrate`` owns their schema
through Alembic.
Import from the modules: importing this package stays free of SQLAlchemy for code that
only needs ``LedgerMetadata``.
"""
