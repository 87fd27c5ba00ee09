"""Gateway instances of a cluster and the view each has applied (several gateways per
cluster share the topic partitions: ``gateway/ownership.py``).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-26

Spelled out in full rather than imported from the models, like 0001.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "gateway_members",
        sa.Column("cluster", sa.String(255), nullable=False),
        sa.Column("instance", sa.String(255), nullable=False),
        sa.Column("view", sa.JSON(), nullable=False),
        sa.Column("joined_at", sa.Double(), nullable=False),
        sa.Column("expires_at", sa.Double(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("cluster", "instance", name=op.f("pk_gateway_members")),
        sa.CheckConstraint("version >= 1", name=op.f("ck_gateway_members_version")),
    )


def downgrade() -> None:
    op.drop_table("gateway_members")
