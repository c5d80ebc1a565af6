"""Queries on a person's own preferences (domain.preferences) and the outbox rows a mute holds.

Preferences live in `user_preferences`, apart from the directory's `users` rows, which the service
re-seeds from the YAML file at every start; directory.py lays them over the users it reads. A
change is read-modify-write in the caller's transaction (the row locked on Postgres). When a
person's mute changes, the rows held until the old end are released at once (due now), and the
next claim holds them again until the new end if there is one: so /unmute sends what waited,
and a shorter mute does not keep rows to the longer one's end.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from inno_notify.adapters.db.sql import chunks, upsert
from inno_notify.adapters.db.tables import outbox, user_preferences
from inno_notify.domain.model import DeliveryStatus, NotifyMode
from inno_notify.domain.preferences import PREFERENCE_FIELDS, Origin, Preferences

log = logging.getLogger(__name__)

_PENDING = DeliveryStatus.PENDING.value


def to_row(prefs: Preferences, now: datetime) -> dict[str, Any]:
    return {
        "email": prefs.email,
        "telegram_chat_id": prefs.telegram_chat_id,
        "channels": None if prefs.channels is None else list(prefs.channels),
        "notify": None if prefs.notify is None else prefs.notify.value,
        "muted_until": prefs.muted_until,
        "nudges": prefs.nudges,
        "origins": {name: origin.encode() for name, origin in prefs.origins.items()},
        "updated_at": now,
    }


def from_row(row: RowMapping) -> Preferences:
    """A stored row as preferences; a field whose stored value or origin does not read is left
    unset (the directory's value stands) and logged, never fatal."""
    origins: dict[str, Origin] = {}
    raw = row["origins"] if isinstance(row["origins"], Mapping) else {}
    for name, data in raw.items():
        if name not in PREFERENCE_FIELDS or not isinstance(data, Mapping):
            continue
        try:
            origins[name] = Origin.decode(data)
        except ValueError as exc:
            log.warning("preference %s of %s has an unreadable origin: %s", name, row["email"], exc)
    channels = row["channels"]
    readable = isinstance(channels, list) and all(isinstance(c, str) for c in channels)
    if channels is not None and not readable:
        origins.pop("channels", None)
        channels = None
    notify: NotifyMode | None = None
    if row["notify"] is not None:
        try:
            notify = NotifyMode(row["notify"])
        except ValueError:
            origins.pop("notify", None)
    return Preferences(
        email=row["email"],
        telegram_chat_id=row["telegram_chat_id"],
        channels=None if channels is None else tuple(channels),
        notify=notify,
        muted_until=row["muted_until"],
        nudges=row["nudges"] if isinstance(row["nudges"], bool) else None,
        origins=origins,
    )


async def get_preferences(conn: AsyncConnection, email: str, *, lock: bool = False) -> Preferences | None:
    query = sa.select(user_preferences).where(user_preferences.c.email == email)
    if lock and conn.dialect.name == "postgresql":
        query = query.with_for_update()
    row = (await conn.execute(query)).mappings().first()
    return None if row is None else from_row(row)


async def all_preferences(conn: AsyncConnection) -> dict[str, Preferences]:
    rows = (await conn.execute(sa.select(user_preferences))).mappings()
    return {row["email"]: from_row(row) for row in rows}


async def save_preferences(conn: AsyncConnection, prefs: Preferences, now: datetime) -> None:
    row = to_row(prefs, now)
    await conn.execute(upsert(conn, user_preferences, ["email"], [c for c in row if c != "email"]), [row])


async def change_preferences(
    conn: AsyncConnection,
    email: str,
    now: datetime,
    *,
    changes: Mapping[str, Any] | None = None,
    origin: Origin | None = None,
    reset: Sequence[str] = (),
) -> Preferences:
    """Sets `changes` (as from `origin`) and unsets `reset` in the person's preferences; returns
    them as stored. Rows a changed mute held are released (see the module docstring)."""
    before = await get_preferences(conn, email, lock=True) or Preferences(email)
    after = before.reset(tuple(reset)) if reset else before
    if changes:
        if origin is None:
            raise ValueError("a change needs its origin")
        after = after.changed(changes, origin)
    await save_preferences(conn, after, now)
    if before.muted_until is not None and before.muted_until != after.muted_until:
        await release_held(conn, email, before.muted_until, now)
    return after


async def mutes_of(conn: AsyncConnection, recipients: Collection[str], now: datetime) -> dict[str, datetime]:
    """The mutes still running of those recipients (lower-case e-mail → end)."""
    found: dict[str, datetime] = {}
    emails = sorted({r.strip().lower() for r in recipients if "@" in r})
    for chunk in chunks(emails):
        rows = await conn.execute(
            sa.select(user_preferences.c.email, user_preferences.c.muted_until).where(
                user_preferences.c.muted_until > now,
                sa.func.lower(user_preferences.c.email).in_(list(chunk)),
            )
        )
        found.update({email.lower(): until for email, until in rows})
    return found


async def hold(conn: AsyncConnection, held: Sequence[tuple[int, datetime]]) -> None:
    """Holds outbox rows until their recipient's mute ends: due then, and held by no claim."""
    if not held:
        return
    await conn.execute(
        sa.update(outbox)
        .where(outbox.c.id == sa.bindparam("b_id"))
        .values(
            next_attempt_at=sa.bindparam("b_until"),
            due_at=sa.bindparam("b_until"),
            claim_token=None,
            claim_term=None,
        ),
        [{"b_id": id, "b_until": until} for id, until in held],
    )


async def release_held(conn: AsyncConnection, email: str, until: datetime, now: datetime) -> int:
    """Makes the rows held until `until` for `email` due now; returns how many."""
    result = await conn.execute(
        sa.update(outbox)
        .where(
            outbox.c.recipient == email,
            outbox.c.status == _PENDING,
            outbox.c.next_attempt_at == until,
            outbox.c.due_at == until,
        )
        .values(next_attempt_at=now, due_at=now)
    )
    return int(result.rowcount)
