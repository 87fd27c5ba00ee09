"""Initial metadata schema: ledgers, bookie registrations, under-replication, leases.

Revision ID: 0001
Revises:
Create Date: 2024-11-22

Spelled out in full rather than imported from the models: a migration is a frozen record
of the schema at one revision, and the models move on.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# A 64-bit id; on SQLite an INTEGER PRIMARY KEY, the rowid alias that AUTOINCREMENT needs.
ledger_id_type = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "ledgers",
        sa.Column("ledger_id", ledger_id_type, primary_key=True, autoincrement=True),
        sa.Column("ensemble_size", sa.Integer(), nullable=False),
        sa.Column("write_quorum", sa.Integer(), nullable=False),
        sa.Column("ack_quorum", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("last_entry_id", sa.BigInteger(), nullable=False),
        sa.Column("length", sa.BigInteger(), nullable=False),
        sa.Column("ensembles", sa.JSON(), nullable=False),
        sa.Column("custom", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("ledger_id", name=op.f("pk_ledgers")),
        sa.CheckConstraint(
            "ensemble_size >= write_quorum AND write_quorum >= ack_quorum AND ack_quorum >= 1",
            name=op.f("ck_ledgers_quorums"),
        ),
        sa.CheckConstraint(
            "state IN ('OPEN', 'IN_RECOVERY', 'CLOSED')", name=op.f("ck_ledgers_state")
        ),
        sa.CheckConstraint("version >= 1", name=op.f("ck_ledgers_version")),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "bookies",
        sa.Column("address", sa.String(255), nullable=False),
        sa.Column("registered_at", sa.Double(), nullable=False),
        sa.Column("lease_expires_at", sa.Double(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("address", name=op.f("pk_bookies")),
        sa.CheckConstraint("version >= 1", name=op.f("ck_bookies_version")),
    )
    op.create_table(
        "underreplicated_ledgers",
        sa.Column("ledger_id", ledger_id_type, autoincrement=False, nullable=False),
        sa.Column("lost_bookies", sa.JSON(), nullable=False),
        sa.Column("marked_at", sa.Double(), nullable=False),
        sa.Column("lock_holder", sa.String(255), nullable=True),
        sa.Column("lock_expires_at", sa.Double(), nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("ledger_id", name=op.f("pk_underreplicated_ledgers")),
        sa.ForeignKeyConstraint(
            ["ledger_id"],
            ["ledgers.ledger_id"],
            name=op.f("fk_underreplicated_ledgers_ledger_id_ledgers"),
            ondelete="CASCADE",
        ),
        sa.CheckConstraint("version >= 1", name=op.f("ck_underreplicated_ledgers_version")),
    )
    op.create_index(
        op.f("ix_underreplicated_ledgers_marked_at"), "underreplicated_ledgers", ["marked_at"]
    )
    op.create_table(
        "leases",
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("holder", sa.String(255), nullable=False),
        sa.Column("acquired_at", sa.Double(), nullable=False),
        sa.Column("expires_at", sa.Double(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_leases")),
        sa.CheckConstraint("version >= 1", name=op.f("ck_leases_version")),
    )


def downgrade() -> None:
    op.drop_table("leases")
    op.drop_index(
        op.f("ix_underreplicated_ledgers_marked_at"), table_name="underreplicated_ledgers"
    )
    op.drop_table("underreplicated_ledgers")
    op.drop_table("bookies")
    op.drop_table("ledgers")
