"""The gateway's subscription-sync policies (``gateway/meta/subscription_sync_policies.py``).

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-28

Spelled out in full rather than imported from the models, like 0001.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "subscription_sync_policies",
        sa.Column("scope", sa.String(16), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("subscriptions", sa.String(16), nullable=False),
        sa.Column("pattern", sa.String(1024), nullable=True),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("scope", "name", name=op.f("pk_subscription_sync_policies")),
        sa.CheckConstraint("version >= 1", name=op.f("ck_subscription_sync_policies_version")),
        sa.CheckConstraint(
            "scope IN ('namespace', 'topic')", name=op.f("ck_subscription_sync_policies_scope")
        ),
        sa.CheckConstraint(
            "subscriptions IN ('all', 'flagged')",
            name=op.f("ck_subscription_sync_policies_subscriptions"),
        ),
    )


def downgrade() -> None:
    op.drop_table("subscription_sync_policies")
