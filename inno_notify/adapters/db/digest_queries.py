"""The weekly digest's aggregation, done by the database: sums per team, person and local day.

A digest covers a team's GPU jobs that finished in [start, end) (domain/digest.py states the
conventions). It is one statement, one round trip: the GPU jobs of the week and the week before are
read once (a CTE over jobs, narrowed by the (team, finished_at) index, which on Postgres carries
every jobs column needed, the job's copies of its usage figures and of its largest advised waste
included, the job's GPU model too, so the weeks come from the index alone with no join) and
grouped per week, per person and GPU model (the domain prices each model at its rate), and per
person and local day; the five most wasteful jobs, the twelve-week trend (trend_queries.py), the
week's advice adoption (adoption.py), the team's nudge ledger rows (nudge_ledger.py) and the
Kueue queues its namespaces reach (queue_quotas.py) come along in the same UNION ALL. So a digest
reads one team's weeks, never the whole table, and no job row reaches Python. The statement is
built once per dialect and shape, with bound parameters, because building and hashing a SQLAlchemy
statement of this size costs milliseconds per digest; on Postgres it runs on the driver's connection
outside a transaction (sql.fetch: one statement is one snapshot).

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
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from inno_notify.adapters.db import adoption, nudge_ledger, queue_quotas, trend_queries
from inno_notify.adapters.db.sql import fetch, seconds_after
from inno_notify.adapters.db.tables import (
    UTCDateTime,
    advice_adoption,
    checkpoints,
    jobs,
    local_queues,
    recommendations,
    teams,
)
from inno_notify.domain.adoption import AdoptionPerson
from inno_notify.domain.budgets import BudgetReport
from inno_notify.domain.costs import Rates
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
from inno_notify.domain.trends import (
    TREND_WEEKS,
    TrendGroup,
    TrendRow,
    build_series,
    team_quota_gpus,
    trend_bounds,
    trend_weeks,
)
from inno_notify.domain.weeks import day_bounds, previous_week, week_bounds

GIB = float(1024**3)

Connectable = AsyncConnection | AsyncEngine


class Shape(StrEnum):
    """What one statement aggregates: a week's totals only, the week's job figures, or a digest."""

    TOTALS = "totals"
    WEEK = "week"
    DIGEST = "digest"


@asynccontextmanager
async def _connection(source: Connectable) -> AsyncIterator[AsyncConnection]:
    if isinstance(source, AsyncConnection):
        yield source
    else:
        async with source.connect() as conn:
            yield conn


def _at(name: str) -> sa.BindParameter[datetime]:
    return sa.bindparam(name, type_=UTCDateTime())


def _team() -> sa.BindParameter[str]:
    return sa.bindparam("team", type_=sa.String())


def _cluster() -> sa.BindParameter[str]:
    return sa.bindparam("cluster", type_=sa.String())


def _week_jobs(by_cluster: bool, since: str) -> list[sa.ColumnElement[bool]]:
    """The GPU jobs of the team that finished from the parameter `since` (previous_start: the two
    weeks compared; start: the week) to the end of the week."""
    conditions = [
        jobs.c.team == _team(),
        jobs.c.finished_at >= _at(since),
        jobs.c.finished_at < _at("end"),
        jobs.c.gpus_requested > 0,
    ]
    if by_cluster:
        conditions.append(jobs.c.cluster == _cluster())
    return conditions


def _count_if(condition: sa.ColumnElement[bool]) -> sa.ColumnElement[int]:
    return sa.func.coalesce(sa.func.sum(sa.case((condition, 1), else_=0)), 0)


def _float(value: sa.ColumnElement[float] | sa.ColumnElement[int]) -> sa.ColumnElement[float]:
    # SQLite would otherwise divide integers as integers.
    return sa.cast(value, sa.Double())


def _null(type_: Any) -> sa.ColumnElement[Any]:
    return sa.cast(sa.null(), type_)


def _usage_figures() -> list[sa.Label[Any]]:
    """The job's copies of its usage figures (jobs.save_usage), under the usage's names."""
    return [
        jobs.c.gpu_minutes_held.label("gpu_minutes"),
        jobs.c.gpu_minutes_used.label("used_gpu_minutes"),
        jobs.c.gpu_minutes_idle.label("idle_gpu_minutes"),
    ]


def _fortnight(by_cluster: bool) -> sa.Subquery:
    """The GPU jobs of the week and the week before (`current` tells which), with what their totals
    need. Every jobs column read here is in the (team, finished_at) index (INCLUDE on Postgres), the
    usage figures too (the job's copies of them, jobs.save_usage), so Postgres reads the weeks from
    the index alone and joins nothing."""
    return (
        sa.select(
            sa.case((jobs.c.finished_at >= _at("start"), 1), else_=0).label("current"),
            jobs.c.status,
            jobs.c.exit_reason,
            jobs.c.gpus_requested,
            jobs.c.memory_requested_bytes,
            jobs.c.memory_peak_bytes,
            *_usage_figures(),
        )
        .where(*_week_jobs(by_cluster, "previous_start"))
        .subquery("fortnight")
    )


def _week_rows(by_cluster: bool) -> sa.CTE:
    """The GPU jobs of the week, with what its per-person, per-day, top-waste and queue-wait parts
    need (the largest advised waste too: the job's copy of it), from the same index. Read by several
    parts, the rows are materialized once with every column listed here, so the list is short and
    what only one part needs (the local day, the queue wait) is computed in that part."""
    return (
        sa.select(
            jobs.c.cluster,
            jobs.c.uid,
            jobs.c.owner,
            jobs.c.finished_at,
            jobs.c.created_at,
            jobs.c.queued_until,
            *_usage_figures(),
            jobs.c.top_waste_gpu_minutes.label("top_waste"),
            jobs.c.gpu_model,
        )
        .where(*_week_jobs(by_cluster, "start"))
        .cte("week_jobs")
    )


def _gpu_sums(c: Any) -> dict[str, sa.ColumnElement[Any]]:
    """The GPU-minute sums of a group of the week's jobs (columns `c`): the week's and a person's."""
    return {
        "jobs": sa.func.count(),
        "gpu_minutes": sa.func.sum(c.gpu_minutes),
        "used_gpu_minutes": sa.func.sum(c.used_gpu_minutes),
        "used_basis_gpu_minutes": sa.func.sum(sa.case((c.used_gpu_minutes.is_not(None), c.gpu_minutes))),
        "idle_gpu_minutes": sa.func.sum(c.idle_gpu_minutes),
    }


def _totals(c: Any) -> dict[str, sa.ColumnElement[Any]]:
    """A week's totals (TeamTotals) over the week's jobs (columns `c`)."""
    # Hours a pod held its GPUs: GPU-minutes over the pod's GPU-equivalents. Memory GiB-hours are
    # counted over the same held time, and only where both the request and the peak are known, so
    # that requested and peak compare like with like.
    pod_hours = c.gpu_minutes / (60.0 * c.gpus_requested)
    both_known = sa.and_(c.memory_requested_bytes.is_not(None), c.memory_peak_bytes.is_not(None))
    return {
        **_gpu_sums(c),
        "jobs_unmeasured": _count_if(c.gpu_minutes.is_(None)),
        "succeeded": _count_if(c.status == JobStatus.SUCCEEDED.value),
        "failed": _count_if(c.status == JobStatus.FAILED.value),
        "oom": _count_if(c.exit_reason == "OOMKilled"),
        "memory_requested_gib_hours": sa.func.sum(
            sa.case((both_known, _float(c.memory_requested_bytes) * pod_hours / GIB))
        ),
        "memory_peak_gib_hours": sa.func.sum(
            sa.case((both_known, _float(c.memory_peak_bytes) * pod_hours / GIB))
        ),
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
    "gpu_model": sa.String(),
    "day": sa.Integer(),
    "week": sa.Integer(),
    **dict.fromkeys(("jobs", "jobs_unmeasured", "succeeded", "failed", "oom"), sa.BigInteger()),
    **dict.fromkeys(
        (
            *_TOTALS[5:],
            "used_all_known",
            "queue_p50",
            "queue_p95",
            "waste_gpu_minutes",
            "queue_seconds",
            "quota_gpus",
            "gpu_hours_freed",
            "memory_gib_hours_freed",
        ),
        sa.Double(),
    ),
    **dict.fromkeys(
        ("cluster", "uid", "namespace", "name", "kind", "severity", "message", "outcome"), sa.String()
    ),
    "value": sa.Text(),
}
_NAMES = tuple(_COLUMNS)


def _part(name: str, given: dict[str, sa.ColumnElement[Any]]) -> sa.Select[Any]:
    given = {"part": sa.literal(name, sa.String()), **given}
    return sa.select(*[given.get(key, _null(type_)).label(key) for key, type_ in _COLUMNS.items()])


def _top_waste(week: sa.CTE) -> sa.Select[Any]:
    """The jobs of the week whose largest recommendation wastes the most GPU-minutes.

    The week's rows carry each job's largest waste (the copy its row keeps, jobs.top_waste_copy),
    so the jobs are ranked without reading any recommendation; only the winners' recommendations
    are read, for the largest one's text. Ties at the last place all come along (rank(), not
    row_number()), so the domain can break them by namespace and name as it orders the list;
    namespace and name, which the index does not carry, are read from the table for those few
    jobs only."""
    rec = recommendations
    ranked = (
        sa.select(
            week.c.cluster,
            week.c.uid,
            week.c.owner,
            sa.func.rank().over(order_by=week.c.top_waste.desc()).label("place"),
        )
        .where(week.c.top_waste > 0)
        .subquery("ranked")
    )
    best = (
        sa.select(
            ranked.c.cluster,
            ranked.c.uid,
            ranked.c.owner,
            rec.c.waste_gpu_minutes,
            rec.c.kind,
            rec.c.severity,
            rec.c.message,
            sa.func.row_number()
            .over(
                partition_by=(ranked.c.cluster, ranked.c.uid),
                order_by=(rec.c.waste_gpu_minutes.desc(), rec.c.position),
            )
            .label("per_job"),
        )
        .select_from(
            ranked.join(rec, sa.and_(rec.c.cluster == ranked.c.cluster, rec.c.job_uid == ranked.c.uid))
        )
        .where(ranked.c.place <= TOP_WASTE, rec.c.waste_gpu_minutes > 0)
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
        .where(best.c.per_job == 1)
    )


# The trend's weeks before the two the totals part sums (the week and the one before: the same jobs,
# so they are not read twice).
_EARLIER_WEEKS = TREND_WEEKS - 2


def _trend(by_cluster: bool) -> sa.Select[Any]:
    """The team's trend weeks before the last two (trend_queries.weekly_sums, parameters b0..b10)."""
    sums = trend_queries.weekly_sums(_EARLIER_WEEKS, TrendGroup.TEAM, True, by_cluster).subquery("trend")
    return _part(
        "trend",
        {
            "week": sums.c.week,
            "jobs": sums.c.jobs,
            "jobs_unmeasured": sums.c.jobs_unmeasured,
            "gpu_minutes": sums.c.gpu_minutes,
            "used_gpu_minutes": sums.c.used_gpu_minutes,
            "used_basis_gpu_minutes": sums.c.used_basis,
            "idle_gpu_minutes": sums.c.idle_gpu_minutes,
        },
    )


def _adoption(by_cluster: bool) -> sa.Select[Any]:
    """The week's judged runs of the team per owner and outcome (adoption.group_sums)."""
    t = advice_adoption.c
    conditions = [t.team == _team(), t.finished_at >= _at("start"), t.finished_at < _at("end")]
    if by_cluster:
        conditions.append(t.cluster == _cluster())
    sums = adoption.group_sums(*conditions).subquery("adoption")
    return _part(
        "adoption",
        {
            "owner": sums.c.owner,
            "outcome": sums.c.outcome,
            "jobs": sums.c.runs,
            "gpu_hours_freed": sums.c.gpu,
            "memory_gib_hours_freed": sums.c.memory,
        },
    )


def _nudges() -> sa.Select[Any]:
    """The team's nudge ledger rows of the week's UTC days (nudge_ledger.day_keys: n0..n8)."""
    keys = [sa.bindparam(f"n{i}", type_=sa.String()) for i in range(nudge_ledger.MAX_DAY_KEYS)]
    return _part("nudges", {"value": checkpoints.c.value}).where(checkpoints.c.key.in_(keys))


def _kueue(by_cluster: bool) -> list[sa.Select[Any]]:
    """The LocalQueues' ClusterQueues and their quotas (queue_quotas.queue_reach), and the team's
    namespaces (its configuration's JSON list, as text), from which its quota is reached."""
    conditions = [local_queues.c.cluster == _cluster()] if by_cluster else []
    reach = queue_quotas.queue_reach(*conditions).subquery("reach")
    return [
        _part(
            "kueue",
            {
                "namespace": reach.c.namespace,
                "cluster": reach.c.cluster,
                "name": reach.c.name,
                "quota_gpus": reach.c.nominal_gpus,
            },
        ),
        _part("namespaces", {"value": sa.cast(teams.c.namespaces, sa.Text())}).where(teams.c.name == _team()),
    ]


@functools.cache
def _statement(dialect: str, by_cluster: bool, shape: Shape) -> sa.CompoundSelect[Any]:
    """Everything a digest needs as one statement, so that it costs one round trip: the week's rows
    are read once (a CTE) and grouped per week, per person, and per person and day, and the top
    waste (and, on SQLite, the queue waits), the trend, the adoption, the nudges and the Kueue
    quota come along as parts of one UNION ALL."""
    fortnight = _fortnight(by_cluster).c
    postgres = dialect == "postgresql"
    parts = [_part("total", {"current": fortnight.current, **_totals(fortnight)}).group_by(fortnight.current)]
    if shape is not Shape.TOTALS:
        week = _week_rows(by_cluster)
        c = week.c
        # day_1..day_6 are the local midnights inside the week; the week bounds the first and last.
        day = sa.case(*[(c.finished_at < _at(f"day_{index + 1}"), index) for index in range(6)], else_=6)
        # The week's queue waits (creation to the end of the wait), for its percentiles.
        wait = seconds_after(dialect, c.queued_until, c.created_at)
        waited = (c.queued_until.is_not(None), c.created_at.is_not(None))
        parts += [
            # Per person and GPU model: the domain prices each model's GPU-hours at its own rate.
            _part(
                "person",
                {"current": sa.literal(1), "owner": c.owner, "gpu_model": c.gpu_model, **_gpu_sums(c)},
            ).group_by(c.owner, c.gpu_model),
            _part(
                "day",
                {
                    "current": sa.literal(1),
                    "owner": c.owner,
                    "day": day,
                    "gpu_minutes": sa.func.sum(c.gpu_minutes),
                    # A day's used GPU-minutes are known only if known for every job that day.
                    "used_all_known": sa.case(
                        (
                            sa.func.count(c.used_gpu_minutes) == sa.func.count(),
                            sa.func.sum(c.used_gpu_minutes),
                        )
                    ),
                },
            )
            .where(c.gpu_minutes.is_not(None))
            .group_by(c.owner, day),
            _top_waste(week),
        ]
        if postgres:
            p50 = sa.func.percentile_cont(0.5).within_group(wait)
            p95 = sa.func.percentile_cont(0.95).within_group(wait)
            parts.append(_part("percentiles", {"queue_p50": p50, "queue_p95": p95}).where(*waited))
        else:
            # SQLite has no percentile function: the waits themselves, for the domain to interpolate.
            parts.append(_part("queue", {"queue_seconds": wait}).where(*waited))
    if shape is Shape.DIGEST:
        parts += [_trend(by_cluster), _adoption(by_cluster), _nudges(), *_kueue(by_cluster)]
    return sa.union_all(*parts)


@dataclass(frozen=True, slots=True)
class _Aggregated:
    # The week's rows (its totals alone when it had no GPU job), without the week before's totals.
    week: DigestRows
    previous: TeamTotals
    # Shape.DIGEST's parts.
    trend: tuple[TrendRow, ...] = ()
    adoption: tuple[AdoptionPerson, ...] = ()
    nudge_values: tuple[str | None, ...] = ()
    kueue: tuple[tuple[str, str, str, float | None], ...] = ()
    namespaces: tuple[str, ...] = field(default=())


async def _aggregate(
    conn: AsyncConnection,
    cluster: str | None,
    team: str,
    previous_start: datetime,
    start: datetime,
    end: datetime,
    days: Sequence[datetime],
    *,
    shape: Shape = Shape.WEEK,
    extra: dict[str, Any] | None = None,
) -> _Aggregated:
    query = _statement(conn.dialect.name, cluster is not None, shape)
    params: dict[str, Any] = {
        "team": team,
        "previous_start": previous_start,
        "start": start,
        "end": end,
        **{f"day_{index}": days[index] for index in range(1, 7)},
        **(extra or {}),
    }
    if cluster is not None:
        params["cluster"] = cluster
    totals = {0: TeamTotals(), 1: TeamTotals()}
    people: list[PersonRow] = []
    daily: list[DailyRow] = []
    waste: list[WasteRow] = []
    queue: list[float] = []
    trend: list[TrendRow] = []
    judged: list[adoption.GroupSum] = []
    nudge_values: list[str | None] = []
    kueue: list[tuple[str, str, str, float | None]] = []
    namespaces: tuple[str, ...] = ()
    p50 = p95 = None
    for values in await fetch(conn, query, params):
        row = dict(zip(_NAMES, values, strict=True))
        part = row["part"]
        if part == "total":
            totals[row["current"]] = TeamTotals(**{name: row[name] for name in _TOTALS})
        elif part == "percentiles":
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
                    row["gpu_model"],
                )
            )
        elif part == "day":
            daily.append(DailyRow(row["owner"], row["day"], row["gpu_minutes"], row["used_all_known"]))
        elif part == "waste":
            waste.append(WasteRow(**{f.name: row[f.name] for f in fields(WasteRow)}))
        elif part == "queue":
            # julianday() keeps ~10 µs; round so the figures match Postgres' exact microseconds.
            queue.append(round(float(row["queue_seconds"]), 3))
        elif part == "trend":
            trend.append(
                trend_queries.trend_row(
                    team,
                    row["week"],
                    row["jobs"],
                    row["jobs_unmeasured"],
                    row["gpu_minutes"],
                    row["used_gpu_minutes"],
                    row["used_basis_gpu_minutes"],
                    row["idle_gpu_minutes"],
                )
            )
        elif part == "adoption":
            judged.append(
                (
                    team,
                    row["owner"],
                    row["outcome"],
                    row["jobs"],
                    row["gpu_hours_freed"],
                    row["memory_gib_hours_freed"],
                )
            )
        elif part == "nudges":
            nudge_values.append(row["value"])
        elif part == "kueue":
            kueue.append((row["namespace"], row["cluster"], row["name"], row["quota_gpus"]))
        else:  # the team's namespaces
            listed = orjson.loads(row["value"] or "null")
            namespaces = tuple(listed) if isinstance(listed, list) else ()
    week = DigestRows(totals[1])
    if week.totals.jobs:
        week = DigestRows(
            totals[1],
            tuple(people),
            tuple(daily),
            tuple(waste),
            None if p50 is None else float(p50),
            None if p95 is None else float(p95),
            # SQLite, which has no percentile function: the queue waits themselves.
            None if conn.dialect.name == "postgresql" else tuple(sorted(queue)),
        )
    return _Aggregated(
        week,
        totals[0],
        tuple(trend),
        tuple(AdoptionPerson(g.owner, g.tally) for g in adoption.tally_groups(judged)),
        tuple(nudge_values),
        tuple(kueue),
        namespaces,
    )


async def team_totals(
    source: Connectable, cluster: str | None, team: str, start: datetime, end: datetime
) -> TeamTotals:
    """The team's sums over the GPU jobs that finished in [start, end) (no local days needed)."""
    async with _connection(source) as conn:
        days = [start] * 7 + [end]
        agg = await _aggregate(conn, cluster, team, start, start, end, days, shape=Shape.TOTALS)
    return agg.week.totals


def _check_days(start: datetime, end: datetime, days: Sequence[datetime]) -> None:
    if len(days) != 8 or days[0] != start or days[-1] != end:
        raise ValueError("days must be the week's 8 local-day boundaries, from start to end")


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
    _check_days(start, end, days)
    async with _connection(source) as conn:
        agg = await _aggregate(conn, cluster, team, previous_start or start, start, end, days)
    return replace(agg.week, previous=agg.previous if previous_start is not None else None)


async def load_digest(
    source: Connectable,
    team: str,
    week: str,
    tz: str,
    *,
    cluster: str | None = None,
    quota_gpus: float | None = None,
    rates: Rates | None = None,
    budgets: Sequence[BudgetReport] = (),
) -> Digest:
    """The digest of `team` for ISO `week` in zone `tz`, with the change against the week before,
    the trend of the TREND_WEEKS weeks ending with it, and the share of the team's Kueue quota
    (`quota_gpus`, else the one the Kueue watch found for the team's namespaces): one statement.
    `rates` price the week's GPU-hours per model (accounting.rates); `budgets` are the team's as
    service.budgets reports them, handed to the digest as they are."""
    start, end = week_bounds(week, tz)
    previous_start, _ = week_bounds(previous_week(week), tz)
    weeks = trend_weeks(week, TREND_WEEKS)
    keys = nudge_ledger.day_keys(team, start, end)
    bounds = trend_bounds(weeks, tz)
    assert bounds[-3:] == (previous_start, start, end)  # the trend ends with the two weeks compared
    extra = {
        **trend_queries.bound_weeks(bounds[: _EARLIER_WEEKS + 1]),
        # Every key slot bound: the week's keys, the last one repeated (the IN list is fixed).
        **{f"n{i}": keys[min(i, len(keys) - 1)] for i in range(nudge_ledger.MAX_DAY_KEYS)},
    }
    days = day_bounds(week, tz)
    _check_days(start, end, days)
    async with _connection(source) as conn:
        agg = await _aggregate(
            conn, cluster, team, previous_start, start, end, days, shape=Shape.DIGEST, extra=extra
        )
    entries = nudge_ledger.entries_of(agg.nudge_values)
    if cluster is not None:
        entries = [e for e in entries if e.cluster == cluster]
    found = team_quota_gpus(agg.namespaces, *queue_quotas.reach_of(agg.kueue))
    # The trend's last two weeks are the totals of the week before and of the week (trend_bounds'
    # last three instants are previous_start, start and end); a week without GPU jobs has no row.
    last_two = [
        trend_queries.trend_row(team, _EARLIER_WEEKS + i, *_trend_figures(t))
        for i, t in enumerate((agg.previous, agg.week.totals))
        if t.jobs
    ]
    (trend,) = build_series(
        TrendGroup.TEAM,
        weeks,
        tz,
        [*agg.trend, *last_two],
        groups=[team],
        quotas={} if found is None else {team: found},
    )
    if quota_gpus is None:
        quota_gpus = trend.quota_gpus
    rows = replace(
        agg.week, previous=agg.previous, nudged=nudged_pod_rows(entries, start, end), adoption=agg.adoption
    )
    return build_digest(
        team,
        week,
        tz,
        rows,
        rows.previous,
        quota_gpus=quota_gpus,
        trend=trend.points,
        rates=rates,
        budgets=budgets,
    )


def _trend_figures(t: TeamTotals) -> tuple[int, int, float | None, float | None, float | None, float | None]:
    """A week's totals as trend_queries.trend_row takes them."""
    return (
        t.jobs,
        t.jobs_unmeasured,
        t.gpu_minutes,
        t.used_gpu_minutes,
        t.used_basis_gpu_minutes,
        t.idle_gpu_minutes,
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
