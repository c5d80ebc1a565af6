"""advice adoption

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01 09:15:00.000000

Advice adoption (issue 17 part A): whether a family's new run followed its previous run's advice,
and the GPU-hours and memory GiB-hours that freed, one row per judged run.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from inno_notify.adapters.db.migrations import ddl

revision: str = "0011"
down_revision: str | Sequence[str] | None = "0010"


def upgrade() -> None:
    ddl.create_table(
        "advice_adoption",
        ["cluster", "job_uid"],
        *ddl.required(sa.String(), "cluster", "job_uid", "namespace", "name", "family"),
        *ddl.optional(sa.String(), "owner", "team"),
        sa.Column("finished_at", ddl.timestamp(), nullable=True),
        *ddl.optional(sa.String(), "previous_uid", "previous_name"),
        sa.Column("outcome", sa.String(), nullable=False),
        sa.Column("checks", ddl.json_type(none_as_null=True), nullable=False),
        *ddl.optional(sa.Double(), "gpu_hours_freed", "memory_gib_hours_freed"),
        sa.Column("evaluated_at", ddl.timestamp(), nullable=False),
        ddl.job_foreign_key("advice_adoption"),
    )
    ddl.create_index(
        "advice_adoption",
        "team",
        "finished_at",
        # Postgres only: the digest's sums of a team's week from the index alone.
        postgresql_include=["cluster", "owner", "outcome", "gpu_hours_freed", "memory_gib_hours_freed"],
    )
    ddl.create_index("advice_adoption", "finished_at")


def downgrade() -> None:
    ddl.drop_index("advice_adoption", "finished_at")
    ddl.drop_index("advice_adoption", "team", "finished_at")
    op.drop_table("advice_adoption")
