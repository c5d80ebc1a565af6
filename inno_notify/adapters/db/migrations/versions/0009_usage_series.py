"""usage series

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01 06:58:27.299603

Charts and job pages (issue 16): a job's usage over time, downsampled at measurement time, in a table
of its own beside `usage`. The revision id is provisional ("ch01"): it is re-chained after the
other revisions of its release when merged.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from inno_notify.adapters.db.migrations import ddl

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"


def upgrade() -> None:
    ddl.create_table(
        "usage_series",
        ["cluster", "job_uid"],
        *ddl.required(sa.String(), "cluster", "job_uid"),
        sa.Column("step_seconds", sa.Integer(), nullable=False),
        sa.Column("start_at", ddl.timestamp(), nullable=True),
        sa.Column("series", ddl.json_type(), nullable=False),
        ddl.job_foreign_key("usage_series"),
    )


def downgrade() -> None:
    op.drop_table("usage_series")
