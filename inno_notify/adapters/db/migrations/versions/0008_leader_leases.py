"""leader leases

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01 06:15:23.060659

High availability (issue 22): the lease that replicas elect their leader on, one row per name
(the cluster name), with the term that fenced writes and claims carry.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from inno_notify.adapters.db.migrations import ddl

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"


def upgrade() -> None:
    ddl.create_table(
        "leader_leases",
        ["name"],
        *ddl.required(sa.String(), "name", "holder"),
        sa.Column("term", sa.BigInteger(), nullable=False),
        *ddl.required(ddl.timestamp(), "acquired_at", "renewed_at", "expires_at"),
    )


def downgrade() -> None:
    op.drop_table("leader_leases")
