"""every workload kind in one table: parent, attempts, replica roles, links, pod roles

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-02 01:30:00.000000

One workload model (issue 28): the jobs table holds every kind of run (Job, bare pod, PyTorchJob,
MPIJob, JobSet, RayJob) with the run it is a step of, its attempts and its replica roles; pods
record the role they play; objects between a run and its pods (a JobSet's child Jobs, a RayJob's
RayCluster) are links. Every existing row is kept as it was: one attempt, no roles, no parent.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0014"
down_revision: str | Sequence[str] | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _json() -> sa.types.TypeEngine:  # type: ignore[type-arg]
    return sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("parent_uid", sa.String(), nullable=True))
        batch.add_column(sa.Column("attempts", sa.Integer(), nullable=False, server_default="1"))
        batch.add_column(sa.Column("replicas", _json(), nullable=True))
    with op.batch_alter_table("pods") as batch:
        batch.add_column(sa.Column("role", sa.String(), nullable=True))
    op.create_table(
        "workload_links",
        sa.Column("cluster", sa.String(), nullable=False),
        sa.Column("uid", sa.String(), nullable=False),
        sa.Column("parent_uid", sa.String(), nullable=False),
        sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("cluster", "uid", name=op.f("pk_workload_links")),
    )


def downgrade() -> None:
    op.drop_table("workload_links")
    with op.batch_alter_table("pods") as batch:
        batch.drop_column("role")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("replicas")
        batch.drop_column("attempts")
        batch.drop_column("parent_uid")
