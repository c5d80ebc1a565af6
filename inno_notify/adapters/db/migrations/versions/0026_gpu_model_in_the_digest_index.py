"""the job's GPU model carried by the (team, finished_at) index, so a digest prices its week alone

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-03 18:30:00.000000

Issue 34: the weekly digest shows the week's cost by GPU model and the top idle cost by person,
priced per model (accounting.rates). It sums the week's jobs per person and GPU model, so it reads
each job's `gpu_model` (revision 0023). On Postgres the digest reads a team's week from the index
alone (its INCLUDE columns, revision 0024); this revision adds `gpu_model` to them, so the digest
still reads no table row. The rebuild blocks writes to jobs while it runs (seconds per million
jobs); VACUUM ANALYZE jobs afterwards (docs/operations.md). SQLite's plain index stays as it is.
"""

from collections.abc import Sequence

from inno_notify.adapters.db.migrations import ddl

revision: str = "0026"
down_revision: str | Sequence[str] | None = "0025"

# ix_jobs_team_finished_at's INCLUDE columns as revision 0024 left them (0025 does not touch it).
BEFORE = [
    *ddl.DIGEST_JOB_COLUMNS_0004,
    "queued_until",
    "gpu_minutes_held",
    "gpu_minutes_used",
    "gpu_minutes_idle",
    "memory_peak_bytes",
    "top_waste_gpu_minutes",
]
INDEX = ["team", "finished_at"]


def upgrade() -> None:
    ddl.rebuild_index("jobs", INDEX, [*BEFORE, "gpu_model"])


def downgrade() -> None:
    ddl.rebuild_index("jobs", INDEX, BEFORE)
