"""The admins' weekly digest: the cluster view of one week, built from the weekly trends.

Where a team digest tells a lead who in the team wasted what, this tells the admins which teams
hold idle GPUs: every team with GPU jobs in the week, ranked by idle GPU-hours (most first; a team
whose idle time was not measured comes last), with its held GPU-hours, efficiency and share of its
Kueue quota, and the cluster's trend over the last weeks. The figures are the trends' (domain/
trends.py), so a team's line is the figure its own digest shows for the week.

`adoption` is the hook for advice adoption (issue 17 part A): lines that part hands in, shown under
their own heading; empty until it does.
"""

from __future__ import annotations

from collections.abc import Sequence
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

    @property
    def no_gpu_jobs(self) -> bool:
        return not self.teams

    def week_of(self, series: TrendSeries) -> TrendPoint | None:
        """The digest's week in a cluster's series."""
        return next((p for p in series.points if p.week == self.week), None)


def _line(series: TrendSeries) -> TeamWeekLine:
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
    )


def build_cluster_digest(
    week: str,
    tz: str,
    teams: Sequence[TrendSeries],
    clusters: Sequence[TrendSeries],
    *,
    adoption: Sequence[str] = (),
    top: int = TOP_TEAMS,
) -> ClusterDigest:
    """The admins' digest of `week` (the last week of every series) from the per-team and
    per-cluster trends ending with it."""
    if any(s.points[-1].week != week for s in (*teams, *clusters)):
        raise ValueError(f"every series must end with {week}")
    lines = [_line(s) for s in teams if s.points[-1].jobs > 0]
    lines.sort(key=lambda line: (line.idle_gpu_hours is None, -(line.idle_gpu_hours or 0.0), line.team))
    shown, rest = lines[:top], lines[top:]
    rest_idle = [line.idle_gpu_hours for line in rest if line.idle_gpu_hours is not None]
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
    )
