"""a person's own e-mail preference (one-click unsubscribe)

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-04 10:00:00.000000

Issue 33: every e-mail carries a signed one-click unsubscribe link (RFC 8058); following it turns
e-mail off for that address, in or outside the directory (`user_preferences.emails` false; the
`emails` preference of PUT /api/v1/users/{email} sets and resets it too). NULL: never said (e-mail
comes); every existing row keeps its values. The downgrade drops the column, and with it who
unsubscribed: the previous release, which knows no such preference, e-mails them again.
"""

from collections.abc import Sequence

import sqlalchemy as sa

from inno_notify.adapters.db.migrations import ddl

revision: str = "0021"
down_revision: str | Sequence[str] | None = "0020"


def upgrade() -> None:
    ddl.add_columns("user_preferences", sa.Column("emails", sa.Boolean(), nullable=True))


def downgrade() -> None:
    ddl.drop_columns("user_preferences", "emails")
