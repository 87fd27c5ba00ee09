"""Topic schemas (the broker's schema registry) and each namespace's compatibility
strategy (``broker/meta/schemas.py``).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-28

Spelled out in full rather than imported from the models, like 0001.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "topic_schemas",
        sa.Column("topic", sa.String(255), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("schema_type", sa.String(32), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.Column("properties", sa.JSON(), nullable=False),
        sa.Column("deleted", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("topic", "version", name=op.f("pk_topic_schemas")),
        sa.CheckConstraint("version >= 0", name=op.f("ck_topic_schemas_version")),
    )
    op.create_table(
        "schema_compatibility",
        sa.Column("namespace", sa.String(255), nullable=False),
        sa.Column("strategy", sa.String(32), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("namespace", name=op.f("pk_schema_compatibility")),
        sa.CheckConstraint("version >= 1", name=op.f("ck_schema_compatibility_version")),
    )


def downgrade() -> None:
    op.drop_table("schema_compatibility")
    op.drop_table("topic_schemas")
