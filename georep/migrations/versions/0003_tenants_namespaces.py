"""Tenants and namespaces, with the namespace policies the admin REST sets.

Revision ID: 0003
Revises: 0002
Create Date: 2024-12-03

Spelled out in full rather than imported from the models, like 0001.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

name_type = sa.String(255)


def upgrade() -> None:
    op.create_table(
        "tenants",
        sa.Column("name", name_type, nullable=False),
        sa.Column("admin_roles", sa.JSON(), nullable=False),
        sa.Column("allowed_clusters", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_tenants")),
        sa.CheckConstraint("version >= 1", name=op.f("ck_tenants_version")),
    )
    op.create_table(
        "namespaces",
        sa.Column("tenant", name_type, nullable=False),
        sa.Column("name", name_type, nullable=False),
        sa.Column("retention_time_minutes", sa.Integer(), nullable=True),
        sa.Column("retention_size_mb", sa.BigInteger(), nullable=True),
        sa.Column("message_ttl_s", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("tenant", "name", name=op.f("pk_namespaces")),
        sa.ForeignKeyConstraint(
            ["tenant"], ["tenants.name"], name=op.f("fk_namespaces_tenant_tenants")
        ),
        sa.CheckConstraint("version >= 1", name=op.f("ck_namespaces_version")),
        sa.CheckConstraint(
            "(retention_time_minutes IS NULL) = (retention_size_mb IS NULL)",
            name=op.f("ck_namespaces_retention_pair"),
        ),
        sa.CheckConstraint(
            "retention_time_minutes >= -1 AND retention_size_mb >= -1",
            name=op.f("ck_namespaces_retention"),
        ),
        sa.CheckConstraint("message_ttl_s >= 0", name=op.f("ck_namespaces_message_ttl_s")),
    )


def downgrade() -> None:
    op.drop_table("namespaces")
    op.drop_table("tenants")
