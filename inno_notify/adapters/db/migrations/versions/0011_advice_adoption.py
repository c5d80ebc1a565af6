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
from sqlalchemy.dialects import postgresql

revision: str = "0011"
down_revision: str | Sequence[str] | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _json() -> sa.types.TypeEngine:  # type: ignore[type-arg]
    return sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")


def upgrade() -> None:
    op.create_table(
        "advice_adoption",
        sa.Column("cluster", sa.String(), nullable=False),
        sa.Column("job_uid", sa.String(), nullable=False),
        sa.Column("namespace", sa.String(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("family", sa.String(), nullable=False),
        sa.Column("owner", sa.String(), nullable=True),
        sa.Column("team", sa.String(), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("previous_uid", sa.String(), nullable=True),
        sa.Column("previous_name", sa.String(), nullable=True),
        sa.Column("outcome", sa.String(), nullable=False),
        sa.Column("checks", _json(), nullable=False),
        sa.Column("gpu_hours_freed", sa.Double(), nullable=True),
        sa.Column("memory_gib_hours_freed", sa.Double(), nullable=True),
        sa.Column("evaluated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["cluster", "job_uid"],
            ["jobs.cluster", "jobs.uid"],
            name=op.f("fk_advice_adoption_cluster_job_uid_jobs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("cluster", "job_uid", name=op.f("pk_advice_adoption")),
    )
    op.create_index(
        op.f("ix_advice_adoption_team_finished_at"),
        "advice_adoption",
        ["team", "finished_at"],
        unique=False,
        # Postgres only: the digest's sums of a team's week from the index alone.
        postgresql_include=["cluster", "owner", "outcome", "gpu_hours_freed", "memory_gib_hours_freed"],
    )
    op.create_index(op.f("ix_advice_adoption_finished_at"), "advice_adoption", ["finished_at"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_advice_adoption_finished_at"), table_name="advice_adoption")
    op.drop_index(op.f("ix_advice_adoption_team_finished_at"), table_name="advice_adoption")
    op.drop_table("advice_adoption")
