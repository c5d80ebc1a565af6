"""a person's Telegram link epoch and the channels a mute holds

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-02 10:00:00.000000

Trust boundaries (issue 29). `user_preferences.link_epoch`: the person's link generation, moved on
by every link, relink and /stop; a linking token carries the epoch it was minted under and links
only while it is current, so a newer link voids every older token. Tokens minted before this
revision carry none and count as epoch 0: everyone who already linked or stopped a chat
(self-service recorded it in `origins`, or used a token) starts at 1, so that such a token can no
longer take their chat over; everyone else stays at 0, and the tokens in their inboxes still link.
`user_preferences.muted_channels`: the channels a mute holds (NULL: every channel, as before).
Every existing row is kept.
"""

import json
from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

from inno_notify.adapters.db.migrations import ddl

revision: str = "0015"
down_revision: str | Sequence[str] | None = "0014"


def upgrade() -> None:
    json_type = ddl.json_type(none_as_null=True)
    ddl.add_columns(
        "user_preferences",
        sa.Column("link_epoch", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("muted_channels", json_type, nullable=True),
    )

    conn = op.get_bind()
    prefs = sa.table(
        "user_preferences",
        sa.column("email", sa.String()),
        sa.column("origins", json_type),
        sa.column("link_epoch", sa.BigInteger()),
        sa.column("updated_at", sa.DateTime(timezone=True)),
    )
    uses = sa.table("telegram_link_uses", sa.column("email", sa.String()))
    users = sa.table("users", sa.column("email", sa.String()), sa.column("telegram_chat_id", sa.BigInteger()))
    linked = {email for (email,) in conn.execute(sa.select(uses.c.email).distinct())}
    linked |= {
        email
        for (email,) in conn.execute(sa.select(users.c.email).where(users.c.telegram_chat_id.is_not(None)))
    }
    for email, origins in conn.execute(sa.select(prefs.c.email, prefs.c.origins)):
        if isinstance(origins, str):
            try:
                origins = json.loads(origins)
            except ValueError:
                origins = None
        if isinstance(origins, dict) and "telegram_chat_id" in origins:
            linked.add(email)
    have = {email for (email,) in conn.execute(sa.select(prefs.c.email))}
    now = datetime.now(UTC)
    for email in sorted(linked):
        if email in have:
            conn.execute(sa.update(prefs).where(prefs.c.email == email).values(link_epoch=1))
        else:
            # A row that sets nothing (no origins) but the epoch: the directory's values stand.
            conn.execute(sa.insert(prefs).values(email=email, origins={}, link_epoch=1, updated_at=now))


def downgrade() -> None:
    ddl.drop_columns("user_preferences", "muted_channels", "link_epoch")
