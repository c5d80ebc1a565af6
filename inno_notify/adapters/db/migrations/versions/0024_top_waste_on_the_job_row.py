"""the job's largest advised waste kept on its row, so a digest's top waste probes only its winners

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-03 16:00:00.000000

Issue 32: the weekly digest read a team's week from the (team, finished_at) index alone, but to find
the five jobs whose largest recommendation wastes the most GPU-minutes it probed `recommendations`
once per job of the week (1,665 probes, three quarters of the digest's buffer visits on the bench's
million jobs). The job's row now keeps the largest `waste_gpu_minutes` of its recommendations
(`top_waste_gpu_minutes`, NULL for a job without any), written with them (jobs.save_usage,
jobs.save_recommendations, the batched usage round), filled here for the jobs stored before, and
carried by the index's INCLUDE columns on Postgres: the digest ranks the week's jobs from the index
and reads the recommendations of the winners only. The rebuild blocks writes to jobs while it runs
(seconds per million jobs); VACUUM ANALYZE jobs afterwards (docs/operations.md).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from inno_notify.adapters.db.migrations import ddl

revision: str = "0024"
down_revision: str | Sequence[str] | None = "0023"

# ix_jobs_team_finished_at's INCLUDE columns as revision 0019 left them (0020-0023 do not touch it).
BEFORE = [
    *ddl.DIGEST_JOB_COLUMNS_0004,
    "queued_until",
    "gpu_minutes_held",
    "gpu_minutes_used",
    "gpu_minutes_idle",
    "memory_peak_bytes",
]
INDEX = ["team", "finished_at"]
_OF_THE_JOB = "recommendations.cluster = jobs.cluster AND recommendations.job_uid = jobs.uid"


def upgrade() -> None:
    ddl.add_columns("jobs", sa.Column("top_waste_gpu_minutes", sa.Double(), nullable=True))
    op.execute(
        "UPDATE jobs SET top_waste_gpu_minutes = (SELECT max(recommendations.waste_gpu_minutes)"
        f" FROM recommendations WHERE {_OF_THE_JOB})"
        f" WHERE EXISTS (SELECT 1 FROM recommendations WHERE {_OF_THE_JOB})"
    )
    ddl.rebuild_index("jobs", INDEX, [*BEFORE, "top_waste_gpu_minutes"])


def downgrade() -> None:
    ddl.rebuild_index("jobs", INDEX, BEFORE)
    ddl.drop_columns("jobs", "top_waste_gpu_minutes")
