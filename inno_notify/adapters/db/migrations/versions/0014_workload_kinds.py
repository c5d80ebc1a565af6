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

from inno_notify.adapters.db.migrations import ddl

revision: str = "0014"
down_revision: str | Sequence[str] | None = "0013"


def upgrade() -> None:
    ddl.add_columns(
        "jobs",
        sa.Column("parent_uid", sa.String(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False, server_default="1"),
        sa.Column("replicas", ddl.json_type(), nullable=True),
    )
    ddl.add_columns("pods", sa.Column("role", sa.String(), nullable=True))
    ddl.create_table(
        "workload_links",
        ["cluster", "uid"],
        *ddl.required(sa.String(), "cluster", "uid", "parent_uid"),
        sa.Column("seen_at", ddl.timestamp(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("workload_links")
    ddl.drop_columns("pods", "role")
    ddl.drop_columns("jobs", "replicas", "attempts", "parent_uid")
