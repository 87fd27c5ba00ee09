"""Managed ledgers and their cursors.

Revision ID: 0002
Revises: 0001
Create Date: 2024-12-02

Spelled out in full rather than imported from the models, like 0001.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

name_type = sa.String(255)


def upgrade() -> None:
    op.create_table(
        "managed_ledgers",
        sa.Column("name", name_type, nullable=False),
        sa.Column("ledgers", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_managed_ledgers")),
        sa.CheckConstraint("version >= 1", name=op.f("ck_managed_ledgers_version")),
    )
    op.create_table(
        "managed_cursors",
        sa.Column("managed_ledger", name_type, nullable=False),
        sa.Column("name", name_type, nullable=False),
        sa.Column("cursor_ledger_id", sa.BigInteger(), nullable=True),
        sa.Column("mark_delete_ledger_id", sa.BigInteger(), nullable=False),
        sa.Column("mark_delete_entry_id", sa.BigInteger(), nullable=False),
        sa.Column("properties", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("managed_ledger", "name", name=op.f("pk_managed_cursors")),
        sa.ForeignKeyConstraint(
            ["managed_ledger"],
            ["managed_ledgers.name"],
            name=op.f("fk_managed_cursors_managed_ledger_managed_ledgers"),
            ondelete="CASCADE",
        ),
        sa.CheckConstraint("version >= 1", name=op.f("ck_managed_cursors_version")),
    )


def downgrade() -> None:
    op.drop_table("managed_cursors")
    op.drop_table("managed_ledgers")
