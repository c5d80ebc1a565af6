"""Migration 0021 on a database with people: every preference row is kept with no e-mail preference
(NULL: never said, e-mail comes), one set afterwards is stored, and the revision goes down (the
column and who unsubscribed with it) and up again, on both dialects."""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .revisions import columns_of, to, trip

AT = datetime(2026, 12, 4, 10, 0, tzinfo=UTC)


def _seed(connection: Connection) -> None:
    postgres = connection.dialect.name == "postgresql"
    at: object = AT if postgres else "2026-12-04 10:00:00"
    json = "CAST(:o AS JSONB)" if postgres else ":o"
    origins = '{"nudges": {"via": "telegram", "at": "2026-12-04T10:00:00+00:00", "by": "7"}}'
    connection.execute(
        sa.text(
            "INSERT INTO user_preferences (email, origins, updated_at, nudges, link_epoch)"
            f" VALUES ('alice@x.org', {json}, :at, false, 3)"
        ),
        {"o": origins, "at": at},
    )


def _unsubscribe(connection: Connection) -> None:
    connection.execute(sa.text("UPDATE user_preferences SET emails = false WHERE email = 'alice@x.org'"))


def _rows(connection: Connection) -> list[tuple[object, ...]]:
    rows = connection.execute(sa.text("SELECT email, nudges, link_epoch, emails FROM user_preferences"))
    return [tuple(row) for row in rows]


async def test_0021_adds_the_e_mail_preference_and_keeps_every_row(empty_database_url: str) -> None:
    async with trip(empty_database_url) as db:
        await db.run(to("0020"), _seed)
        assert await db.run(to("0021"), _rows) == [("alice@x.org", False, 3, None)]
        assert await db.run(_unsubscribe, _rows) == [("alice@x.org", False, 3, False)]
        columns = await db.run(to("0020", down=True), columns_of("user_preferences"))
        assert "emails" not in columns and {"nudges", "link_epoch"} <= columns
        assert (await db.up_to_head())[0] == "0021"
        assert await db.run(_rows) == [("alice@x.org", False, 3, None)]
