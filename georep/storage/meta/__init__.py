"""Metadata: ledger metadata values and the store that keeps them.

``ledger_metadata`` is the value type (no I/O); ``store.MetadataStore`` opens one
``engine.MetadataEngine`` on SQLite or PostgreSQL and holds one repository per domain
(ledgers, bookies, under-replication markers, leases, managed ledgers), each given that
engine; a component is given the repository it uses. The broker's and the gateway's
metadata live beside them (``broker/meta``, ``gateway/meta``), their repositories built
over this store's engine; storage never imports them. ``models`` describes storage's
tables and ``migrate`` owns the schema of all of them through Alembic.
Import from the modules: importing this package stays free of SQLAlchemy for code that
only needs ``LedgerMetadata``.
"""
