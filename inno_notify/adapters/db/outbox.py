"""The notification outbox outside dispatch: enqueue, the delivery log, an admin's retry, counts.

A row per message exists before anything is sent, and dedup keys make enqueueing idempotent
(replays and restarts insert nothing new). Claiming rows and recording what became of them is
outbox_repository's, the one place that does it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from inno_notify.adapters.db import codec
from inno_notify.adapters.db.sql import decode_cursor, dialect_insert, encode_cursor, last_per_key
from inno_notify.adapters.db.tables import outbox
from inno_notify.domain.model import DeliveryStatus, Notification

_PENDING = DeliveryStatus.PENDING.value


async def enqueue(conn: AsyncConnection, notifications: Sequence[Notification]) -> int:
    """Inserts the notifications whose dedup key is new; returns how many were inserted."""
    if not notifications:
        return 0
    rows = last_per_key([codec.notification_to_row(n) for n in notifications], ("dedup_key",))
    stmt = (
        dialect_insert(conn, outbox)
        .on_conflict_do_nothing(index_elements=["dedup_key"])
        .returning(outbox.c.id)
    )
    result = await conn.execute(stmt, rows)
    return len(result.all())


async def retry(conn: AsyncConnection, id: int, now: datetime) -> bool:
    """Puts a failed row back in the queue, due now, with a fresh attempt count (an admin's retry)."""
    result = await conn.execute(
        sa.update(outbox)
        .where(outbox.c.id == id, outbox.c.status == DeliveryStatus.FAILED.value)
        .values(
            status=_PENDING,
            due_at=now,
            next_attempt_at=now,
            attempts=0,
            failed_at=None,
            claim_token=None,
            claim_term=None,
        )
    )
    return result.rowcount == 1


async def get(conn: AsyncConnection, id: int) -> Notification | None:
    row = (await conn.execute(sa.select(outbox).where(outbox.c.id == id))).mappings().first()
    return None if row is None else codec.notification_from_row(row)


async def list_page(
    conn: AsyncConnection, status: DeliveryStatus | None, limit: int, cursor: str | None
) -> tuple[list[Notification], str | None]:
    """The delivery log, newest first, keyset-paginated on the id."""
    query = sa.select(outbox)
    if status is not None:
        query = query.where(outbox.c.status == status.value)
    if cursor is not None:
        (before,) = decode_cursor(cursor, (int,))
        query = query.where(outbox.c.id < before)
    rows = (await conn.execute(query.order_by(outbox.c.id.desc()).limit(limit + 1))).mappings().all()
    page = [codec.notification_from_row(row) for row in rows[:limit]]
    if len(rows) <= limit:
        return page, None
    return page, encode_cursor([rows[limit - 1]["id"]])


async def depth(conn: AsyncConnection) -> dict[str, int]:
    """Rows per delivery status (the outbox-depth gauge)."""
    result = await conn.execute(sa.select(outbox.c.status, sa.func.count()).group_by(outbox.c.status))
    counts = {status.value: 0 for status in DeliveryStatus}
    counts.update({status: int(n) for status, n in result.all()})
    return counts


async def statuses(conn: AsyncConnection, dedup_keys: Sequence[str]) -> dict[str, str]:
    """dedup key -> delivery status, for the rows among `dedup_keys` that exist."""
    result = await conn.execute(
        sa.select(outbox.c.dedup_key, outbox.c.status).where(outbox.c.dedup_key.in_(list(dedup_keys)))
    )
    return {key: status for key, status in result.all()}
