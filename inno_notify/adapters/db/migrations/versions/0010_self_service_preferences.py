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
from sqlalchemy.dialects import postgresql

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _json() -> sa.types.TypeEngine:  # type: ignore[type-arg]
    return sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")


def upgrade() -> None:
    op.create_table(
        "user_preferences",
        sa.Column("email", sa.String(), nullable=False),
        sa.Column("telegram_chat_id", sa.BigInteger(), nullable=True),
        sa.Column("channels", _json(), nullable=True),
        sa.Column("notify", sa.String(), nullable=True),
        sa.Column("muted_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("origins", _json(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("email", name=op.f("pk_user_preferences")),
    )
    op.create_index(
        op.f("ix_user_preferences_muted_until"), "user_preferences", ["muted_until"], unique=False
    )
    op.create_table(
        "telegram_link_uses",
        sa.Column("token_id", sa.String(), nullable=False),
        sa.Column("email", sa.String(), nullable=False),
        sa.Column("chat_id", sa.BigInteger(), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("token_id", name=op.f("pk_telegram_link_uses")),
    )
    op.create_index(
        op.f("ix_telegram_link_uses_expires_at"), "telegram_link_uses", ["expires_at"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_telegram_link_uses_expires_at"), table_name="telegram_link_uses")
    op.drop_table("telegram_link_uses")
    op.drop_index(op.f("ix_user_preferences_muted_until"), table_name="user_preferences")
    op.drop_table("user_preferences")
