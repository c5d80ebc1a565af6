"""The admins' weekly digest: the cluster view of one week, built from the weekly trends.

Where a team digest tells a lead who in the team wasted what, this tells the admins which teams
hold idle GPUs: every team with GPU jobs in the week, ranked by idle GPU-hours (most first; a team
whose idle time was not measured comes last), with its held GPU-hours, efficiency and share of its
Kueue quota, and the cluster's trend over the last weeks. The figures are the trends' (domain/
trends.py), so a team's line is the figure its own digest shows for the week.

Where `accounting.rates` price GPU-hours, the teams are ranked by idle cost instead (an idle H100
hour costs more than an idle A10 hour): each team's idle GPU-hours priced per GPU model, handed in
by the service (the API's usage figures, summed per team). A team whose idle GPU-hours are all of
models no rate matches has no idle cost (None) and comes after the priced teams, by idle GPU-hours.

`adoption` is the hook for advice adoption (issue 17 part A): lines that part hands in, shown under
their own heading; empty until it does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from inno_notify.domain.trends import TrendPoint, TrendSeries
from inno_notify.domain.weeks import week_bounds

# A lead of a cluster with hundreds of teams reads the top of the list; the rest is summed.
TOP_TEAMS = 20


@dataclass(frozen=True, slots=True)
class TeamWeekLine:
    team: str
    jobs: int
    gpu_hours: float | None
    used_gpu_hours: float | None
    idle_gpu_hours: float | None
    efficiency: float | None
    quota_gpus: float | None
    quota_share: float | None
    # Where rates price GPU-hours: the idle GPU-hours' cost (None: none of them priced).
    idle_cost: float | None = None


@dataclass(frozen=True, slots=True)
class ClusterDigest:
    week: str
    timezone: str
    start: datetime
    end: datetime
    # Teams with GPU jobs in the week, most idle GPU-hours first (TOP_TEAMS at most).
    teams: tuple[TeamWeekLine, ...]
    # Teams with GPU jobs beyond TOP_TEAMS, and their idle GPU-hours together.
    more_teams: int
    more_idle_gpu_hours: float | None
    # One series per cluster in the database (one, unless several clusters share it), oldest first.
    clusters: tuple[TrendSeries, ...]
    adoption: tuple[str, ...] = ()
    # Where rates price GPU-hours (then `teams` are ranked by idle cost): their currency, and the
    # idle cost of the teams beyond TOP_TEAMS together.
    currency: str | None = None
    more_idle_cost: float | None = None

    @property
    def no_gpu_jobs(self) -> bool:
        return not self.teams

    def week_of(self, series: TrendSeries) -> TrendPoint | None:
        """The digest's week in a cluster's series."""
        return next((p for p in series.points if p.week == self.week), None)


def _line(series: TrendSeries, idle_cost: float | None) -> TeamWeekLine:
    last = series.points[-1]
    return TeamWeekLine(
        team=series.group,
        jobs=last.jobs,
        gpu_hours=last.gpu_hours,
        used_gpu_hours=last.used_gpu_hours,
        idle_gpu_hours=last.idle_gpu_hours,
        efficiency=last.efficiency,
        quota_gpus=series.quota_gpus,
        quota_share=last.quota_share,
        idle_cost=idle_cost,
    )


def build_cluster_digest(
    week: str,
    tz: str,
    teams: Sequence[TrendSeries],
    clusters: Sequence[TrendSeries],
    *,
    adoption: Sequence[str] = (),
    top: int = TOP_TEAMS,
    idle_costs: Mapping[str, float | None] | None = None,
    currency: str | None = None,
) -> ClusterDigest:
    """The admins' digest of `week` (the last week of every series) from the per-team and
    per-cluster trends ending with it; with `idle_costs` (per team, in `currency`), ranked by them."""
    if any(s.points[-1].week != week for s in (*teams, *clusters)):
        raise ValueError(f"every series must end with {week}")
    priced = idle_costs is not None and currency is not None
    costs = idle_costs if idle_costs is not None and priced else {}
    lines = [_line(s, costs.get(s.group)) for s in teams if s.points[-1].jobs > 0]

    def by_hours(line: TeamWeekLine) -> tuple[bool, float, str]:
        return (line.idle_gpu_hours is None, -(line.idle_gpu_hours or 0.0), line.team)

    if priced:
        lines.sort(key=lambda line: (line.idle_cost is None, -(line.idle_cost or 0.0), *by_hours(line)))
    else:
        lines.sort(key=by_hours)
    shown, rest = lines[:top], lines[top:]
    rest_idle = [line.idle_gpu_hours for line in rest if line.idle_gpu_hours is not None]
    rest_cost = [line.idle_cost for line in rest if line.idle_cost is not None]
    start, end = week_bounds(week, tz)
    return ClusterDigest(
        week=week,
        timezone=tz,
        start=start,
        end=end,
        teams=tuple(shown),
        more_teams=len(rest),
        more_idle_gpu_hours=sum(rest_idle) if rest_idle else None,
        clusters=tuple(clusters),
        adoption=tuple(adoption),
        currency=currency if priced else None,
        more_idle_cost=sum(rest_cost) if rest_cost else None,
    )
