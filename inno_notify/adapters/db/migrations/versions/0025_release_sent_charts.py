"""an index of the stored charts not yet released, for the sweep that releases them once sent

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-03 17:10:00.000000

A summary's chart (~20 KB, migration 0022) is needed until its messages are sent; kept for good it
would grow the database by that much per job. The usage service releases (sets to NULL) the charts
of jobs with no pending message after each round (series.release_sent_charts), reading them through
this partial index: only the rows that still hold a chart, a round's worth, never every series.
The job page draws its chart from the series, as before.
"""

from collections.abc import Sequence

import sqlalchemy as sa

from inno_notify.adapters.db.migrations import ddl

revision: str = "0025"
down_revision: str | Sequence[str] | None = "0024"

HELD = sa.text("chart IS NOT NULL")


def upgrade() -> None:
    ddl.create_index("usage_series", "cluster", "job_uid", postgresql_where=HELD, sqlite_where=HELD)


def downgrade() -> None:
    ddl.drop_index("usage_series", "cluster", "job_uid")
