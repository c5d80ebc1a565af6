"""index jobs by team and sort time for the API's job list

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30 04:46:51.449631

The admin API lists a team's jobs newest first (issue 8); see tables.py. Building it blocks writes
to jobs while it runs (seconds per million jobs).
"""

from collections.abc import Sequence

from inno_notify.adapters.db.migrations import ddl

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"


def upgrade() -> None:
    ddl.create_index("jobs", "team", "sort_at", "uid", "cluster")


def downgrade() -> None:
    ddl.drop_index("jobs", "team", "sort_at", "uid", "cluster")
