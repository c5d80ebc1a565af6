"""index job families

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30 03:40:29.239594
"""

from collections.abc import Sequence

from inno_notify.adapters.db.migrations import ddl

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"


def upgrade() -> None:
    ddl.create_index("jobs", "cluster", "namespace", "family", "finished_at")


def downgrade() -> None:
    ddl.drop_index("jobs", "cluster", "namespace", "family", "finished_at")
