"""index jobs by team and finish

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30 03:46:27.493645
"""

from collections.abc import Sequence

from inno_notify.adapters.db.migrations import ddl

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"


def upgrade() -> None:
    ddl.create_index("jobs", "team", "finished_at")


def downgrade() -> None:
    ddl.drop_index("jobs", "team", "finished_at")
