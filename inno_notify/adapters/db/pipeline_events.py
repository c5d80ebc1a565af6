"""Pipeline messages (POST /api/v1/events) as stored: once per (token, key), within the rate limits.

Why a module of its own: recording an event is a decision taken under a lock, not an insert. In
one write transaction it (1) serializes with every other post by the same token or to the same
recipients, on any replica (Postgres: transaction-scoped advisory locks taken in one global order,
so two posts never deadlock; SQLite: the write transaction holds the database's write lock from its
start), (2) answers a key the token used before (the same body: that event again; another body: a
conflict), (3) counts the token's events of the last `per_token_window` and each recipient's of
the last `per_recipient_window` and refuses past a limit, saying when a post may succeed again,
(4) writes the event, one row per resolved recipient (what the next count reads) and the outbox
rows, all or nothing. Counting in the database, not in a replica's memory, is what makes a limit
hold for a deployment of several replicas.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from inno_notify.adapters.db import outbox
from inno_notify.adapters.db.sql import dialect_insert
from inno_notify.adapters.db.tables import pipeline_event_recipients, pipeline_events
from inno_notify.adapters.db.transactions import Repository
from inno_notify.domain.model import Notification


@dataclass(frozen=True, slots=True)
class EventRecord:
    """A pipeline event as stored: its id, key, and the (recipient, channel) pairs it went to."""

    id: int
    key: str
    recipients: tuple[tuple[str, str], ...]
    created: bool


@dataclass(frozen=True, slots=True)
class EventLimits:
    """How many events a token may have accepted per window, and a recipient be sent per window."""

    per_token: int = 60
    per_recipient: int = 10
    per_token_window: timedelta = timedelta(minutes=1)
    per_recipient_window: timedelta = timedelta(hours=1)


@dataclass(frozen=True, slots=True)
class EventLimited:
    """Refused, over a limit: `limit` is "token" or "recipient", `subject` the token's name or the
    recipient, `until` when the oldest counted event leaves the window, `retry_after` the whole
    seconds until then."""

    limit: str
    subject: str
    count: int
    allowed: int
    window: timedelta
    until: datetime
    retry_after: int


@dataclass(frozen=True, slots=True)
class KeyReused:
    """The token posted this key before with another body: nothing written."""

    earlier: EventRecord


EventOutcome = EventRecord | EventLimited | KeyReused


async def find_event(conn: AsyncConnection, sender: str, key: str) -> tuple[EventRecord, str | None] | None:
    """The event `sender` posted under `key`, with the fingerprint of its body (None: posted
    before bodies were fingerprinted)."""
    row = (
        await conn.execute(
            sa.select(
                pipeline_events.c.id, pipeline_events.c.recipients, pipeline_events.c.fingerprint
            ).where(pipeline_events.c.sender == sender, pipeline_events.c.key == key)
        )
    ).first()
    if row is None:
        return None
    return EventRecord(int(row.id), key, tuple((r, c) for r, c in row.recipients), False), row.fingerprint


def _earlier(found: tuple[EventRecord, str | None], fingerprint: str) -> EventRecord | KeyReused:
    record, stored = found
    return record if stored is None or stored == fingerprint else KeyReused(record)


async def _serialize(conn: AsyncConnection, names: Sequence[str]) -> None:
    """Holds, until the transaction ends, a lock per name, taken in sorted order (no deadlock), in
    one statement: the function scan of the array yields its elements in order."""
    if conn.dialect.name != "postgresql":
        return  # SQLite: the write transaction already holds the only write lock
    await conn.execute(
        sa.text(
            "SELECT pg_advisory_xact_lock(hashtextextended(name, 0))"
            " FROM unnest(CAST(:names AS text[])) WITH ORDINALITY AS locks(name, position)"
            " ORDER BY position"
        ),
        {"names": [f"inno-notify/events/{name}" for name in sorted(set(names))]},
    )


def limited(
    limit: str, subject: str, count: int, allowed: int, window: timedelta, oldest: datetime, at: datetime
) -> EventLimited:
    """The refusal of `subject`, whose oldest counted event (at `oldest`) leaves `window` later."""
    until = oldest + window
    retry = max(1, math.ceil((until - at).total_seconds()))
    return EventLimited(limit, subject, count, allowed, window, until, retry)


async def _over_limits(
    conn: AsyncConnection, sender: str, recipients: Sequence[str], at: datetime, limits: EventLimits
) -> EventLimited | None:
    """The first limit the event would break, counted in one statement: the token's events of its
    window and each recipient's of theirs (indexes on (sender, created_at), (recipient, created_at))."""
    events, table = pipeline_events, pipeline_event_recipients
    per_token = sa.select(
        sa.literal("token", sa.String()),
        sa.literal(sender, sa.String()),
        sa.func.count(),
        sa.func.min(events.c.created_at),
    ).where(events.c.sender == sender, events.c.created_at > at - limits.per_token_window)
    if recipients:
        per_recipient = (
            sa.select(
                sa.literal("recipient", sa.String()),
                table.c.recipient,
                sa.func.count(),
                sa.func.min(table.c.created_at),
            )
            .where(
                table.c.recipient.in_(sorted(set(recipients))),
                table.c.created_at > at - limits.per_recipient_window,
            )
            .group_by(table.c.recipient)
        )
        query: sa.Executable = sa.union_all(per_token, per_recipient)
    else:
        query = per_token
    rows = await conn.execute(query)
    counts = {(kind, subject): (int(count), oldest) for kind, subject, count, oldest in rows}
    # Stated in a fixed order (the token first, then recipients by name), whatever the rows' order.
    for kind, subject in [("token", sender), *(("recipient", r) for r in sorted(set(recipients)))]:
        count, oldest = counts.get((kind, subject), (0, None))
        allowed = limits.per_token if kind == "token" else limits.per_recipient
        if count >= allowed and oldest is not None:
            window = limits.per_token_window if kind == "token" else limits.per_recipient_window
            return limited(kind, subject, count, allowed, window, oldest, at)
    return None


class EventRepository(Repository):
    """Pipeline events: looked up and recorded per posting token."""

    async def get_event(self, sender: str, key: str, fingerprint: str) -> EventRecord | KeyReused | None:
        """The event `sender` posted under `key` (KeyReused when its body differs), if any."""
        async with self.read() as conn:
            found = await find_event(conn, sender, key)
        return None if found is None else _earlier(found, fingerprint)

    async def record_event(
        self,
        sender: str,
        key: str,
        fingerprint: str,
        title: str,
        notifications: Sequence[Notification],
        at: datetime,
        limits: EventLimits,
        *,
        fresh_key: bool = False,
    ) -> EventOutcome:
        """Records the event and enqueues its rows, unless `sender` posted `key` before (that event,
        `created` False; with another body KeyReused) or a limit says no (EventLimited): then nothing
        is written. Each distinct recipient of `notifications` (lower-cased) counts once.
        `fresh_key`: the key was made up for this post (a random one), so no earlier event is looked
        for before the limits (the insert still refuses a taken key)."""
        async with self._write() as conn:
            recipients = sorted({n.recipient.strip().lower() for n in notifications})
            await _serialize(conn, [f"token/{sender}", *(f"recipient/{r}" for r in recipients)])
            if not fresh_key:
                found = await find_event(conn, sender, key)
                if found is not None:
                    return _earlier(found, fingerprint)
            limited = await _over_limits(conn, sender, recipients, at, limits)
            if limited is not None:
                return limited
            pairs = [[n.recipient, n.channel.value] for n in notifications]
            stmt = (
                dialect_insert(conn, pipeline_events)
                .values(
                    key=key,
                    sender=sender,
                    title=title,
                    recipients=pairs,
                    created_at=at,
                    fingerprint=fingerprint,
                )
                .on_conflict_do_nothing(index_elements=["sender", "key"])
                .returning(pipeline_events.c.id)
            )
            inserted = (await conn.execute(stmt)).scalar()
            if inserted is None:  # another writer took the key between our look and our insert
                again = await find_event(conn, sender, key)
                assert again is not None  # events are never deleted
                return _earlier(again, fingerprint)
            if recipients:
                await conn.execute(
                    sa.insert(pipeline_event_recipients),
                    [{"event_id": int(inserted), "recipient": r, "created_at": at} for r in recipients],
                )
            await outbox.enqueue(conn, notifications)
            return EventRecord(int(inserted), key, tuple((r, c) for r, c in pairs), True)
