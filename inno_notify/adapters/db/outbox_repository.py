"""The outbox (`Store.outbox`): enqueueing rows, the delivery log the API reads and retries, and
the dispatcher's side: claim a round's rows under a token, then settle each one.

There is one implementation of claiming and settling, the one the dispatcher uses and the
concurrency tests exercise:

- `claim` is one transaction per round. The due rows and their group companions (pending rows
  of the same recipients that were never tried and are not due yet: they may ride along or hold
  a group back) are read with `FOR UPDATE SKIP LOCKED` (on SQLite the single writer serialises
  claims); a pure planner chooses the messages while the rows are still locked; the chosen rows
  are leased (due again at now + lease, one attempt counted) under a fresh claim token and the
  caller's leadership term; rows of a group still waiting are deferred; and the job figures the
  messages need are read in the same transaction, so a round costs one pooled connection.
- A lease is what brings a crashed claimer's rows back: no recovery pass is needed.
- Due rows whose recipient is muted (a person's `/mute`, preferences.py) are not leased but held:
  due again when the mute ends, when they all go out together.
- Every mark (sent, retry, failed) settles a row only while it is pending and still carries the
  token of the claim that sent it. Once a lease ran out and another claimer took the row, the
  first claimer's late outcome changes nothing.
- `recorder` gives one round's outcomes their connection. On Postgres it is one connection held
  in autocommit, so a record is one statement and one round trip (a pooled transaction would add
  a ping, BEGIN and COMMIT); a flush of any size is one `UPDATE … FROM unnest(…)` with one cached
  plan. SQLite runs in-process and keeps a transaction per call.

Terms: a claim runs under the repository's fence (leases.py), checked first in the claim's
transaction, and records the term it returns (None without election). A claimer with a term also
takes, at once, the rows leased under a term that no live lease holds any more
(`leases.taken_over`): their claimer has stopped, since a leader stops its work before its lease
expires, so there is no need to wait for the claim's own lease. Their token is replaced, so a late
mark of the old claimer settles nothing. A retried row gives its token up, so that it waits for its
retry time instead. Marks are not fenced: the token is their fence (a row another claim took no
longer carries it), and recording a send that happened is never wrong; refusing it would only
make the next leader send it again.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from inno_notify.adapters.db import codec, preferences
from inno_notify.adapters.db import outbox as outbox_queries
from inno_notify.adapters.db.jobs import get_jobs, recommendations_of_jobs
from inno_notify.adapters.db.leases import taken_over
from inno_notify.adapters.db.sql import chunks, rows_in
from inno_notify.adapters.db.tables import outbox, usage
from inno_notify.adapters.db.transactions import Repository
from inno_notify.domain.delivery import BatchPlan, hold_muted
from inno_notify.domain.model import (
    DeliveryStatus,
    JobRecord,
    Notification,
    NotificationKind,
    Recommendation,
    Usage,
)

_PENDING = DeliveryStatus.PENDING.value
# (recipient, channel) pairs per companion query: each pair binds two parameters.
_PAIR_CHUNK = 400

# planner(due rows, companions) -> the messages to send now and the rows to defer.
Planner = Callable[[Sequence[Notification], Sequence[Notification]], BatchPlan]
Summary = tuple[JobRecord, Usage | None, list[Recommendation]]
# (row id, provider message id, sent at)
SentRecord = tuple[int, str | None, datetime]
# (row id, error, next attempt at)
RetryRecord = tuple[int, str, datetime]
# (row id, reason)
FailureRecord = tuple[int, str]


@dataclass(frozen=True, slots=True)
class Claim:
    """What one claim leased: its token, until when, the planned messages and their jobs' figures.

    `summaries` holds (job, usage, recommendations) by (cluster, job uid) for the job-summary rows
    of the messages; a job missing from the database is missing here.
    """

    token: str
    term: int | None
    lease_until: datetime
    messages: tuple[tuple[Notification, ...], ...] = ()
    deferred: tuple[tuple[Notification, datetime], ...] = ()
    summaries: Mapping[tuple[str, str], Summary] = field(default_factory=dict)
    # Rows taken over from a claim that never recorded their outcome (its claimer was killed or
    # frozen, perhaps after the provider accepted them): whether they arrived is unknown.
    unsure: frozenset[int] = frozenset()

    @property
    def rows(self) -> int:
        """How many rows the messages lease."""
        return sum(len(message) for message in self.messages)


def one_message_per_row(due: Sequence[Notification], companions: Sequence[Notification]) -> BatchPlan:
    """The plan without grouping: every due row is a message of its own, no companion joins."""
    return BatchPlan(tuple((row,) for row in due))


class Outcomes:
    """Settles the rows of one claim; every method is one statement and returns how many rows it
    settled (a row no longer pending, or claimed by someone else since, is not counted).

    Safe to call from concurrent tasks: the calls take turns on the round's connection.
    """

    def __init__(self, token: str, run: StatementRunner) -> None:
        self.token = token
        self._run = run

    async def sent(self, rows: Sequence[SentRecord]) -> int:
        if not rows:
            return 0
        return await self._run(lambda conn: mark_sent(conn, self.token, rows))

    async def retry(self, rows: Sequence[RetryRecord]) -> int:
        if not rows:
            return 0
        return await self._run(lambda conn: mark_retry(conn, self.token, rows))

    async def failed(self, rows: Sequence[FailureRecord], at: datetime) -> int:
        if not rows:
            return 0
        return await self._run(lambda conn: mark_failed(conn, self.token, rows, at))

    async def given_back(self, ids: Sequence[int], at: datetime) -> int:
        if not ids:
            return 0
        return await self._run(lambda conn: mark_given_back(conn, self.token, ids, at))


class OutboxRepository(Repository):
    """The outbox over an engine (Postgres or SQLite): enqueueing, claiming and settling rows,
    and the delivery log the API reads."""

    async def claim(
        self,
        now: datetime,
        limit: int,
        lease_seconds: float,
        planner: Planner | None = None,
        *,
        kinds: Collection[str] | None = None,
        term: int | None = None,
        cluster: str | None = None,
        shared_channels: Collection[str] | None = None,
    ) -> Claim:
        """Leases up to `limit` due rows (plus the companions the planner takes along) in one
        transaction, and reads the figures of their jobs in it.

        Without a `planner` every due row is a message of its own. The rows are leased under the
        term the fence vouches for (raising LostLeadership once it is over), else under `term`.
        With a `cluster` only that cluster's rows and the rows of no cluster (digests, pipeline
        events, bot replies) are claimed: several clusters' services share one database, and each
        leader sends its own cluster's summaries (docs/scale.md); of the rows of no cluster, only
        those on `shared_channels` (None: any), the channels this claimer can send on, since
        another cluster's service may have a channel this one lacks.
        """
        lease_until = now + timedelta(seconds=lease_seconds)
        async with self._claim_write() as (conn, token, fenced):
            term = term if fenced is None else fenced
            scope = _of_cluster(cluster, shared_channels)
            plan, unsure = await _claim_rows(
                conn, now, limit, lease_until, planner, kinds, token, term, scope
            )
            keys = [
                (row.cluster, row.job_uid)
                for message in plan.messages
                for row in message
                if row.kind is NotificationKind.JOB_SUMMARY and row.cluster and row.job_uid
            ]
            summaries = await load_summaries(conn, keys) if keys else {}
        return Claim(token, term, lease_until, plan.messages, plan.deferred, summaries, unsure)

    @contextlib.asynccontextmanager
    async def recorder(self, claim: Claim | str) -> AsyncIterator[Outcomes]:
        """The outcomes of one claim's round (see the module docstring for the connection)."""
        token = claim if isinstance(claim, str) else claim.token
        if self._engine.dialect.name != "postgresql":
            yield Outcomes(token, _transaction_per_call(self._engine))
            return
        held = _HeldAutocommit(self._engine)
        try:
            yield Outcomes(token, held)
        finally:
            await held.close()

    async def next_due(
        self,
        kinds: Collection[str] | None = None,
        *,
        cluster: str | None = None,
        shared_channels: Collection[str] | None = None,
    ) -> datetime | None:
        """When the earliest pending row a claimer of `cluster` may take can next be claimed (the
        dispatcher sleeps until then; another cluster's due rows must not keep it awake)."""
        query = sa.select(sa.func.min(outbox.c.next_attempt_at)).where(
            outbox.c.status == _PENDING, *_of_cluster(cluster, shared_channels)
        )
        if kinds is not None:
            query = query.where(outbox.c.kind.in_(sorted(kinds)))
        async with self.read() as conn:
            value = (await conn.execute(query)).scalar()
        return value if isinstance(value, datetime) else None

    async def enqueue(self, notifications: Sequence[Notification]) -> int:
        """Inserts those whose dedup key is new; returns how many. `id` of the inputs is ignored."""
        async with self._leader_write() as conn:
            return await outbox_queries.enqueue(conn, notifications)

    async def delivery_statuses(self, dedup_keys: Sequence[str]) -> dict[str, str]:
        """Where the given outbox rows stand (pending, sent, failed), by dedup key."""
        async with self.read() as conn:
            return await outbox_queries.statuses(conn, dedup_keys)

    async def outbox_depth(self) -> dict[str, int]:
        """Notifications per delivery status."""
        async with self.read() as conn:
            return await outbox_queries.depth(conn)

    async def get_notification(self, id: int) -> Notification | None:
        async with self.read() as conn:
            return await outbox_queries.get(conn, id)

    async def list_notifications(
        self, status: DeliveryStatus | None = None, limit: int = 50, cursor: str | None = None
    ) -> tuple[list[Notification], str | None]:
        """The delivery log, newest first, and the next page's cursor (None on the last page)."""
        async with self.read() as conn:
            return await outbox_queries.list_page(conn, status, limit, cursor)

    async def retry_notification(self, id: int, now: datetime) -> bool:
        """Re-queues a failed notification, due now with attempts reset; False unless it had failed."""
        async with self._write() as conn:
            return await outbox_queries.retry(conn, id, now)


# --- running a round's statements ---------------------------------------------------------------

# A statement to run and the rows it settled; a runner runs it and commits it.
Statement = Callable[[AsyncConnection], Awaitable[int]]
StatementRunner = Callable[[Statement], Awaitable[int]]


def _transaction_per_call(engine: AsyncEngine) -> StatementRunner:
    async def run(statement: Statement) -> int:
        async with engine.begin() as conn:
            return await statement(conn)

    return run


class _HeldAutocommit:
    """One Postgres connection in autocommit for a round, taken at its first statement.

    A statement that fails throws the connection away (it may be the one that broke), so a
    caller's next try runs on a fresh one.
    """

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._conn: AsyncConnection | None = None
        self._turn = asyncio.Lock()

    async def __call__(self, statement: Statement) -> int:
        async with self._turn:
            if self._conn is None:
                conn = await self._engine.connect()
                try:
                    self._conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
                except BaseException:
                    await conn.close()
                    raise
            conn = self._conn
            try:
                # On an autocommit connection BEGIN and COMMIT stay on our side: the statement
                # commits itself.
                async with conn.begin():
                    return await statement(conn)
            except BaseException:
                self._conn = None
                with contextlib.suppress(Exception):
                    await conn.invalidate()
                with contextlib.suppress(Exception):
                    await conn.close()
                raise

    async def close(self) -> None:
        async with self._turn:
            if self._conn is not None:
                conn, self._conn = self._conn, None
                await conn.close()


# --- claiming -----------------------------------------------------------------------------------


def _claimable(now: datetime, term: int | None) -> sa.ColumnElement[bool]:
    """Rows a claim may take: pending and due (a lease that ran out makes a row due again), and for
    a claimer with a term, rows leased under a term that ended (see the module docstring)."""
    due = outbox.c.next_attempt_at <= now
    if term is None:
        return sa.and_(outbox.c.status == _PENDING, due)
    return sa.and_(
        outbox.c.status == _PENDING, sa.or_(due, taken_over(outbox.c.claim_token, outbox.c.claim_term, term))
    )


async def _claim_rows(
    conn: AsyncConnection,
    now: datetime,
    limit: int,
    lease_until: datetime,
    planner: Planner | None,
    kinds: Collection[str] | None,
    token: str,
    term: int | None,
    scope: Sequence[sa.ColumnElement[bool]] = (),
) -> tuple[BatchPlan, frozenset[int]]:
    """The messages leased, and the rows among them that still carried another claim's token (a
    sent or retried row gives its token up: one that carries it had its outcome never recorded)."""
    query = sa.select(outbox).where(_claimable(now, term), *scope)
    if kinds is not None:
        query = query.where(outbox.c.kind.in_(sorted(kinds)))
    query = query.order_by(outbox.c.next_attempt_at, outbox.c.id).limit(limit)
    due_rows = (await conn.execute(query.with_for_update(skip_locked=True))).mappings().all()
    due = [codec.notification_from_row(row) for row in due_rows]
    unsure = frozenset(row["id"] for row in due_rows if row["claim_token"] is not None)
    if not due:
        return BatchPlan(()), frozenset()
    # Rows of a muted recipient wait, unleased, until the mute ends (preferences.py releases them
    # early when it does): they are not sent, nor do they ride along or hold a group back.
    mutes = await preferences.mutes_of(conn, {row.recipient for row in due}, now)
    if mutes:
        due, held = hold_muted(due, mutes, now)
        await preferences.hold(conn, [(row.id, until) for row, until in held if row.id is not None])
        if not due:
            return BatchPlan(()), frozenset()
    if planner is None:
        plan = one_message_per_row(due, ())
    else:
        plan = planner(due, await _companions(conn, now, due, kinds, scope))

    ids = [row.id for message in plan.messages for row in message if row.id is not None]
    lease = sa.update(outbox).values(
        attempts=outbox.c.attempts + 1, next_attempt_at=lease_until, claim_token=token, claim_term=term
    )
    if _is_postgres(conn):
        if ids:
            await conn.execute(lease.where(outbox.c.id == sa.any_(_ids_array())), {"b_ids": ids})
    else:
        for chunk in chunks(ids):
            await conn.execute(lease.where(outbox.c.id.in_(chunk)))
    if plan.deferred:
        await conn.execute(
            sa.update(outbox)
            .where(outbox.c.id == sa.bindparam("b_id"))
            .values(next_attempt_at=sa.bindparam("b_at")),
            [{"b_id": row.id, "b_at": at} for row, at in plan.deferred],
        )
    messages = tuple(
        tuple(replace(row, attempts=row.attempts + 1, next_attempt_at=lease_until) for row in message)
        for message in plan.messages
    )
    return BatchPlan(messages, plan.deferred), unsure & frozenset(ids)


def _of_cluster(
    cluster: str | None, shared_channels: Collection[str] | None = None
) -> list[sa.ColumnElement[bool]]:
    """The rows a claimer of `cluster` may take: its own, and those of no cluster on one of
    `shared_channels` (None: on any channel). No cluster: every row."""
    if cluster is None:
        return []
    shared: sa.ColumnElement[bool] = outbox.c.cluster.is_(None)
    if shared_channels is not None:
        shared = sa.and_(shared, outbox.c.channel.in_(sorted(shared_channels)))
    return [sa.or_(outbox.c.cluster == cluster, shared)]


async def _companions(
    conn: AsyncConnection,
    now: datetime,
    due: Sequence[Notification],
    kinds: Collection[str] | None,
    scope: Sequence[sa.ColumnElement[bool]] = (),
) -> list[Notification]:
    # A row that was attempted and is not due is leased or waiting for its retry time: left alone.
    pairs = sorted({(row.recipient, row.channel.value) for row in due})
    due_ids = {row.id for row in due}
    found: list[Notification] = []
    for chunk in chunks(pairs, _PAIR_CHUNK):
        query = sa.select(outbox).where(
            outbox.c.status == _PENDING,
            outbox.c.attempts == 0,
            outbox.c.next_attempt_at > now,
            sa.tuple_(outbox.c.recipient, outbox.c.channel).in_(list(chunk)),
            *scope,
        )
        if kinds is not None:
            query = query.where(outbox.c.kind.in_(sorted(kinds)))
        rows = (await conn.execute(query.with_for_update(skip_locked=True))).mappings().all()
        found.extend(codec.notification_from_row(r) for r in rows if r["id"] not in due_ids)
    return found


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
        query = sa.select(usage).where(usage.c.cluster == cluster)
        rows = await rows_in(conn, query, usage.c.job_uid, records)
        figures = {row["job_uid"]: codec.usage_from_row(row) for row in rows}
        advice = await recommendations_of_jobs(conn, cluster, list(records))
        for uid, record in records.items():
            found[(cluster, uid)] = (record, figures.get(uid), advice.get(uid, []))
    return found


# --- settling -----------------------------------------------------------------------------------
#
# Each mark is one statement whose WHERE names the row, `pending` and the claim's token. On
# Postgres the rows travel as arrays (`unnest`), one statement and one plan for any number of
# rows; SQLite runs in-process, where executemany costs no round trips.


async def mark_sent(conn: AsyncConnection, token: str, rows: Sequence[SentRecord]) -> int:
    """Accepted messages: sent, with the provider's id; the rows of several messages at once."""
    return await _SENT.run(conn, token, rows)


async def mark_retry(conn: AsyncConnection, token: str, rows: Sequence[RetryRecord]) -> int:
    """Failed sends that will be tried again at the given time; the row gives its claim up."""
    return await _RETRY.run(conn, token, rows)


async def mark_failed(conn: AsyncConnection, token: str, rows: Sequence[FailureRecord], at: datetime) -> int:
    """Sends that failed for good, with the reason."""
    return await _FAILED.run(conn, token, [(id, error, at) for id, error in rows])


async def mark_given_back(conn: AsyncConnection, token: str, ids: Sequence[int], at: datetime) -> int:
    """Rows the claim will not send after all (its dispatcher is stopping): due again at `at`, the
    claim and its counted attempt undone, so the next claimer takes them at once."""
    give_back = sa.update(outbox).values(
        next_attempt_at=at, attempts=outbox.c.attempts - 1, claim_token=None, claim_term=None
    )
    if _is_postgres(conn):
        held = give_back.where(outbox.c.id == sa.any_(_ids_array()), *_held_by(sa.bindparam("b_token")))
        return int((await conn.execute(held, {"b_ids": list(ids), "b_token": token})).rowcount)
    settled = 0
    for chunk in chunks(list(ids)):
        result = await conn.execute(give_back.where(outbox.c.id.in_(chunk), *_held_by(sa.literal(token))))
        settled += int(result.rowcount)
    return settled


def _held_by(token: sa.ColumnElement[Any]) -> tuple[sa.ColumnElement[bool], ...]:
    return (outbox.c.status == _PENDING, outbox.c.claim_token == token)


def _is_postgres(conn: AsyncConnection) -> bool:
    return conn.dialect.name == "postgresql"


def _ids_array() -> sa.BindParameter[Any]:
    return sa.bindparam("b_ids", type_=postgresql.ARRAY(sa.BigInteger()))


_AT = sa.DateTime(timezone=True)


class _Settling:
    """One way of settling a claim's rows: the columns each row sets from its own values and the
    values alike for all, in the two statements the section's comment describes. A row is
    `(id, *its values)`, in the order of `per_row`."""

    def __init__(self, per_row: Sequence[tuple[str, str, sa.types.TypeEngine[Any]]], **same: Any) -> None:
        """`per_row`: (column, value name, SQL type) for each value a row carries."""
        self._names = [name for _, name, _ in per_row]
        arrays = [_ids_array()] + [
            sa.bindparam(f"b_{name}s", type_=postgresql.ARRAY(kind)) for _, name, kind in per_row
        ]
        # unnest(ids, a, b) AS v(id, a, b): the rows of one statement as a table to join.
        values = (
            sa.func.unnest(*arrays)
            .table_valued(
                sa.column("id", sa.BigInteger()), *(sa.column(name, kind) for _, name, kind in per_row)
            )
            .render_derived()
        )
        held = _held_by(sa.bindparam("b_token"))
        self._unnest = (
            sa.update(outbox)
            .where(outbox.c.id == values.c.id, *held)
            .values({**{column: values.c[name] for column, name, _ in per_row}, **same})
        )
        self._each = (
            sa.update(outbox)
            .where(outbox.c.id == sa.bindparam("b_id"), *held)
            .values({**{column: sa.bindparam(f"b_{name}") for column, name, _ in per_row}, **same})
        )

    async def run(self, conn: AsyncConnection, token: str, rows: Sequence[tuple[Any, ...]]) -> int:
        """Settles the `rows` that `token` holds; returns how many."""
        if not rows:
            return 0
        names = [f"b_{name}" for name in self._names]
        if _is_postgres(conn):
            ids, *columns = zip(*rows, strict=True)
            arrays = {f"{name}s": list(column) for name, column in zip(names, columns, strict=True)}
            params = {"b_token": token, "b_ids": list(ids), **arrays}
            return int((await conn.execute(self._unnest, params)).rowcount)
        each = [
            {"b_token": token, "b_id": id, **dict(zip(names, values, strict=True))} for id, *values in rows
        ]
        return int((await conn.execute(self._each, each)).rowcount)


# Built once: the statements never change (the rows travel as array parameters), and building one
# per flush cost more Python time than sending it.
_SENT = _Settling(
    [("provider_message_id", "message", sa.String()), ("sent_at", "at", _AT)],
    status=DeliveryStatus.SENT.value,
    next_attempt_at=None,
)
_RETRY = _Settling(
    [("last_error", "error", sa.Text()), ("next_attempt_at", "at", _AT)], claim_token=None, claim_term=None
)
_FAILED = _Settling(
    [("last_error", "error", sa.Text()), ("failed_at", "at", _AT)],
    status=DeliveryStatus.FAILED.value,
    next_attempt_at=None,
)
