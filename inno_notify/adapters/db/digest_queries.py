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
from dataclasses import dataclass
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


def _null(type_: Any) -> sa.ColumnElement[Any]:
    return sa.cast(sa.null(), type_)


def _week_rows(
    conn: AsyncConnection,
    cluster: str | None,
    team: str,
    previous_start: datetime,
    start: datetime,
    end: datetime,
    days: Sequence[datetime],
) -> sa.CTE:
    """The GPU jobs of the week and the week before, each read once, with what the aggregates need."""
    # days[1..6] are the local midnights inside the week; the week filter bounds days[0] and days[7].
    day = sa.case(
        *[
            (jobs.c.finished_at < sa.literal(boundary, UTCDateTime()), index)
            for index, boundary in enumerate(days[1:7])
        ],
        else_=6,
    )
    # Hours a pod held its GPUs: GPU-minutes over the pod's GPU-equivalents. Memory GiB-hours are
    # counted over the same held time, and only where both the request and the peak are known, so
    # that requested and peak compare like with like.
    pod_hours = usage.c.gpu_minutes / (60.0 * jobs.c.gpus_requested)
    both_known = sa.and_(jobs.c.memory_requested_bytes.is_not(None), usage.c.memory_peak_bytes.is_not(None))
    queue_known = sa.and_(jobs.c.first_scheduled_at.is_not(None), jobs.c.created_at.is_not(None))
    return (
        sa.select(
            sa.case((jobs.c.finished_at >= sa.literal(start, UTCDateTime()), 1), else_=0).label("current"),
            jobs.c.owner,
            day.label("day"),
            jobs.c.status,
            jobs.c.exit_reason,
            usage.c.gpu_minutes,
            usage.c.used_gpu_minutes,
            usage.c.idle_gpu_minutes,
            sa.case((both_known, _float(jobs.c.memory_requested_bytes) * pod_hours / GIB)).label(
                "memory_requested"
            ),
            sa.case((both_known, _float(usage.c.memory_peak_bytes) * pod_hours / GIB)).label("memory_peak"),
            sa.case((queue_known, _queue_seconds(conn))).label("queue_seconds"),
        )
        .select_from(_joined())
        .where(*_week_jobs(cluster, team, previous_start, end))
        .cte("week_jobs")
    )


def _aggregates(week: sa.CTE, *, percentiles: bool) -> list[sa.Label[Any]]:
    c = week.c
    p50: sa.ColumnElement[Any]
    p95: sa.ColumnElement[Any]
    if percentiles:
        p50 = sa.func.percentile_cont(0.5).within_group(c.queue_seconds)
        p95 = sa.func.percentile_cont(0.95).within_group(c.queue_seconds)
    else:
        p50 = p95 = _null(sa.Double())
    return [
        sa.func.count().label("jobs"),
        _count_if(c.gpu_minutes.is_(None)).label("jobs_unmeasured"),
        _count_if(c.status == JobStatus.SUCCEEDED.value).label("succeeded"),
        _count_if(c.status == JobStatus.FAILED.value).label("failed"),
        _count_if(c.exit_reason == "OOMKilled").label("oom"),
        sa.func.sum(c.gpu_minutes).label("gpu_minutes"),
        sa.func.sum(c.used_gpu_minutes).label("used_gpu_minutes"),
        sa.func.sum(sa.case((c.used_gpu_minutes.is_not(None), c.gpu_minutes))).label(
            "used_basis_gpu_minutes"
        ),
        # A day's used GPU-minutes are known only if known for every job that day.
        sa.case(
            (sa.func.count(c.used_gpu_minutes) == sa.func.count(), sa.func.sum(c.used_gpu_minutes))
        ).label("used_all_known"),
        sa.func.sum(c.idle_gpu_minutes).label("idle_gpu_minutes"),
        sa.func.sum(c.memory_requested).label("memory_requested_gib_hours"),
        sa.func.sum(c.memory_peak).label("memory_peak_gib_hours"),
        p50.label("queue_p50"),
        p95.label("queue_p95"),
    ]


_TOTALS = (
    "jobs",
    "jobs_unmeasured",
    "succeeded",
    "failed",
    "oom",
    "gpu_minutes",
    "used_gpu_minutes",
    "used_basis_gpu_minutes",
    "idle_gpu_minutes",
    "memory_requested_gib_hours",
    "memory_peak_gib_hours",
)


@dataclass(frozen=True, slots=True)
class _Aggregated:
    current: TeamTotals
    previous: TeamTotals
    people: tuple[PersonRow, ...]
    daily: tuple[DailyRow, ...]
    queue_p50: float | None
    queue_p95: float | None


async def _aggregate(
    conn: AsyncConnection,
    cluster: str | None,
    team: str,
    previous_start: datetime,
    start: datetime,
    end: datetime,
    days: Sequence[datetime],
) -> _Aggregated:
    """Totals of both weeks, per-person lines and per-person local days, in one statement: the
    week's rows are read once (a CTE) and grouped three ways (UNION ALL)."""
    week = _week_rows(conn, cluster, team, previous_start, start, end, days)
    postgres = conn.dialect.name == "postgresql"
    owner, day = week.c.owner, week.c.day
    query = sa.union_all(
        sa.select(
            sa.literal("total").label("part"),
            week.c.current,
            _null(sa.String()).label("owner"),
            _null(sa.Integer()).label("day"),
            *_aggregates(week, percentiles=postgres),
        ).group_by(week.c.current),
        sa.select(
            sa.literal("person"),
            sa.literal(1),
            owner,
            _null(sa.Integer()),
            *_aggregates(week, percentiles=False),
        )
        .where(week.c.current == 1)
        .group_by(owner),
        sa.select(sa.literal("day"), sa.literal(1), owner, day, *_aggregates(week, percentiles=False))
        .where(week.c.current == 1, week.c.gpu_minutes.is_not(None))
        .group_by(owner, day),
    )
    totals = {0: TeamTotals(), 1: TeamTotals()}
    people: list[PersonRow] = []
    daily: list[DailyRow] = []
    p50 = p95 = None
    for row in (await conn.execute(query)).mappings():
        if row["part"] == "total":
            totals[row["current"]] = TeamTotals(**{name: row[name] for name in _TOTALS})
            if row["current"] == 1:
                p50, p95 = row["queue_p50"], row["queue_p95"]
        elif row["part"] == "person":
            people.append(
                PersonRow(
                    row["owner"],
                    row["jobs"],
                    row["gpu_minutes"],
                    row["used_gpu_minutes"],
                    row["idle_gpu_minutes"],
                    row["used_basis_gpu_minutes"],
                )
            )
        else:
            daily.append(DailyRow(row["owner"], row["day"], row["gpu_minutes"], row["used_all_known"]))
    return _Aggregated(
        totals[1],
        totals[0],
        tuple(people),
        tuple(daily),
        None if p50 is None else float(p50),
        None if p95 is None else float(p95),
    )


async def team_totals(
    source: Connectable, cluster: str | None, team: str, start: datetime, end: datetime
) -> TeamTotals:
    """The team's sums over the GPU jobs that finished in [start, end) (no local days needed)."""
    async with _connection(source) as conn:
        return (await _aggregate(conn, cluster, team, start, start, end, [start] * 7 + [end])).current


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


async def _sorted_queue_seconds(
    conn: AsyncConnection, conditions: Sequence[sa.ColumnElement[bool]]
) -> tuple[float, ...]:
    """For SQLite, which has no percentile function: the one narrow column, sorted by the database."""
    seconds = _queue_seconds(conn)
    known = [*conditions, jobs.c.first_scheduled_at.is_not(None), jobs.c.created_at.is_not(None)]
    rows = await conn.execute(sa.select(seconds).where(*known).order_by(seconds))
    # julianday() keeps ~10 µs; round so the figures match Postgres' exact microseconds.
    return tuple(round(float(v), 3) for (v,) in rows)


async def team_week(
    source: Connectable,
    cluster: str | None,
    team: str,
    start: datetime,
    end: datetime,
    days: Sequence[datetime],
    previous_start: datetime | None = None,
) -> DigestRows:
    """All the aggregates of one team's week; `days` are the 8 local-day boundaries (day_bounds).
    With `previous_start`, the totals of [previous_start, start) come along as `previous`."""
    if len(days) != 8 or days[0] != start or days[-1] != end:
        raise ValueError("days must be the week's 8 local-day boundaries, from start to end")
    conditions = _week_jobs(cluster, team, start, end)
    async with _connection(source) as conn:
        agg = await _aggregate(conn, cluster, team, previous_start or start, start, end, days)
        previous = agg.previous if previous_start is not None else None
        if agg.current.jobs == 0:
            return DigestRows(agg.current, previous=previous)
        postgres = conn.dialect.name == "postgresql"
        return DigestRows(
            totals=agg.current,
            people=agg.people,
            daily=agg.daily,
            top_waste=await _top_waste(conn, conditions, TOP_WASTE),
            queue_p50_seconds=agg.queue_p50,
            queue_p95_seconds=agg.queue_p95,
            queue_seconds_sorted=None if postgres else await _sorted_queue_seconds(conn, conditions),
            previous=previous,
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
    previous_start, _ = week_bounds(previous_week(week), tz)
    rows = await team_week(source, cluster, team, start, end, day_bounds(week, tz), previous_start)
    return build_digest(team, week, tz, rows, rows.previous, quota_gpus=quota_gpus)
