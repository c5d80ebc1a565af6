"""workflows in the job list: their sort key, and a run's steps found by parent

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-03 13:00:00.000000

Issue 28: GET /api/v1/jobs lists every workload kind (CONTRACT §3a, §5), Workflows too. A
workflow row gains the job list's sort key (`sort_at`: finished, else created, else the epoch),
filled in for every existing row, with the keyset indexes the jobs have (all, one team's); a
workflow's figures are its steps', found by `jobs.parent_uid` through a new index. Every existing
row is kept.
"""

from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

from inno_notify.adapters.db.migrations import ddl

revision: str = "0018"
down_revision: str | Sequence[str] | None = "0017"


def upgrade() -> None:
    ddl.add_columns("workflows", sa.Column("sort_at", ddl.timestamp(), nullable=True))
    workflows = sa.table(
        "workflows",
        sa.column("sort_at", ddl.timestamp()),
        sa.column("finished_at", ddl.timestamp()),
        sa.column("created_at", ddl.timestamp()),
    )
    # As tables.UTCDateTime binds it: aware on Postgres, naive UTC text on SQLite.
    postgres = op.get_bind().dialect.name == "postgresql"
    epoch = sa.literal(datetime(1970, 1, 1, tzinfo=UTC if postgres else None), ddl.timestamp())
    found = sa.func.coalesce(workflows.c.finished_at, workflows.c.created_at, epoch)
    op.execute(sa.update(workflows).values(sort_at=found))
    ddl.create_index("workflows", "sort_at", "uid", "cluster")
    ddl.create_index("workflows", "team", "sort_at", "uid", "cluster")
    ddl.create_index("jobs", "cluster", "parent_uid")


def downgrade() -> None:
    ddl.drop_index("jobs", "cluster", "parent_uid")
    ddl.drop_index("workflows", "team", "sort_at", "uid", "cluster")
    ddl.drop_index("workflows", "sort_at", "uid", "cluster")
    ddl.drop_columns("workflows", "sort_at")
