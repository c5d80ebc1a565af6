"""self-service preferences and used linking tokens

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02 09:00:00.000000

Self-service on Telegram (issue 19): a person's own preferences over their directory entry (a
linked chat, channels, failures only, a mute) with where each came from, and the linking tokens
already used. The lead re-chains this revision after the other branches' migrations at merge.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from inno_notify.adapters.db.migrations import ddl

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"


def upgrade() -> None:
    json = ddl.json_type(none_as_null=True)
    ddl.create_table(
        "user_preferences",
        ["email"],
        sa.Column("email", sa.String(), nullable=False),
        sa.Column("telegram_chat_id", sa.BigInteger(), nullable=True),
        sa.Column("channels", json, nullable=True),
        sa.Column("notify", sa.String(), nullable=True),
        sa.Column("muted_until", ddl.timestamp(), nullable=True),
        sa.Column("origins", json, nullable=False),
        sa.Column("updated_at", ddl.timestamp(), nullable=False),
    )
    ddl.create_index("user_preferences", "muted_until")
    ddl.create_table(
        "telegram_link_uses",
        ["token_id"],
        *ddl.required(sa.String(), "token_id", "email"),
        sa.Column("chat_id", sa.BigInteger(), nullable=False),
        *ddl.required(ddl.timestamp(), "used_at", "expires_at"),
    )
    ddl.create_index("telegram_link_uses", "expires_at")


def downgrade() -> None:
    ddl.drop_index("telegram_link_uses", "expires_at")
    op.drop_table("telegram_link_uses")
    ddl.drop_index("user_preferences", "muted_until")
    op.drop_table("user_preferences")
