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

from inno_notify.adapters.db.migrations import ddl

revision: str = "0012"
down_revision: str | Sequence[str] | None = "0011"

# The job's copy -> the usage column it copies.
COPIES = {
    "gpu_minutes_held": "gpu_minutes",
    "gpu_minutes_used": "used_gpu_minutes",
    "gpu_minutes_idle": "idle_gpu_minutes",
}
ADDED = ["queued_until", *COPIES]
# ix_jobs_team_finished_at's INCLUDE columns as revision 0004 left them; this revision adds ADDED.
BEFORE = ddl.DIGEST_JOB_COLUMNS_0004
INDEX = ["team", "finished_at"]


def upgrade() -> None:
    ddl.create_table(
        "cluster_queues",
        ["cluster", "name"],
        *ddl.required(sa.String(), "cluster", "name"),
        sa.Column("nominal_gpus", sa.Double(), nullable=True),
        sa.Column("updated_at", ddl.timestamp(), nullable=False),
    )
    ddl.create_table(
        "local_queues",
        ["cluster", "namespace", "name"],
        *ddl.required(sa.String(), "cluster", "namespace", "name"),
        sa.Column("cluster_queue", sa.String(), nullable=True),
        sa.Column("updated_at", ddl.timestamp(), nullable=False),
    )
    ddl.add_columns(
        "jobs",
        sa.Column("queued_until", ddl.timestamp(), nullable=True),
        *ddl.optional(sa.Double(), *COPIES),
    )
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
    ddl.rebuild_index("jobs", INDEX, [*BEFORE, *ADDED])


def downgrade() -> None:
    ddl.rebuild_index("jobs", INDEX, BEFORE)
    ddl.drop_columns("jobs", *reversed(ADDED))
    op.drop_table("local_queues")
    op.drop_table("cluster_queues")
