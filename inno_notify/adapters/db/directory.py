"""Queries on the directory (users and teams) and on the checkpoint key/value table."""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from inno_notify.adapters.db import codec
from inno_notify.adapters.db.sql import upsert
from inno_notify.adapters.db.tables import checkpoints, teams, users
from inno_notify.domain.model import DirectoryUser, Team


async def upsert_user(conn: AsyncConnection, user: DirectoryUser) -> None:
    row = codec.user_to_row(user)
    await conn.execute(upsert(conn, users, ["email"], [c for c in row if c != "email"]), [row])


async def get_user(conn: AsyncConnection, email: str) -> DirectoryUser | None:
    row = (await conn.execute(sa.select(users).where(users.c.email == email))).mappings().first()
    return None if row is None else codec.user_from_row(row)


async def list_users(conn: AsyncConnection) -> list[DirectoryUser]:
    result = await conn.execute(sa.select(users).order_by(users.c.email))
    return [codec.user_from_row(row) for row in result.mappings()]


async def delete_user(conn: AsyncConnection, email: str) -> bool:
    result = await conn.execute(sa.delete(users).where(users.c.email == email))
    return result.rowcount == 1


async def replace_teams(conn: AsyncConnection, new_teams: Sequence[Team]) -> None:
    await conn.execute(sa.delete(teams))
    if new_teams:
        await conn.execute(sa.insert(teams), [codec.team_to_row(t) for t in new_teams])


async def list_teams(conn: AsyncConnection) -> list[Team]:
    result = await conn.execute(sa.select(teams).order_by(teams.c.name))
    return [codec.team_from_row(row) for row in result.mappings()]


async def get_checkpoint(conn: AsyncConnection, key: str) -> str | None:
    return await conn.scalar(sa.select(checkpoints.c.value).where(checkpoints.c.key == key))


async def set_checkpoint(conn: AsyncConnection, key: str, value: str) -> None:
    await conn.execute(upsert(conn, checkpoints, ["key"], ["value"]), [{"key": key, "value": value}])
