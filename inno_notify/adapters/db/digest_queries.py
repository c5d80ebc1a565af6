"""The weekly digest's aggregation, done by the database: sums per team, person and local day.

A digest covers a team's GPU jobs that finished in [start, end) (domain/digest.py states the
conventions). Each figure is one aggregate query over jobs LEFT JOIN usage, narrowed by the
(team, finished_at) index, so building a digest reads a week of one team, never the whole table,
and no job row ever reaches Python.

Portability between Postgres and SQLite:
- Local days for the chart are a CASE over day boundaries computed in Python in the digest's zone
  (bound as parameters), so neither dialect needs time zone support.
- Queue-wait percentiles: Postgres computes them with percentile_cont; SQLite has no percentile
  function, so there we fetch the one narrow column of queue waits, sorted by the database, and
  the domain interpolates the same way percentile_cont does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from inno_notify.adapters.db.tables import UTCDateTime, jobs, recommendations, usage
from inno_notify.domain.digest import (
    TOP_WASTE,
    DailyRow,
    Digest,
    DigestRows,
    PersonRow,
    TeamTotals,
    WasteRow,
    build_digest,
    day_bounds,
    previous_week,
    week_bounds,
)
from inno_notify.domain.model import JobStatus

GIB = float(1024**3)

Connectable = AsyncConnection | AsyncEngine


@asynccontextmanager
async def _connection(source: Connectable) -> AsyncIterator[AsyncConnection]:
    if isinstance(source, AsyncConnection):
        yield source
    else:
        async with source.connect() as conn:
            yield conn


def _week_jobs(
    cluster: str | None, team: str, start: datetime, end: datetime
) -> list[sa.ColumnElement[bool]]:
    conditions = [
        jobs.c.team == team,
        jobs.c.finished_at >= start,
        jobs.c.finished_at < end,
        jobs.c.gpus_requested > 0,
    ]
    if cluster is not None:
        conditions.append(jobs.c.cluster == cluster)
    return conditions


def _joined() -> sa.FromClause:
    return jobs.outerjoin(usage, sa.and_(usage.c.cluster == jobs.c.cluster, usage.c.job_uid == jobs.c.uid))


def _count_if(condition: sa.ColumnElement[bool]) -> sa.ColumnElement[int]:
    return sa.func.coalesce(sa.func.sum(sa.case((condition, 1), else_=0)), 0)


def _float(value: sa.ColumnElement[float] | sa.ColumnElement[int]) -> sa.ColumnElement[float]:
    # SQLite would otherwise divide integers as integers.
    return sa.cast(value, sa.Double())


def _figure_columns() -> list[sa.Label[Any]]:
    """The aggregates shared by the team's totals and the per-person lines."""
    # Hours a pod held its GPUs: GPU-minutes over the pod's GPU-equivalents. Memory GiB-hours are
    # counted over the same held time, and only where both the request and the peak are known, so
    # that requested and peak compare like with like.
    pod_hours = usage.c.gpu_minutes / (60.0 * jobs.c.gpus_requested)
    both_known = sa.and_(
        jobs.c.memory_requested_bytes.is_not(None),
        usage.c.memory_peak_bytes.is_not(None),
        usage.c.gpu_minutes.is_not(None),
    )
    return [
        sa.func.count().label("jobs"),
        _count_if(usage.c.gpu_minutes.is_(None)).label("jobs_unmeasured"),
        sa.func.sum(usage.c.gpu_minutes).label("gpu_minutes"),
        sa.func.sum(usage.c.used_gpu_minutes).label("used_gpu_minutes"),
        sa.func.sum(sa.case((usage.c.used_gpu_minutes.is_not(None), usage.c.gpu_minutes))).label(
            "used_basis_gpu_minutes"
        ),
        sa.func.sum(usage.c.idle_gpu_minutes).label("idle_gpu_minutes"),
        sa.func.sum(sa.case((both_known, _float(jobs.c.memory_requested_bytes) * pod_hours / GIB))).label(
            "memory_requested_gib_hours"
        ),
        sa.func.sum(sa.case((both_known, _float(usage.c.memory_peak_bytes) * pod_hours / GIB))).label(
            "memory_peak_gib_hours"
        ),
    ]


async def team_totals(
    source: Connectable, cluster: str | None, team: str, start: datetime, end: datetime
) -> TeamTotals:
    """The team's sums over the GPU jobs that finished in [start, end)."""
    query = (
        sa.select(
            *_figure_columns(),
            _count_if(jobs.c.status == JobStatus.SUCCEEDED.value).label("succeeded"),
            _count_if(jobs.c.status == JobStatus.FAILED.value).label("failed"),
            _count_if(jobs.c.exit_reason == "OOMKilled").label("oom"),
        )
        .select_from(_joined())
        .where(*_week_jobs(cluster, team, start, end))
    )
    async with _connection(source) as conn:
        row = (await conn.execute(query)).mappings().one()
    return TeamTotals(**dict(row))


async def _people(
    conn: AsyncConnection, conditions: Sequence[sa.ColumnElement[bool]]
) -> tuple[PersonRow, ...]:
    columns = [c for c in _figure_columns() if c.name not in {"jobs_unmeasured"} and "memory" not in c.name]
    query = sa.select(jobs.c.owner, *columns).select_from(_joined()).where(*conditions).group_by(jobs.c.owner)
    return tuple(PersonRow(**dict(row)) for row in (await conn.execute(query)).mappings())


async def _daily(
    conn: AsyncConnection, conditions: Sequence[sa.ColumnElement[bool]], days: Sequence[datetime]
) -> tuple[DailyRow, ...]:
    # days[1..6] are the local midnights inside the week; the week filter bounds days[0] and days[7].
    day = sa.case(
        *[
            (jobs.c.finished_at < sa.literal(boundary, UTCDateTime()), index)
            for index, boundary in enumerate(days[1:7])
        ],
        else_=6,
    ).label("day")
    # A day's used GPU-minutes are known only if known for every job that day.
    used = sa.case(
        (sa.func.count(usage.c.used_gpu_minutes) == sa.func.count(), sa.func.sum(usage.c.used_gpu_minutes))
    ).label("used_gpu_minutes")
    query = (
        sa.select(jobs.c.owner, day, sa.func.sum(usage.c.gpu_minutes).label("gpu_minutes"), used)
        .select_from(_joined())
        .where(*conditions, usage.c.gpu_minutes.is_not(None))
        .group_by(jobs.c.owner, day)
    )
    return tuple(DailyRow(**dict(row)) for row in (await conn.execute(query)).mappings())


async def _top_waste(
    conn: AsyncConnection, conditions: Sequence[sa.ColumnElement[bool]], limit: int
) -> tuple[WasteRow, ...]:
    rank = (
        sa.func.row_number()
        .over(
            partition_by=(recommendations.c.cluster, recommendations.c.job_uid),
            order_by=(recommendations.c.waste_gpu_minutes.desc(), recommendations.c.position),
        )
        .label("rank")
    )
    ranked = (
        sa.select(
            jobs.c.cluster,
            jobs.c.uid,
            jobs.c.namespace,
            jobs.c.name,
            jobs.c.owner,
            recommendations.c.waste_gpu_minutes,
            recommendations.c.kind,
            recommendations.c.severity,
            recommendations.c.message,
            rank,
        )
        .select_from(
            jobs.join(
                recommendations,
                sa.and_(recommendations.c.cluster == jobs.c.cluster, recommendations.c.job_uid == jobs.c.uid),
            )
        )
        .where(*conditions, recommendations.c.waste_gpu_minutes > 0)
        .subquery()
    )
    query = (
        sa.select(*[c for c in ranked.c if c.name != "rank"])
        .where(ranked.c.rank == 1)
        .order_by(ranked.c.waste_gpu_minutes.desc(), ranked.c.namespace, ranked.c.name, ranked.c.uid)
        .limit(limit)
    )
    return tuple(WasteRow(**dict(row)) for row in (await conn.execute(query)).mappings())


def _queue_seconds(conn: AsyncConnection) -> sa.ColumnElement[float]:
    seconds: sa.ColumnElement[float]
    if conn.dialect.name == "postgresql":
        seconds = sa.cast(sa.extract("epoch", jobs.c.first_scheduled_at - jobs.c.created_at), sa.Double())
    else:
        seconds = (
            sa.func.julianday(jobs.c.first_scheduled_at) - sa.func.julianday(jobs.c.created_at)
        ) * 86400.0
    # As JobRecord.queue_seconds: never negative (clock skew between the objects' timestamps).
    return sa.case((seconds < 0, 0.0), else_=seconds)


async def _queue(
    conn: AsyncConnection, conditions: Sequence[sa.ColumnElement[bool]]
) -> tuple[float | None, float | None, tuple[float, ...] | None]:
    seconds = _queue_seconds(conn)
    known = [*conditions, jobs.c.first_scheduled_at.is_not(None), jobs.c.created_at.is_not(None)]
    if conn.dialect.name == "postgresql":
        query = sa.select(
            sa.func.percentile_cont(0.5).within_group(seconds),
            sa.func.percentile_cont(0.95).within_group(seconds),
        ).where(*known)
        p50, p95 = (await conn.execute(query)).one()
        return (None if p50 is None else float(p50), None if p95 is None else float(p95), None)
    rows = await conn.execute(sa.select(seconds).where(*known).order_by(seconds))
    # julianday() keeps ~10 µs; round so the figures match Postgres' exact microseconds.
    return None, None, tuple(round(float(v), 3) for (v,) in rows)


async def team_week(
    source: Connectable,
    cluster: str | None,
    team: str,
    start: datetime,
    end: datetime,
    days: Sequence[datetime],
) -> DigestRows:
    """All the aggregates of one team's week; `days` are the 8 local-day boundaries (day_bounds)."""
    if len(days) != 8 or days[0] != start or days[-1] != end:
        raise ValueError("days must be the week's 8 local-day boundaries, from start to end")
    conditions = _week_jobs(cluster, team, start, end)
    async with _connection(source) as conn:
        totals = await team_totals(conn, cluster, team, start, end)
        if totals.jobs == 0:
            return DigestRows(totals)
        p50, p95, waits = await _queue(conn, conditions)
        return DigestRows(
            totals=totals,
            people=await _people(conn, conditions),
            daily=await _daily(conn, conditions, days),
            top_waste=await _top_waste(conn, conditions, TOP_WASTE),
            queue_p50_seconds=p50,
            queue_p95_seconds=p95,
            queue_seconds_sorted=waits,
        )


async def load_digest(
    source: Connectable,
    team: str,
    week: str,
    tz: str,
    *,
    cluster: str | None = None,
    quota_gpus: float | None = None,
) -> Digest:
    """The digest of `team` for ISO `week` in zone `tz`, with the change against the week before."""
    start, end = week_bounds(week, tz)
    prev_start, prev_end = week_bounds(previous_week(week), tz)
    async with _connection(source) as conn:
        rows = await team_week(conn, cluster, team, start, end, day_bounds(week, tz))
        previous = await team_totals(conn, cluster, team, prev_start, prev_end)
    return build_digest(team, week, tz, rows, previous, quota_gpus=quota_gpus)
