"""Queries on the directory (users and teams) and on the checkpoint key/value table.

Users are read as they stand for routing: each one's own preferences (preferences.py), where they
set any, override the directory entry (domain.preferences.apply_preferences). `directory_user`
reads the entry alone, as the YAML file or an admin wrote it.

Every write here moves the directory version on in its own transaction
(preferences.bump_version), so that caches of the directory follow at once; a directory entry
whose chat changes moves that person's link epoch on (domain.telegram_linking).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from inno_notify.adapters.db import codec
from inno_notify.adapters.db.preferences import (
    advance_link_epochs,
    all_preferences,
    bump_directory_version,
    directory_version,
    get_preferences,
)
from inno_notify.adapters.db.sql import chunks, last_per_key, upsert
from inno_notify.adapters.db.tables import checkpoints, teams, user_preferences, users
from inno_notify.domain.model import DirectoryUser, Team
from inno_notify.domain.preferences import Preferences, apply_preferences
from inno_notify.domain.routing import Directory


async def upsert_user(conn: AsyncConnection, user: DirectoryUser) -> None:
    await upsert_users(conn, [user])


async def upsert_users(conn: AsyncConnection, entries: Sequence[DirectoryUser]) -> None:
    """One statement per chunk of users: seeding a directory of thousands at every start must not
    cost a transaction each (10,000 took 95 s under load; bench/soak.py)."""
    rows = last_per_key([codec.user_to_row(user) for user in entries], ("email",))
    if not rows:
        return
    statement = upsert(conn, users, ["email"], [c for c in rows[0] if c != "email"])
    for chunk in chunks(rows):
        chats = {row["email"]: row["telegram_chat_id"] for row in chunk}
        stored = await conn.execute(
            sa.select(users.c.email, users.c.telegram_chat_id).where(users.c.email.in_(list(chats)))
        )
        moved = [email for email, chat in stored if chat != chats[email]]
        await conn.execute(statement, list(chunk))
        if moved:
            await advance_link_epochs(conn, moved, datetime.now(UTC))
    await bump_directory_version(conn)


async def directory_user(conn: AsyncConnection, email: str) -> DirectoryUser | None:
    """The directory entry as written, without the person's own preferences."""
    row = (await conn.execute(sa.select(users).where(users.c.email == email))).mappings().first()
    return None if row is None else codec.user_from_row(row)


async def get_user(conn: AsyncConnection, email: str) -> DirectoryUser | None:
    """The user with their own preferences applied."""
    user = await directory_user(conn, email)
    return None if user is None else apply_preferences(user, await get_preferences(conn, email))


async def list_users(conn: AsyncConnection) -> list[DirectoryUser]:
    """Every user, ordered by e-mail, with their own preferences applied."""
    return _applied(await _entries(conn), await all_preferences(conn))


async def snapshot(conn: AsyncConnection) -> Directory:
    """What routing reads: every user (their own preferences applied), every team, and who turned
    e-mail off, in or outside the directory; everyone's preferences read once for both."""
    preferences = await all_preferences(conn)
    found = _applied(await _entries(conn), preferences)
    return Directory(
        {u.email.lower(): u for u in found},
        {t.name: t for t in await list_teams(conn)},
        frozenset(email.lower() for email, prefs in preferences.items() if prefs.email_off),
    )


async def _entries(conn: AsyncConnection) -> list[DirectoryUser]:
    result = await conn.execute(sa.select(users).order_by(users.c.email))
    return [codec.user_from_row(row) for row in result.mappings()]


def _applied(entries: Sequence[DirectoryUser], preferences: Mapping[str, Preferences]) -> list[DirectoryUser]:
    return [apply_preferences(user, preferences.get(user.email)) for user in entries]


async def delete_user(conn: AsyncConnection, email: str) -> bool:
    """Removes the user and what they set for themselves (a user added again starts afresh)."""
    result = await conn.execute(sa.delete(users).where(users.c.email == email))
    await conn.execute(sa.delete(user_preferences).where(user_preferences.c.email == email))
    await bump_directory_version(conn)
    return result.rowcount == 1


async def replace_teams(conn: AsyncConnection, new_teams: Sequence[Team]) -> None:
    await conn.execute(sa.delete(teams))
    if new_teams:
        await conn.execute(sa.insert(teams), [codec.team_to_row(t) for t in new_teams])
    await bump_directory_version(conn)


async def version(conn: AsyncConnection) -> str:
    """The directory version (preferences.DIRECTORY_VERSION_KEY): equal means nothing changed."""
    return await directory_version(conn)


async def list_teams(conn: AsyncConnection) -> list[Team]:
    result = await conn.execute(sa.select(teams).order_by(teams.c.name))
    return [codec.team_from_row(row) for row in result.mappings()]


async def get_checkpoint(conn: AsyncConnection, key: str) -> str | None:
    return await conn.scalar(sa.select(checkpoints.c.value).where(checkpoints.c.key == key))


async def set_checkpoint(conn: AsyncConnection, key: str, value: str) -> None:
    await conn.execute(upsert(conn, checkpoints, ["key"], ["value"]), [{"key": key, "value": value}])
