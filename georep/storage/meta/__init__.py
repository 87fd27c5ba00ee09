"""Metadata: ledger metadata values and the store that keeps them.

``ledger_metadata`` is the value type (no I/O); ``store.MetadataStore`` keeps ledgers,
bookie registrations, under-replication markers and leases in SQLite or PostgreSQL;
``models`` describes its tables and ``migrate`` owns their schema through Alembic.
Import from the modules: importing this package stays free of SQLAlchemy for code that
only needs ``LedgerMetadata``.
"""
