"""Who is who: directory users and teams, a person's own preferences, and the Telegram bot's state.

`Store.directory`. Directory and preference writes may come from any replica (the admin API, a
person's edit); the Telegram bot's polled updates are the leader's and fenced.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from inno_notify.adapters.db import directory, preferences
from inno_notify.adapters.db.telegram_bot import BotTransaction, update_offset
from inno_notify.adapters.db.transactions import Repository, reads
from inno_notify.domain.model import DirectoryUser, Team
from inno_notify.domain.preferences import Origin, Preferences


class DirectoryRepository(Repository):
    """Users, teams, preferences and the Telegram bot state."""

    async def upsert_user(self, user: DirectoryUser) -> None:
        async with self._write() as conn:
            await directory.upsert_user(conn, user)

    async def upsert_users(self, users: Sequence[DirectoryUser]) -> None:
        """Many directory entries in one transaction (the configured directory at every start)."""
        async with self._write() as conn:
            await directory.upsert_users(conn, users)

    get_user = reads(directory.get_user)
    list_users = reads(directory.list_users)

    # What routing reads (domain.routing.Directory), in one connection.
    snapshot = reads(directory.snapshot)

    # The directory version: it changes with every write of a user, team or preference, on any
    # replica (a primary-key read, cheap enough to ask before each use of a cache).
    version = reads(directory.version)

    async def delete_user(self, email: str) -> bool:
        async with self._write() as conn:
            return await directory.delete_user(conn, email)

    async def get_preferences(self, email: str) -> Preferences | None:
        async with self.read() as conn:
            return await preferences.get_preferences(conn, email)

    all_preferences = reads(preferences.all_preferences)

    async def change_preferences(
        self,
        email: str,
        now: datetime,
        *,
        changes: Mapping[str, Any] | None = None,
        origin: Origin | None = None,
        reset: Sequence[str] = (),
    ) -> Preferences:
        """Sets and unsets a person's preferences (the API's edit; any replica may make it)."""
        async with self._write() as conn:
            return await preferences.change_preferences(
                conn, email, now, changes=changes, origin=origin, reset=reset
            )

    @contextlib.asynccontextmanager
    async def bot_transaction(self, *, fenced: bool) -> AsyncIterator[BotTransaction]:
        """One Telegram update's reads and writes (telegram_bot.py). `fenced`: the leader's, for
        updates it polled; a webhook's request is handled by whichever replica it reached."""
        writer = self._leader_write() if fenced else self._write()
        async with writer as conn:
            yield BotTransaction(conn)

    # The first Telegram update id of that bot not handled yet.
    telegram_offset = reads(update_offset)

    async def set_telegram_offset(self, bot_id: str, offset: int) -> None:
        """Moves the leader's update offset past updates handled (or set aside) without a transaction
        of their own."""
        async with self._leader_write() as conn:
            await BotTransaction(conn).set_offset(bot_id, offset)

    async def replace_teams(self, teams: Sequence[Team]) -> None:
        async with self._write() as conn:
            await directory.replace_teams(conn, teams)

    list_teams = reads(directory.list_teams)
