"""Weekly trends (domain/trends.py) summed by the database: `Store.trends`, a TrendRepository.

A trend is one statement: the GPU jobs that finished in the trend's weeks, bucketed by a CASE over
the week boundaries (computed in Python in the zone and bound as parameters, as the digest does
with its days, so neither dialect needs zone support), grouped per team or cluster and week.

It reads the jobs table alone: the GPU-minutes held, used and idle are the copies save_usage keeps
on the job's row (tables.jobs `usage_*`), so no usage row is probed. For one team (the digest's
trend line) the rows come from the (team, finished_at) index, which on Postgres INCLUDEs every
column read here: twelve weeks of a team are one range of adjacent index entries. Every team or
every cluster at once (the API, the admin digest) reads the weeks' jobs by finish time.

The quotas a trend divides by come from the Kueue watch's tables (queue_quotas.py).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from inno_notify.adapters.db import queue_quotas
from inno_notify.adapters.db.tables import UTCDateTime, jobs
from inno_notify.adapters.db.transactions import Repository, reads
from inno_notify.domain.trends import TrendGroup, TrendRow, TrendSeries, build_series, trend_bounds


def _at(name: str) -> sa.BindParameter[datetime]:
    return sa.bindparam(name, type_=UTCDateTime())


def _count_if(condition: sa.ColumnElement[bool]) -> sa.ColumnElement[int]:
    return sa.func.coalesce(sa.func.sum(sa.case((condition, 1), else_=0)), 0)


@functools.cache
def weekly_sums(weeks: int, group_by: TrendGroup, by_team: bool, by_cluster: bool) -> sa.Select[Any]:
    """Sums per group and week number over `weeks` weeks whose boundaries are the bound parameters
    b0..b{weeks}, of one team (parameter `team`) or cluster (`cluster`) where asked: the statement
    `trend_rows` runs, also a part of the digest's (digest_queries.py); `trend_row` reads its rows."""
    c = jobs.c
    # One week needs no CASE: a CASE without a WHEN ("CASE ELSE 0 END") is a syntax error on both.
    week: sa.ColumnElement[int] = (
        sa.case(*[(c.finished_at < _at(f"b{i + 1}"), i) for i in range(weeks - 1)], else_=weeks - 1)
        if weeks > 1
        else sa.literal(0, sa.Integer())
    )
    team = sa.bindparam("team", type_=sa.String())
    # One team's rows are grouped by week alone (the team is the parameter): no text to hash per row.
    one_team = group_by is TrendGroup.TEAM and by_team
    group = c.team if group_by is TrendGroup.TEAM else c.cluster
    rows = (
        sa.select(
            week.label("week"),
            *([] if one_team else [group.label("grp")]),
            c.gpu_minutes_held,
            c.gpu_minutes_used,
            c.gpu_minutes_idle,
        )
        .where(
            c.finished_at >= _at("b0"),
            c.finished_at < _at(f"b{weeks}"),
            c.gpus_requested > 0,
            *([c.team == team] if by_team else []),
            *([c.cluster == sa.bindparam("cluster", type_=sa.String())] if by_cluster else []),
            *([c.team.is_not(None)] if group_by is TrendGroup.TEAM and not by_team else []),
        )
        .subquery("trend_jobs")
    )
    r = rows.c
    grouped = [r.week] if one_team else [r.grp, r.week]
    return sa.select(
        (team if one_team else r.grp).label("grp"),
        r.week,
        sa.func.count().label("jobs"),
        _count_if(r.gpu_minutes_held.is_(None)).label("jobs_unmeasured"),
        sa.func.sum(r.gpu_minutes_held).label("gpu_minutes"),
        sa.func.sum(r.gpu_minutes_used).label("used_gpu_minutes"),
        sa.func.sum(sa.case((r.gpu_minutes_used.is_not(None), r.gpu_minutes_held))).label("used_basis"),
        sa.func.sum(r.gpu_minutes_idle).label("idle_gpu_minutes"),
    ).group_by(*grouped)


def trend_row(group: str, week: int, jobs: int, unmeasured: int, *sums: float | None) -> TrendRow:
    """A row of `weekly_sums`: group, week, jobs, unmeasured jobs, GPU-minutes held, used, held by
    the jobs whose use is known, idle."""
    held, used, basis, idle = sums
    return TrendRow(group, int(week), int(jobs), int(unmeasured), held, used, basis, idle)


def bound_weeks(bounds: Sequence[datetime]) -> dict[str, datetime]:
    """weekly_sums' parameters b0..bN: the boundaries of its N weeks."""
    return {f"b{i}": at for i, at in enumerate(bounds)}


async def trend_rows(
    conn: AsyncConnection,
    group_by: TrendGroup,
    bounds: Sequence[datetime],
    *,
    team: str | None = None,
    cluster: str | None = None,
) -> list[TrendRow]:
    """The sums per group and week of the GPU jobs that finished in [bounds[0], bounds[-1]),
    week i being [bounds[i], bounds[i + 1])."""
    weeks = len(bounds) - 1
    if weeks < 1:
        raise ValueError("a trend needs at least two week boundaries")
    query = weekly_sums(weeks, group_by, team is not None, cluster is not None)
    params: dict[str, Any] = bound_weeks(bounds)
    if team is not None:
        params["team"] = team
    if cluster is not None:
        params["cluster"] = cluster
    return [trend_row(*row) for row in await conn.execute(query, params)]


async def trends(
    conn: AsyncConnection,
    group_by: TrendGroup,
    weeks: Sequence[str],
    tz: str,
    *,
    team: str | None = None,
    cluster: str | None = None,
) -> list[TrendSeries]:
    """The weekly series of `weeks` (consecutive ISO weeks, oldest first) in zone `tz`, per team or
    per cluster, with each group's share of its Kueue quota where one is known."""
    rows = await trend_rows(conn, group_by, trend_bounds(weeks, tz), team=team, cluster=cluster)
    if group_by is TrendGroup.TEAM:
        quotas = await queue_quotas.team_quotas(conn, cluster)
    else:
        quotas = await queue_quotas.cluster_quotas(conn)
    # The group asked for by name has a series even without jobs.
    named = team if group_by is TrendGroup.TEAM else cluster
    groups = [named] if named is not None else []
    return build_series(group_by, weeks, tz, rows, groups=groups, quotas=quotas)


class TrendRepository(Repository):
    """Reads weekly trends (`Store.trends`): per team (or only `team`) or per cluster (or only
    `cluster`), one series over `weeks`."""

    weekly = reads(trends)
