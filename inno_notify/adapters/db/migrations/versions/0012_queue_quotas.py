"""Kueue queue quotas, and the usage figures a trend sums kept on the job's row

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01 09:10:00.000000

Issue 17 (part B). Two tables hold what the Kueue watch saw: each ClusterQueue's nominal GPU quota
(in GPU-equivalents, summed over its flavors) and each LocalQueue's ClusterQueue, so that a team's
namespaces lead to its quota. The job's row gains `queued_until`, the end of its queue wait (Kueue's
admission where there is one, else the first pod's scheduling; filled from first_scheduled_at for the
jobs stored before). And three columns copy the usage figures a weekly trend sums
(GPU-minutes held, used, idle) onto the job's row, written with the usage (jobs.save_usage): the
trend of twelve weeks then reads one range of the (team, finished_at) index, which on Postgres
INCLUDEs them, instead of probing the usage table once per job (docs/digest.md measures both).
The copies are filled from `usage` here; the index is rebuilt on Postgres (SQLite has no INCLUDE),
which blocks writes to jobs while it runs (seconds per million jobs).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | Sequence[str] | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEX = "ix_jobs_team_finished_at"
# The job's copy -> the usage column it copies.
COPIES = {
    "gpu_minutes_held": "gpu_minutes",
    "gpu_minutes_used": "used_gpu_minutes",
    "gpu_minutes_idle": "idle_gpu_minutes",
}
ADDED = ["queued_until", *COPIES]
# tables.DIGEST_JOB_COLUMNS as revision 0004 left it; this revision adds ADDED.
BEFORE = [
    "cluster",
    "uid",
    "owner",
    "status",
    "exit_reason",
    "gpus_requested",
    "memory_requested_bytes",
    "created_at",
    "first_scheduled_at",
]


def _rebuild(include: list[str]) -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.drop_index(INDEX, table_name="jobs")
    op.create_index(INDEX, "jobs", ["team", "finished_at"], unique=False, postgresql_include=include)


def upgrade() -> None:
    op.create_table(
        "cluster_queues",
        sa.Column("cluster", sa.String(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("nominal_gpus", sa.Double(), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("cluster", "name", name=op.f("pk_cluster_queues")),
    )
    op.create_table(
        "local_queues",
        sa.Column("cluster", sa.String(), nullable=False),
        sa.Column("namespace", sa.String(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("cluster_queue", sa.String(), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("cluster", "namespace", "name", name=op.f("pk_local_queues")),
    )
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("queued_until", sa.DateTime(timezone=True), nullable=True))
        for name in COPIES:
            batch.add_column(sa.Column(name, sa.Double(), nullable=True))
    # Jobs stored before: their Kueue admission stays in the kueue JSON, the wait ends as before.
    op.execute("UPDATE jobs SET queued_until = first_scheduled_at")
    op.execute(
        "UPDATE jobs SET "
        + ", ".join(
            f"{copy} = (SELECT usage.{source} FROM usage "
            "WHERE usage.cluster = jobs.cluster AND usage.job_uid = jobs.uid)"
            for copy, source in COPIES.items()
        )
        + " WHERE EXISTS (SELECT 1 FROM usage"
        " WHERE usage.cluster = jobs.cluster AND usage.job_uid = jobs.uid)"
    )
    _rebuild([*BEFORE, *ADDED])


def downgrade() -> None:
    _rebuild(BEFORE)
    with op.batch_alter_table("jobs") as batch:
        for name in reversed(ADDED):
            batch.drop_column(name)
    op.drop_table("local_queues")
    op.drop_table("cluster_queues")
