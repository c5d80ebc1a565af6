"""The weekly digest's aggregation, done by the database: sums per team, person and local day.

A digest covers a team's GPU jobs that finished in [start, end) (domain/digest.py states the
conventions). It is one statement: the GPU jobs of the week and the week before are read once (a
CTE over jobs, narrowed by the (team, finished_at) index, which on Postgres carries every jobs
column needed, the job's copies of its usage figures included, so the weeks come from the index
alone with no join) and grouped per week, per person,
and per person and local day; the five most wasteful jobs come along in the same UNION ALL. So a
digest costs one round trip, reads one team's fortnight, never the whole table, and no job row
reaches Python. The statement is built once per dialect and shape, with bound parameters, because
building and hashing a SQLAlchemy statement of this size costs milliseconds per digest.

Portability between Postgres and SQLite:
- Local days for the chart are a CASE over day boundaries computed in Python in the digest's zone
  (bound as parameters), so neither dialect needs time zone support.
- Queue-wait percentiles: Postgres computes them with percentile_cont; SQLite has no percentile
  function, so there the queue waits themselves come along as one more part of the statement, and
  the domain interpolates the same way percentile_cont does.

Idle GPUs in running pods and workspaces come from the nudge ledger (`nudged_pods`, nudge_ledger.py):
the team's nudges of the week's days, a few key lookups, summed per pod by the domain.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, fields, replace
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from inno_notify.adapters.db import adoption, nudge_ledger, trend_queries
from inno_notify.adapters.db.tables import UTCDateTime, jobs, recommendations
from inno_notify.domain.adoption import AdoptionPerson
from inno_notify.domain.digest import (
    TOP_WASTE,
    DailyRow,
    Digest,
    DigestRows,
    NudgedPodRow,
    PersonRow,
    TeamTotals,
    WasteRow,
    build_digest,
    nudged_pod_rows,
)
from inno_notify.domain.model import JobStatus
from inno_notify.domain.trends import TREND_WEEKS, TrendGroup, trend_weeks
from inno_notify.domain.weeks import day_bounds, previous_week, week_bounds

GIB = float(1024**3)

Connectable = AsyncConnection | AsyncEngine


@asynccontextmanager
async def _connection(source: Connectable) -> AsyncIterator[AsyncConnection]:
    if isinstance(source, AsyncConnection):
        yield source
    else:
        async with source.connect() as conn:
            yield conn


def _at(name: str) -> sa.BindParameter[datetime]:
    return sa.bindparam(name, type_=UTCDateTime())


def _week_jobs(by_cluster: bool) -> list[sa.ColumnElement[bool]]:
    """The GPU jobs of the team that finished in [previous_start, end): the two weeks compared."""
    conditions = [
        jobs.c.team == sa.bindparam("team", type_=sa.String()),
        jobs.c.finished_at >= _at("previous_start"),
        jobs.c.finished_at < _at("end"),
        jobs.c.gpus_requested > 0,
    ]
    if by_cluster:
        conditions.append(jobs.c.cluster == sa.bindparam("cluster", type_=sa.String()))
    return conditions


def _count_if(condition: sa.ColumnElement[bool]) -> sa.ColumnElement[int]:
    return sa.func.coalesce(sa.func.sum(sa.case((condition, 1), else_=0)), 0)


def _float(value: sa.ColumnElement[float] | sa.ColumnElement[int]) -> sa.ColumnElement[float]:
    # SQLite would otherwise divide integers as integers.
    return sa.cast(value, sa.Double())


def _null(type_: Any) -> sa.ColumnElement[Any]:
    return sa.cast(sa.null(), type_)


def _week_rows(dialect: str, by_cluster: bool) -> sa.CTE:
    """The GPU jobs of the week and the week before, each read once, with what the aggregates need.

    Every jobs column read here is in the (team, finished_at) index (INCLUDE on Postgres), the
    usage figures too (the job's copies of them, jobs.save_usage), so Postgres reads the weeks from
    the index alone and joins nothing."""
    # day_1..day_6 are the local midnights inside the week; the week filter bounds the first and last.
    day = sa.case(*[(jobs.c.finished_at < _at(f"day_{index + 1}"), index) for index in range(6)], else_=6)
    # Hours a pod held its GPUs: GPU-minutes over the pod's GPU-equivalents. Memory GiB-hours are
    # counted over the same held time, and only where both the request and the peak are known, so
    # that requested and peak compare like with like.
    pod_hours = jobs.c.gpu_minutes_held / (60.0 * jobs.c.gpus_requested)
    both_known = sa.and_(jobs.c.memory_requested_bytes.is_not(None), jobs.c.memory_peak_bytes.is_not(None))
    queue_known = sa.and_(jobs.c.queued_until.is_not(None), jobs.c.created_at.is_not(None))
    return (
        sa.select(
            sa.case((jobs.c.finished_at >= _at("start"), 1), else_=0).label("current"),
            jobs.c.cluster,
            jobs.c.uid,
            jobs.c.owner,
            day.label("day"),
            jobs.c.status,
            jobs.c.exit_reason,
            jobs.c.gpu_minutes_held.label("gpu_minutes"),
            jobs.c.gpu_minutes_used.label("used_gpu_minutes"),
            jobs.c.gpu_minutes_idle.label("idle_gpu_minutes"),
            sa.case((both_known, _float(jobs.c.memory_requested_bytes) * pod_hours / GIB)).label(
                "memory_requested"
            ),
            sa.case((both_known, _float(jobs.c.memory_peak_bytes) * pod_hours / GIB)).label("memory_peak"),
            sa.case((queue_known, _queue_seconds(dialect))).label("queue_seconds"),
        )
        .where(*_week_jobs(by_cluster))
        .cte("week_jobs")
    )


def _aggregates(week: sa.CTE, *, percentiles: bool) -> dict[str, sa.ColumnElement[Any]]:
    c = week.c
    p50: sa.ColumnElement[Any]
    p95: sa.ColumnElement[Any]
    if percentiles:
        p50 = sa.func.percentile_cont(0.5).within_group(c.queue_seconds)
        p95 = sa.func.percentile_cont(0.95).within_group(c.queue_seconds)
    else:
        p50 = p95 = _null(sa.Double())
    return {
        "jobs": sa.func.count(),
        "jobs_unmeasured": _count_if(c.gpu_minutes.is_(None)),
        "succeeded": _count_if(c.status == JobStatus.SUCCEEDED.value),
        "failed": _count_if(c.status == JobStatus.FAILED.value),
        "oom": _count_if(c.exit_reason == "OOMKilled"),
        "gpu_minutes": sa.func.sum(c.gpu_minutes),
        "used_gpu_minutes": sa.func.sum(c.used_gpu_minutes),
        "used_basis_gpu_minutes": sa.func.sum(sa.case((c.used_gpu_minutes.is_not(None), c.gpu_minutes))),
        # A day's used GPU-minutes are known only if known for every job that day.
        "used_all_known": sa.case(
            (sa.func.count(c.used_gpu_minutes) == sa.func.count(), sa.func.sum(c.used_gpu_minutes))
        ),
        "idle_gpu_minutes": sa.func.sum(c.idle_gpu_minutes),
        "memory_requested_gib_hours": sa.func.sum(c.memory_requested),
        "memory_peak_gib_hours": sa.func.sum(c.memory_peak),
        "queue_p50": p50,
        "queue_p95": p95,
    }


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

# The one result set every part of the statement fills: each part sets its own columns and leaves
# the others NULL (UNION ALL needs the same columns, of the same types, in every part).
_COLUMNS: dict[str, Any] = {
    "part": sa.String(),
    "current": sa.Integer(),
    "owner": sa.String(),
    "day": sa.Integer(),
    **dict.fromkeys(("jobs", "jobs_unmeasured", "succeeded", "failed", "oom"), sa.BigInteger()),
    **dict.fromkeys(
        (*_TOTALS[5:], "used_all_known", "queue_p50", "queue_p95", "waste_gpu_minutes", "queue_seconds"),
        sa.Double(),
    ),
    **dict.fromkeys(("cluster", "uid", "namespace", "name", "kind", "severity", "message"), sa.String()),
}


def _part(name: str, given: dict[str, sa.ColumnElement[Any]]) -> sa.Select[Any]:
    given = {"part": sa.literal(name, sa.String()), **given}
    return sa.select(*[given.get(key, _null(type_)).label(key) for key, type_ in _COLUMNS.items()])


def _top_waste(week: sa.CTE) -> sa.Select[Any]:
    """The jobs of the week whose largest recommendation wastes the most GPU-minutes.

    Ties at the last place all come along (rank(), not row_number()), so the domain can break them
    by namespace and name as it orders the list; namespace and name, which the index does not
    carry, are read from the table for those few jobs only."""
    rec = recommendations
    per_job = (
        sa.select(
            week.c.cluster,
            week.c.uid,
            week.c.owner,
            rec.c.waste_gpu_minutes,
            rec.c.kind,
            rec.c.severity,
            rec.c.message,
            sa.func.row_number()
            .over(
                partition_by=(week.c.cluster, week.c.uid),
                order_by=(rec.c.waste_gpu_minutes.desc(), rec.c.position),
            )
            .label("per_job"),
        )
        .select_from(week.join(rec, sa.and_(rec.c.cluster == week.c.cluster, rec.c.job_uid == week.c.uid)))
        .where(week.c.current == 1, rec.c.waste_gpu_minutes > 0)
        .subquery("per_job")
    )
    best = (
        sa.select(
            *[c for c in per_job.c if c.name != "per_job"],
            sa.func.rank().over(order_by=per_job.c.waste_gpu_minutes.desc()).label("place"),
        )
        .where(per_job.c.per_job == 1)
        .subquery("best")
    )
    return (
        _part(
            "waste",
            {
                "current": sa.literal(1),
                "owner": best.c.owner,
                "cluster": best.c.cluster,
                "uid": best.c.uid,
                "namespace": jobs.c.namespace,
                "name": jobs.c.name,
                "waste_gpu_minutes": best.c.waste_gpu_minutes,
                "kind": best.c.kind,
                "severity": best.c.severity,
                "message": best.c.message,
            },
        )
        .select_from(best.join(jobs, sa.and_(jobs.c.cluster == best.c.cluster, jobs.c.uid == best.c.uid)))
        .where(best.c.place <= TOP_WASTE)
    )


@dataclass(frozen=True, slots=True)
class _Aggregated:
    current: TeamTotals
    previous: TeamTotals
    people: tuple[PersonRow, ...] = ()
    daily: tuple[DailyRow, ...] = ()
    top_waste: tuple[WasteRow, ...] = ()
    queue_p50: float | None = None
    queue_p95: float | None = None
    # SQLite, which has no percentile function: the queue waits themselves.
    queue_seconds: tuple[float, ...] | None = None


@functools.cache
def _statement(dialect: str, by_cluster: bool, details: bool) -> sa.CompoundSelect[Any]:
    """Everything a digest needs as one statement, so that it costs one round trip: the week's rows
    are read once (a CTE) and grouped per week, per person, and per person and day, and the top
    waste (and, on SQLite, the queue waits) come along as parts of one UNION ALL."""
    week = _week_rows(dialect, by_cluster)
    postgres = dialect == "postgresql"
    owner, day = week.c.owner, week.c.day
    parts = [
        _part(
            "total",
            {"current": week.c.current, **_aggregates(week, percentiles=postgres)},
        ).group_by(week.c.current)
    ]
    if details:
        parts += [
            _part(
                "person", {"current": sa.literal(1), "owner": owner, **_aggregates(week, percentiles=False)}
            )
            .where(week.c.current == 1)
            .group_by(owner),
            _part(
                "day",
                {
                    "current": sa.literal(1),
                    "owner": owner,
                    "day": day,
                    **_aggregates(week, percentiles=False),
                },
            )
            .where(week.c.current == 1, week.c.gpu_minutes.is_not(None))
            .group_by(owner, day),
            _top_waste(week),
        ]
        if not postgres:
            parts.append(
                _part("queue", {"current": sa.literal(1), "queue_seconds": week.c.queue_seconds}).where(
                    week.c.current == 1, week.c.queue_seconds.is_not(None)
                )
            )
    return sa.union_all(*parts)


async def _aggregate(
    conn: AsyncConnection,
    cluster: str | None,
    team: str,
    previous_start: datetime,
    start: datetime,
    end: datetime,
    days: Sequence[datetime],
    *,
    details: bool = True,
) -> _Aggregated:
    query = _statement(conn.dialect.name, cluster is not None, details)
    params: dict[str, Any] = {
        "team": team,
        "previous_start": previous_start,
        "start": start,
        "end": end,
        **{f"day_{index}": days[index] for index in range(1, 7)},
    }
    if cluster is not None:
        params["cluster"] = cluster
    totals = {0: TeamTotals(), 1: TeamTotals()}
    people: list[PersonRow] = []
    daily: list[DailyRow] = []
    waste: list[WasteRow] = []
    queue: list[float] = []
    p50 = p95 = None
    for row in (await conn.execute(query, params)).mappings():
        part = row["part"]
        if part == "total":
            totals[row["current"]] = TeamTotals(**{name: row[name] for name in _TOTALS})
            if row["current"] == 1:
                p50, p95 = row["queue_p50"], row["queue_p95"]
        elif part == "person":
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
        elif part == "day":
            daily.append(DailyRow(row["owner"], row["day"], row["gpu_minutes"], row["used_all_known"]))
        elif part == "waste":
            waste.append(WasteRow(**{f.name: row[f.name] for f in fields(WasteRow)}))
        else:
            # julianday() keeps ~10 µs; round so the figures match Postgres' exact microseconds.
            queue.append(round(float(row["queue_seconds"]), 3))
    return _Aggregated(
        totals[1],
        totals[0],
        tuple(people),
        tuple(daily),
        tuple(waste),
        None if p50 is None else float(p50),
        None if p95 is None else float(p95),
        None if conn.dialect.name == "postgresql" else tuple(sorted(queue)),
    )


async def team_totals(
    source: Connectable, cluster: str | None, team: str, start: datetime, end: datetime
) -> TeamTotals:
    """The team's sums over the GPU jobs that finished in [start, end) (no local days needed)."""
    async with _connection(source) as conn:
        days = [start] * 7 + [end]
        return (await _aggregate(conn, cluster, team, start, start, end, days, details=False)).current


def _queue_seconds(dialect: str) -> sa.ColumnElement[float]:
    seconds: sa.ColumnElement[float]
    if dialect == "postgresql":
        seconds = sa.cast(sa.extract("epoch", jobs.c.queued_until - jobs.c.created_at), sa.Double())
    else:
        seconds = (sa.func.julianday(jobs.c.queued_until) - sa.func.julianday(jobs.c.created_at)) * 86400.0
    # As JobRecord.queue_seconds: never negative (clock skew between the objects' timestamps).
    return sa.case((seconds < 0, 0.0), else_=seconds)


async def team_week(
    source: Connectable,
    cluster: str | None,
    team: str,
    start: datetime,
    end: datetime,
    days: Sequence[datetime],
    previous_start: datetime | None = None,
) -> DigestRows:
    """All the aggregates of one team's week, in one statement; `days` are the 8 local-day boundaries
    (day_bounds). With `previous_start`, the totals of [previous_start, start) come along as
    `previous`."""
    if len(days) != 8 or days[0] != start or days[-1] != end:
        raise ValueError("days must be the week's 8 local-day boundaries, from start to end")
    async with _connection(source) as conn:
        agg = await _aggregate(conn, cluster, team, previous_start or start, start, end, days)
    previous = agg.previous if previous_start is not None else None
    if agg.current.jobs == 0:
        return DigestRows(agg.current, previous=previous)
    return DigestRows(
        totals=agg.current,
        people=agg.people,
        daily=agg.daily,
        top_waste=agg.top_waste,
        queue_p50_seconds=agg.queue_p50,
        queue_p95_seconds=agg.queue_p95,
        queue_seconds_sorted=agg.queue_seconds,
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
    """The digest of `team` for ISO `week` in zone `tz`, with the change against the week before,
    the trend of the TREND_WEEKS weeks ending with it, and the share of the team's Kueue quota
    (`quota_gpus`, else the one the Kueue watch found for the team's namespaces)."""
    start, end = week_bounds(week, tz)
    previous_start, _ = week_bounds(previous_week(week), tz)
    async with _connection(source) as conn:
        rows = await team_week(conn, cluster, team, start, end, day_bounds(week, tz), previous_start)
        rows = replace(
            rows,
            nudged=await nudged_pods(conn, cluster, team, start, end),
            adoption=tuple(
                AdoptionPerson(g.owner, g.tally)
                for g in await adoption.groups(conn, team=team, since=start, until=end, cluster=cluster)
            ),
        )
        series = await trend_queries.trends(
            conn, TrendGroup.TEAM, trend_weeks(week, TREND_WEEKS), tz, team=team, cluster=cluster
        )
    trend = series[0] if series else None
    if quota_gpus is None and trend is not None:
        quota_gpus = trend.quota_gpus
    return build_digest(
        team, week, tz, rows, rows.previous, quota_gpus=quota_gpus, trend=trend.points if trend else ()
    )


async def nudged_pods(
    source: Connectable, cluster: str | None, team: str, start: datetime, end: datetime
) -> tuple[NudgedPodRow, ...]:
    """The team's pods nudged about idle GPUs in [start, end), with their nudges and idle
    GPU-hours (from the nudge ledger: a few key lookups, see nudge_ledger.py)."""
    async with _connection(source) as conn:
        entries = await nudge_ledger.read(conn, team, start, end)
    if cluster is not None:
        entries = [e for e in entries if e.cluster == cluster]
    return nudged_pod_rows(entries, start, end)
