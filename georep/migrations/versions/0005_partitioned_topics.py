"""Partitioned topics in the metadata store, beside tenants and namespaces (they were a
log in the broker's own managed ledger; the broker imports that log once).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-25

Spelled out in full rather than imported from the models, like 0001.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "partitioned_topics",
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("partitions", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_partitioned_topics")),
        sa.CheckConstraint("partitions >= 1", name=op.f("ck_partitioned_topics_partitions")),
        sa.CheckConstraint("version >= 1", name=op.f("ck_partitioned_topics_version")),
    )


def downgrade() -> None:
    op.drop_table("partitioned_topics")
