"""The gateway's remote clusters and replication policies.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22

Spelled out in full rather than imported from the models, like 0001.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

name_type = sa.String(255)
url_type = sa.String(1024)


def upgrade() -> None:
    op.create_table(
        "remote_clusters",
        sa.Column("name", name_type, nullable=False),
        sa.Column("service_url", url_type, nullable=False),
        sa.Column("admin_url", url_type, nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_remote_clusters")),
        sa.CheckConstraint("version >= 1", name=op.f("ck_remote_clusters_version")),
    )
    op.create_table(
        "replication_policies",
        sa.Column("scope", sa.String(16), nullable=False),
        sa.Column("name", name_type, nullable=False),
        sa.Column("clusters", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("scope", "name", name=op.f("pk_replication_policies")),
        sa.CheckConstraint("version >= 1", name=op.f("ck_replication_policies_version")),
        sa.CheckConstraint(
            "scope IN ('namespace', 'topic')", name=op.f("ck_replication_policies_scope")
        ),
    )


def downgrade() -> None:
    op.drop_table("replication_policies")
    op.drop_table("remote_clusters")
