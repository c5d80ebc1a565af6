"""the digest's (team, finished_at) index covers the job columns the digest reads (Postgres)

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30 04:22:42.435227

Written by hand: Alembic's autogenerate does not compare an index's INCLUDE columns, so it sees no
change here (tests/adapters/db/test_digest_queries.py checks the reflected index instead).
On Postgres the index is rebuilt with INCLUDE, so that the digest can read a team's week by an
index-only scan; SQLite has no INCLUDE, and its plain (team, finished_at) index stays as it is.
The rebuild blocks writes to jobs while it runs (seconds per million jobs).
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEX = "ix_jobs_team_finished_at"
# As tables.DIGEST_JOB_COLUMNS when this revision was written.
INCLUDE = [
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
    _rebuild(INCLUDE)


def downgrade() -> None:
    _rebuild([])
