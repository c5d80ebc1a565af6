"""the job's peak memory kept on its row, so a team's week is read from one index

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-03 13:40:00.000000

Issue 32: the weekly digest read a team's jobs from the (team, finished_at) index alone but then
probed `usage` once per job for four figures; three of them (GPU-minutes held, used, idle) were
already copied onto the job's row for the trend (revision 0012). This revision copies the fourth,
the peak memory, written with the usage (jobs.save_usage), filled here from `usage` for the jobs
stored before, and adds it to the index's INCLUDE columns on Postgres (SQLite has no INCLUDE): the
digest then joins nothing. The rebuild blocks writes to jobs while it runs (seconds per million jobs).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from inno_notify.adapters.db.migrations import ddl

revision: str = "0019"
down_revision: str | Sequence[str] | None = "0018"

# ix_jobs_team_finished_at's INCLUDE columns as revision 0012 left them.
BEFORE = [
    *ddl.DIGEST_JOB_COLUMNS_0004,
    "queued_until",
    "gpu_minutes_held",
    "gpu_minutes_used",
    "gpu_minutes_idle",
]
INDEX = ["team", "finished_at"]


def upgrade() -> None:
    ddl.add_columns("jobs", sa.Column("memory_peak_bytes", sa.BigInteger(), nullable=True))
    op.execute(
        "UPDATE jobs SET memory_peak_bytes = (SELECT usage.memory_peak_bytes FROM usage"
        " WHERE usage.cluster = jobs.cluster AND usage.job_uid = jobs.uid)"
        " WHERE EXISTS (SELECT 1 FROM usage WHERE usage.cluster = jobs.cluster AND usage.job_uid = jobs.uid)"
    )
    ddl.rebuild_index("jobs", INDEX, [*BEFORE, "memory_peak_bytes"])


def downgrade() -> None:
    ddl.rebuild_index("jobs", INDEX, BEFORE)
    ddl.drop_columns("jobs", "memory_peak_bytes")
