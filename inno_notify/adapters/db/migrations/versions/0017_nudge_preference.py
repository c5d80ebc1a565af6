"""a person's own nudge preference

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-02 10:00:00.000000

Issue 29: a person may turn idle-GPU nudges off for themselves (`/nudges off` on Telegram, the
`nudges` preference of PUT /api/v1/users/{email}), on every channel. NULL: never said (nudges
come); every existing row keeps its values.
"""

from collections.abc import Sequence

import sqlalchemy as sa

from inno_notify.adapters.db.migrations import ddl

revision: str = "0017"
down_revision: str | Sequence[str] | None = "0016"


def upgrade() -> None:
    ddl.add_columns("user_preferences", sa.Column("nudges", sa.Boolean(), nullable=True))


def downgrade() -> None:
    ddl.drop_columns("user_preferences", "nudges")
