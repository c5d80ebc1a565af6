"""The dispatcher's queries on the outbox: claim a batch with its group companions, record outcomes.

Store.claim_due leases due rows one by one; the dispatcher also needs the never-tried rows of the
same recipients that are not due yet (to send them along, or to hold a group back), and it must
decide which rows to lease while it still holds the row locks, or two dispatchers could send the
same row. So the claim here reads the due rows and their companions with
`FOR UPDATE SKIP LOCKED` (on SQLite the single writer serialises claims), lets a pure planner
choose, and leases or defers the rows in the same transaction.

A companion is a pending row that was never attempted (attempts = 0): a row that was attempted
and is not due is either leased by a dispatcher or waiting for its retry time, and is left alone.
Outcomes are recorded for all rows of a message in one statement, so a message is either recorded
as sent for every job in it or for none. On Postgres the rows are passed as arrays (`unnest`), so a
flush of any size is one statement with one cached plan instead of one execution per row; SQLite
runs in-process, where executemany costs no round trips.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.asyncio import AsyncConnection

from inno_notify.adapters.db import codec
from inno_notify.adapters.db.jobs import get_jobs
from inno_notify.adapters.db.sql import chunks
from inno_notify.adapters.db.tables import outbox, recommendations, usage
from inno_notify.domain.delivery import BatchPlan
from inno_notify.domain.model import DeliveryStatus, JobRecord, Notification, Recommendation, Usage

_PENDING = DeliveryStatus.PENDING.value
# (recipient, channel) pairs per companion query: each pair binds two parameters.
_PAIR_CHUNK = 400

# planner(due rows, companions) -> the messages to send now and the rows to defer.
Planner = Callable[[Sequence[Notification], Sequence[Notification]], BatchPlan]


async def claim_batch(
    conn: AsyncConnection,
    now: datetime,
    limit: int,
    lease_seconds: float,
    planner: Planner,
    *,
    kinds: Collection[str] | None = None,
) -> BatchPlan:
    """Claims up to `limit` due rows plus their companions; returns the planner's messages, leased.

    Rows of the planned messages count an attempt and are leased until now + lease_seconds; deferred rows only
    move their next_attempt_at (a wait for the group is not an attempt). Call inside a
    transaction (`engine.begin()`).
    """
    query = sa.select(outbox).where(outbox.c.status == _PENDING, outbox.c.next_attempt_at <= now)
    if kinds is not None:
        query = query.where(outbox.c.kind.in_(sorted(kinds)))
    query = query.order_by(outbox.c.next_attempt_at, outbox.c.id).limit(limit)
    due_rows = (await conn.execute(query.with_for_update(skip_locked=True))).mappings().all()
    due = [codec.notification_from_row(row) for row in due_rows]
    if not due:
        return BatchPlan(())
    companions = await _companions(conn, now, due, kinds)
    plan = planner(due, companions)
    chosen = [row for message in plan.messages for row in message]
    deferred = plan.deferred

    lease_until = now + timedelta(seconds=lease_seconds)
    ids = [row.id for row in chosen if row.id is not None]
    lease = sa.update(outbox).values(attempts=outbox.c.attempts + 1, next_attempt_at=lease_until)
    if _is_postgres(conn):
        if ids:
            await conn.execute(lease.where(outbox.c.id == sa.any_(_ids_array())), {"b_ids": ids})
    else:
        for chunk in chunks(ids):
            await conn.execute(lease.where(outbox.c.id.in_(chunk)))
    if deferred:
        await conn.execute(
            sa.update(outbox)
            .where(outbox.c.id == sa.bindparam("b_id"))
            .values(next_attempt_at=sa.bindparam("b_at")),
            [{"b_id": row.id, "b_at": at} for row, at in deferred],
        )
    messages = tuple(
        tuple(replace(row, attempts=row.attempts + 1, next_attempt_at=lease_until) for row in message)
        for message in plan.messages
    )
    return BatchPlan(messages, deferred)


async def _companions(
    conn: AsyncConnection, now: datetime, due: Sequence[Notification], kinds: Collection[str] | None
) -> list[Notification]:
    pairs = sorted({(row.recipient, row.channel.value) for row in due})
    due_ids = {row.id for row in due}
    found: list[Notification] = []
    for chunk in chunks(pairs, _PAIR_CHUNK):
        query = sa.select(outbox).where(
            outbox.c.status == _PENDING,
            outbox.c.attempts == 0,
            outbox.c.next_attempt_at > now,
            sa.tuple_(outbox.c.recipient, outbox.c.channel).in_(list(chunk)),
        )
        if kinds is not None:
            query = query.where(outbox.c.kind.in_(sorted(kinds)))
        rows = (await conn.execute(query.with_for_update(skip_locked=True))).mappings().all()
        found.extend(codec.notification_from_row(r) for r in rows if r["id"] not in due_ids)
    return found


async def mark_sent_many(conn: AsyncConnection, sent: Sequence[tuple[int, str | None, datetime]]) -> None:
    """(id, provider message id, sent at) for rows of several messages, in one statement.

    A single statement also needs no transaction around it: on Postgres the caller may run it on an
    autocommit connection (one round trip per flush).
    """
    if not sent:
        return
    if _is_postgres(conn):
        await conn.execute(
            _SENT_UNNEST,
            {
                "b_ids": [id for id, _, _ in sent],
                "b_messages": [message for _, message, _ in sent],
                "b_ats": [at for _, _, at in sent],
            },
        )
        return
    await conn.execute(
        sa.update(outbox)
        .where(outbox.c.id == sa.bindparam("b_id"), outbox.c.status == _PENDING)
        .values(
            status=DeliveryStatus.SENT.value,
            provider_message_id=sa.bindparam("b_message"),
            sent_at=sa.bindparam("b_at"),
            next_attempt_at=None,
        ),
        [{"b_id": id, "b_message": message, "b_at": at} for id, message, at in sent],
    )


async def mark_retries(conn: AsyncConnection, retries: Sequence[tuple[int, str, datetime]]) -> None:
    """(id, error, next attempt) for each row that failed and will be tried again."""
    if not retries:
        return
    await conn.execute(
        sa.update(outbox)
        .where(outbox.c.id == sa.bindparam("b_id"), outbox.c.status == _PENDING)
        .values(last_error=sa.bindparam("b_error"), next_attempt_at=sa.bindparam("b_at")),
        [{"b_id": id, "b_error": error, "b_at": at} for id, error, at in retries],
    )


async def mark_failures(conn: AsyncConnection, failures: Sequence[tuple[int, str]], at: datetime) -> None:
    """(id, reason) for each row that failed for good."""
    if not failures:
        return
    await conn.execute(
        sa.update(outbox)
        .where(outbox.c.id == sa.bindparam("b_id"), outbox.c.status == _PENDING)
        .values(
            status=DeliveryStatus.FAILED.value,
            last_error=sa.bindparam("b_error"),
            failed_at=at,
            next_attempt_at=None,
        ),
        [{"b_id": id, "b_error": error} for id, error in failures],
    )


def _is_postgres(conn: AsyncConnection) -> bool:
    return conn.dialect.name == "postgresql"


def _ids_array() -> sa.BindParameter[Any]:
    return sa.bindparam("b_ids", type_=postgresql.ARRAY(sa.BigInteger()))


def _sent_values() -> sa.TableValuedAlias:
    # unnest(ids, messages, times) AS v(id, message, at): the flush's rows as a table to join.
    at_type = sa.DateTime(timezone=True)
    return (
        sa.func.unnest(
            _ids_array(),
            sa.bindparam("b_messages", type_=postgresql.ARRAY(sa.String())),
            sa.bindparam("b_ats", type_=postgresql.ARRAY(at_type)),
        )
        .table_valued(
            sa.column("id", sa.BigInteger()), sa.column("message", sa.String()), sa.column("at", at_type)
        )
        .render_derived()
    )


def _sent_unnest() -> sa.Update:
    values = _sent_values()
    return (
        sa.update(outbox)
        .where(outbox.c.id == values.c.id, outbox.c.status == _PENDING)
        .values(
            status=DeliveryStatus.SENT.value,
            provider_message_id=values.c.message,
            sent_at=values.c.at,
            next_attempt_at=None,
        )
    )


# Built once: the statement never changes (the rows travel as array parameters), and building it
# per flush cost more Python time than sending it.
_SENT_UNNEST = _sent_unnest()

Summary = tuple[JobRecord, Usage | None, list[Recommendation]]


async def load_summaries(
    conn: AsyncConnection, keys: Sequence[tuple[str, str]]
) -> dict[tuple[str, str], Summary]:
    """Job, usage and recommendations of each (cluster, uid), in a few queries; missing jobs are absent."""
    by_cluster: dict[str, list[str]] = {}
    for cluster, uid in dict.fromkeys(keys):
        by_cluster.setdefault(cluster, []).append(uid)
    found: dict[tuple[str, str], Summary] = {}
    for cluster, uids in by_cluster.items():
        records = await get_jobs(conn, cluster, uids)
        figures: dict[str, Usage] = {}
        advice: dict[str, list[Recommendation]] = {}
        for chunk in chunks(list(records)):
            rows = await conn.execute(
                sa.select(usage).where(usage.c.cluster == cluster, usage.c.job_uid.in_(chunk))
            )
            for row in rows.mappings():
                figures[row["job_uid"]] = codec.usage_from_row(row)
            rows = await conn.execute(
                sa.select(recommendations)
                .where(recommendations.c.cluster == cluster, recommendations.c.job_uid.in_(chunk))
                .order_by(recommendations.c.job_uid, recommendations.c.position)
            )
            for row in rows.mappings():
                advice.setdefault(row["job_uid"], []).append(codec.recommendation_from_row(row))
        for uid, record in records.items():
            found[(cluster, uid)] = (record, figures.get(uid), advice.get(uid, []))
    return found


async def next_due(conn: AsyncConnection, kinds: Collection[str] | None = None) -> datetime | None:
    """When the earliest pending row can next be claimed (the dispatcher sleeps until then)."""
    query = sa.select(sa.func.min(outbox.c.next_attempt_at)).where(outbox.c.status == _PENDING)
    if kinds is not None:
        query = query.where(outbox.c.kind.in_(sorted(kinds)))
    value = (await conn.execute(query)).scalar()
    return value if isinstance(value, datetime) else None
