"""Queries on a person's own preferences (domain.preferences) and the outbox rows a mute holds.

Preferences live in `user_preferences`, apart from the directory's `users` rows, which the service
re-seeds from the YAML file at every start; directory.py lays them over the users it reads. A
change is read-modify-write in the caller's transaction (the row locked on Postgres). When a
person's mute changes, the rows held until the old end are released at once (due now), and the
next claim holds them again until the new end if there is one: so /unmute sends what waited,
and a shorter mute does not keep rows to the longer one's end.

A change that links, relinks or unlinks the person's chat (from any surface) moves their link epoch
on in the same transaction (domain.telegram_linking: every linking token minted before is void);
and every change moves the directory version on (directory.bump_version), so that a cache of the
directory on any replica knows at its next use that it is stale.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from inno_notify.adapters.db.sql import dialect_insert, rows_in, upsert_rows
from inno_notify.adapters.db.tables import checkpoints, outbox, user_preferences
from inno_notify.domain.delivery import Mute
from inno_notify.domain.model import Channel, DeliveryStatus, NotifyMode
from inno_notify.domain.preferences import PREFERENCE_FIELDS, Origin, Preferences

log = logging.getLogger(__name__)

_PENDING = DeliveryStatus.PENDING.value
# The checkpoint that counts changes of the directory and of anyone's preferences: a cache of the
# directory (service.planner) compares it before each use, on any replica sharing the database.
DIRECTORY_VERSION_KEY = "directory.version"


def to_row(prefs: Preferences, now: datetime) -> dict[str, Any]:
    return {
        "email": prefs.email,
        "telegram_chat_id": prefs.telegram_chat_id,
        "channels": None if prefs.channels is None else list(prefs.channels),
        "notify": None if prefs.notify is None else prefs.notify.value,
        "muted_until": prefs.muted_until,
        "muted_channels": None if prefs.muted_channels is None else list(prefs.muted_channels),
        "nudges": prefs.nudges,
        "emails": prefs.emails,
        "origins": {name: origin.encode() for name, origin in prefs.origins.items()},
        "updated_at": now,
        "link_epoch": prefs.link_epoch,
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
        emails=_emails(row["emails"], "emails" in origins),
        origins=origins,
        muted_channels=_mute_scope(row["muted_channels"]),
        link_epoch=int(row["link_epoch"] or 0),
    )


def _mute_scope(value: object) -> tuple[str, ...] | None:
    """The stored scope of a mute; None (every channel) for NULL. A value that does not read holds
    every channel too: a mute errs on the side of holding, never of letting through."""
    if isinstance(value, list) and all(isinstance(c, str) for c in value):
        return tuple(value)
    return None


def _emails(value: object, said: bool) -> bool | None:
    """The stored e-mail preference: on only where it plainly says true, None where the person
    never said. A value that does not read, or one recorded as set without a value, turns e-mail
    off: an unsubscribe errs on the side of not sending, like a mute on the side of holding."""
    if value is True or (value is None and not said):
        return value
    return False


async def get_preferences(conn: AsyncConnection, email: str, *, lock: bool = False) -> Preferences | None:
    query = sa.select(user_preferences).where(user_preferences.c.email == email)
    if lock and conn.dialect.name == "postgresql":
        query = query.with_for_update()
    row = (await conn.execute(query)).mappings().first()
    return None if row is None else from_row(row)


async def all_preferences(conn: AsyncConnection) -> dict[str, Preferences]:
    """Everyone's own preferences, by e-mail as stored."""
    rows = (await conn.execute(sa.select(user_preferences))).mappings()
    return {row["email"]: from_row(row) for row in rows}


async def save_preferences(conn: AsyncConnection, prefs: Preferences, now: datetime) -> None:
    await upsert_rows(conn, user_preferences, ["email"], [to_row(prefs, now)])


async def change_preferences(
    conn: AsyncConnection,
    email: str,
    now: datetime,
    *,
    changes: Mapping[str, Any] | None = None,
    origin: Origin | None = None,
    reset: Sequence[str] = (),
    new_link: bool = False,
) -> Preferences:
    """Sets `changes` (as from `origin`) and unsets `reset` in the person's preferences; returns
    them as stored. Rows a changed mute held are released, and a changed chat (or `new_link`: a
    linking token was spent, even on the chat already linked) moves the link epoch on (see the
    module docstring)."""
    before = await locked_preferences(conn, email, now)
    after = before.reset(tuple(reset)) if reset else before
    if changes:
        if origin is None:
            raise ValueError("a change needs its origin")
        after = after.changed(changes, origin)
    if new_link or before.chat_changed(after):
        after = replace(after, link_epoch=before.link_epoch + 1)
    await save_preferences(conn, after, now)
    if before.muted_until is not None and before.muted_until != after.muted_until:
        await release_held(conn, email, before.muted_until, now)
    if after.email_off and not before.email_off:
        await drop_waiting_email(conn, email, now)
    await bump_directory_version(conn)
    return after


async def locked_preferences(conn: AsyncConnection, email: str, now: datetime) -> Preferences:
    """The person's preferences, their row locked for the rest of the transaction on Postgres.

    The row is made first where there is none (setting nothing), so that there is always a row to
    lock: two transactions linking one person at once then take turns, and the second sees the
    first's epoch (SQLite's write transactions take turns anyway)."""
    empty = to_row(Preferences(email), now)
    await conn.execute(
        dialect_insert(conn, user_preferences)
        .values(**empty)
        .on_conflict_do_nothing(index_elements=["email"])
    )
    found = await get_preferences(conn, email, lock=True)
    assert found is not None  # just made
    return found


async def advance_link_epochs(conn: AsyncConnection, emails: Collection[str], now: datetime) -> None:
    """Moves those people's link epochs on (their chat changed in the directory entry itself)."""
    for email in sorted(set(emails)):
        await locked_preferences(conn, email, now)
        await conn.execute(
            sa.update(user_preferences)
            .where(user_preferences.c.email == email)
            .values(link_epoch=user_preferences.c.link_epoch + 1)
        )


async def bump_directory_version(conn: AsyncConnection) -> None:
    """Moves the directory version on, in the caller's transaction (see DIRECTORY_VERSION_KEY)."""
    stmt = dialect_insert(conn, checkpoints).values(key=DIRECTORY_VERSION_KEY, value="1")
    counter = sa.cast(sa.cast(checkpoints.c.value, sa.BigInteger) + 1, sa.String)
    await conn.execute(stmt.on_conflict_do_update(index_elements=["key"], set_={"value": counter}))


async def directory_version(conn: AsyncConnection) -> str:
    """The directory version now ("0": never changed since the store was made)."""
    value = await conn.scalar(
        sa.select(checkpoints.c.value).where(checkpoints.c.key == DIRECTORY_VERSION_KEY)
    )
    return "0" if value is None else str(value)


async def mutes_of(conn: AsyncConnection, recipients: Collection[str], now: datetime) -> dict[str, Mute]:
    """The mutes still running of those recipients (lower-case e-mail → the mute)."""
    found: dict[str, Mute] = {}
    emails = sorted({r.strip().lower() for r in recipients if "@" in r})
    p = user_preferences.c
    query = sa.select(p.email, p.muted_until, p.muted_channels).where(p.muted_until > now)
    for row in await rows_in(conn, query, sa.func.lower(p.email), emails):
        channels = _mute_scope(row["muted_channels"])
        found[row["email"].lower()] = Mute(
            row["muted_until"], None if channels is None else frozenset(channels)
        )
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


EMAIL_TURNED_OFF = "not sent: the recipient turned e-mail off"


async def drop_waiting_email(conn: AsyncConnection, email: str, now: datetime) -> int:
    """Marks the person's e-mail that still waits (pending, not being sent right now) failed, with
    why: once they turn e-mail off, nothing more reaches their mailbox — a message queued before
    the click included. An admin may retry one (POST /api/v1/notifications/{id}/retry)."""
    result = await conn.execute(
        sa.update(outbox)
        .where(
            sa.func.lower(outbox.c.recipient) == email.strip().lower(),
            outbox.c.channel == Channel.EMAIL.value,
            outbox.c.status == _PENDING,
            outbox.c.claim_token.is_(None),
        )
        .values(status=DeliveryStatus.FAILED.value, failed_at=now, last_error=EMAIL_TURNED_OFF)
    )
    return int(result.rowcount)


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
