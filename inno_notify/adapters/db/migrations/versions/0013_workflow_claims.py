"""workflow claims carry a token and a term

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-01 09:10:00.000000

Several clusters in one database (issue 21): a workflow summary claim records the claim token and
the leadership term it was made in, like job usage claims (0006), so that a new leader takes a
dead leader's claims at once instead of waiting out their lease, and a late write of the old
claimer settles nothing.
"""

from collections.abc import Sequence

from inno_notify.adapters.db.migrations import ddl

revision: str = "0013"
down_revision: str | Sequence[str] | None = "0012"


def upgrade() -> None:
    ddl.add_columns("workflows", *ddl.claim_columns())


def downgrade() -> None:
    ddl.drop_columns("workflows", *ddl.claim_column_names())
