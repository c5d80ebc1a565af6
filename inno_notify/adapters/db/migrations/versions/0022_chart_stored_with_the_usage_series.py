"""the summary's chart stored with the job's usage series

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-03 15:30:00.000000

Issues 31 and 32: a summary's chart (a PNG of ~20 KB) was drawn when its job was measured and kept
in the leader's memory for the send; a replica that took over (or a restart) found none and drew
every chart on the send path. The usage round now stores it in `usage_series.chart`, beside the
series it is drawn from and in the same transaction, and the send reads it with the series. NULL
where none was drawn, as for every row stored before this revision: those are drawn at the send,
as before. The downgrade drops the column (the charts are drawn again from the series).
"""

from collections.abc import Sequence

import sqlalchemy as sa

from inno_notify.adapters.db.migrations import ddl

revision: str = "0022"
down_revision: str | Sequence[str] | None = "0021"


def upgrade() -> None:
    ddl.add_columns("usage_series", sa.Column("chart", sa.LargeBinary(), nullable=True))


def downgrade() -> None:
    ddl.drop_columns("usage_series", "chart")
