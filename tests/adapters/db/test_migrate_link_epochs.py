"""Migration 0015 on a database with people: everyone who has or had a Telegram chat starts at link
epoch 1 (so a token minted before epochs existed no longer takes their chat), everyone else at 0,
every row kept; and it goes down and up again, on both dialects."""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .revisions import columns_of, to, trip

AT = datetime(2026, 11, 30, 10, 5, tzinfo=UTC)


def _seed(connection: Connection) -> None:
    postgres = connection.dialect.name == "postgresql"
    at: object = AT if postgres else "2026-11-30 10:05:00"
    json = "CAST(:o AS JSONB)" if postgres else ":o"
    for email, chat in (("dir@x.org", 42), ("self@x.org", None), ("used@x.org", None), ("none@x.org", None)):
        connection.execute(
            sa.text(f"INSERT INTO users (email, telegram_chat_id, channels) VALUES (:e, :c, {json})"),
            {"e": email, "c": chat, "o": '["email"]'},
        )
    origins = '{"telegram_chat_id": {"via": "telegram", "at": "2026-11-30T10:05:00+00:00", "by": "7"}}'
    notify = '{"notify": {"via": "api", "at": "2026-11-30T10:05:00+00:00", "by": "ops"}}'
    for email, set_ in (("self@x.org", origins), ("none@x.org", notify)):
        connection.execute(
            sa.text(
                "INSERT INTO user_preferences (email, telegram_chat_id, origins, updated_at, notify)"
                f" VALUES (:e, NULL, {json}, :at, 'failure')"
            ),
            {"e": email, "o": set_, "at": at},
        )
    connection.execute(
        sa.text(
            "INSERT INTO telegram_link_uses (token_id, email, chat_id, used_at, expires_at)"
            " VALUES ('t', 'used@x.org', 9, :at, :at)"
        ),
        {"at": at},
    )


def _epochs(connection: Connection) -> dict[str, tuple[int, object]]:
    rows = connection.execute(sa.text("SELECT email, link_epoch, notify FROM user_preferences"))
    return {row[0]: (row[1], row[2]) for row in rows}


async def test_0015_starts_everyone_who_had_a_chat_at_epoch_1(empty_database_url: str) -> None:
    async with trip(empty_database_url) as db:
        await db.run(to("0013"), _seed)
        epochs = await db.run(to("0015"), _epochs)
        assert epochs == {
            "dir@x.org": (1, None),
            "self@x.org": (1, "failure"),
            "used@x.org": (1, None),
            "none@x.org": (0, "failure"),
        }
        columns = await db.run(to("0013", down=True), columns_of("user_preferences"))
        assert "link_epoch" not in columns and "muted_channels" not in columns
        assert (await db.up_to_head())[0] == "0014"
