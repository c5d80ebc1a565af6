"""claim tokens and terms, rejected objects

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01 05:28:04.022140

Hardening (issue 12) and high availability (issue 22): outbox rows and usage leases carry the
claim token that mark_* checks and the leadership term they were claimed in; objects a cluster
user wrote that could not be parsed or stored are kept aside in rejected_objects.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from inno_notify.adapters.db.migrations import ddl

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"


def upgrade() -> None:
    ddl.create_table(
        "rejected_objects",
        ["cluster", "kind", "uid"],
        *ddl.required(sa.String(), "cluster", "kind", "uid"),
        *ddl.optional(sa.String(), "namespace", "name"),
        sa.Column("reason", sa.String(), nullable=False),
        sa.Column("detail", sa.Text(), nullable=True),
        *ddl.required(ddl.timestamp(), "first_seen_at", "last_seen_at"),
        sa.Column("count", sa.Integer(), nullable=False),
    )
    ddl.create_index("rejected_objects", "last_seen_at")
    ddl.add_columns("jobs", *ddl.claim_columns("usage_"))
    ddl.add_columns("outbox", *ddl.claim_columns())


def downgrade() -> None:
    ddl.drop_columns("outbox", *ddl.claim_column_names())
    ddl.drop_columns("jobs", *ddl.claim_column_names("usage_"))
    ddl.drop_index("rejected_objects", "last_seen_at")
    op.drop_table("rejected_objects")
