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

from inno_notify.adapters.db.migrations import ddl

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"


def upgrade() -> None:
    ddl.rebuild_index("jobs", ["team", "finished_at"], ddl.DIGEST_JOB_COLUMNS_0004)


def downgrade() -> None:
    ddl.rebuild_index("jobs", ["team", "finished_at"], [])
