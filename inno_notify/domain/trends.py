"""Cluster efficiency over time: weekly series of GPU-hours held, used and idle, per team or cluster.

The database sums (adapters/db/trend_queries.py hands over one `TrendRow` per group and week that
had GPU jobs); what is left here is pure: which weeks a trend spans (the `count` ISO weeks ending
with a given one, in a zone), the series with every week present, and the share of a Kueue quota.

The conventions are the digest's (domain/digest.py, which computes its figures with this module's
`to_hours`, `efficiency_of` and `quota_share_of`), so that the newest point of a team's trend is
the figure its digest shows: a job belongs to the week in which it finished, in the zone; only GPU
jobs count; efficiency is used over held GPU-hours of the jobs whose use was measured. A week in
which no GPU job finished held 0 GPU-hours (a count, not a missing measurement) and has no
efficiency; a week whose jobs were all unmeasured has None figures and says so by `jobs_unmeasured`.

Quota share: held GPU-hours over the nominal GPU quota × the week's hours. The quota is the one
known now (the Kueue watch keeps the current ClusterQueues, not their history), so a quota that
changed during the trend is applied to every week; the API and the digest say so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Protocol

from inno_notify.domain.weeks import format_week, week_bounds, week_monday

TREND_WEEKS = 12
MAX_TREND_WEEKS = 104
# A ClusterQueue: (cluster, name).
QueueKey = tuple[str, str]


class TrendGroup(StrEnum):
    """What one series of a trend covers."""

    TEAM = "team"
    CLUSTER = "cluster"


@dataclass(frozen=True, slots=True)
class TrendRow:
    """Sums over one group's GPU jobs that finished in week number `week` (0 = the oldest)."""

    group: str
    week: int
    jobs: int
    jobs_unmeasured: int = 0
    gpu_minutes: float | None = None
    used_gpu_minutes: float | None = None
    # GPU-minutes of the jobs whose used GPU-minutes are known: efficiency's denominator.
    used_basis_gpu_minutes: float | None = None
    idle_gpu_minutes: float | None = None


@dataclass(frozen=True, slots=True)
class TrendPoint:
    week: str
    start: datetime
    end: datetime
    jobs: int
    jobs_unmeasured: int
    gpu_hours: float | None
    used_gpu_hours: float | None
    idle_gpu_hours: float | None
    efficiency: float | None
    quota_share: float | None

    @property
    def week_hours(self) -> float:
        return (self.end - self.start).total_seconds() / 3600


@dataclass(frozen=True, slots=True)
class TrendSeries:
    """One team's or cluster's weekly points, oldest first, every week of the trend present."""

    group_by: TrendGroup
    group: str
    # The nominal GPU quota of the group's Kueue ClusterQueues as known now; None: none known.
    quota_gpus: float | None
    points: tuple[TrendPoint, ...]


def trend_weeks(last: str, count: int = TREND_WEEKS) -> tuple[str, ...]:
    """The `count` ISO weeks ending with `last`, oldest first."""
    if not 1 <= count <= MAX_TREND_WEEKS:
        raise ValueError(f"a trend spans 1 to {MAX_TREND_WEEKS} weeks, not {count}")
    monday = week_monday(last)
    weeks = []
    for back in range(count - 1, -1, -1):
        iso = (monday - timedelta(days=7 * back)).isocalendar()
        weeks.append(format_week(iso.year, iso.week))
    return tuple(weeks)


def trend_bounds(weeks: Sequence[str], tz: str) -> tuple[datetime, ...]:
    """The len(weeks) + 1 UTC instants at which the consecutive `weeks` begin and the last one ends."""
    bounds = [week_bounds(week, tz)[0] for week in weeks]
    bounds.append(week_bounds(weeks[-1], tz)[1])
    return tuple(bounds)


class GpuMinuteSums(Protocol):
    """GPU-minute sums over some finished GPU jobs (a week's trend row, a team's or a person's week
    in the digest)."""

    @property
    def gpu_minutes(self) -> float | None: ...

    @property
    def used_gpu_minutes(self) -> float | None: ...

    # GPU-minutes held by the jobs whose used GPU-minutes are known; None: the same as gpu_minutes.
    @property
    def used_basis_gpu_minutes(self) -> float | None: ...


def to_hours(minutes: float | None) -> float | None:
    return None if minutes is None else minutes / 60


def efficiency_of(sums: GpuMinuteSums) -> float | None:
    """Used over held GPU-minutes, over the jobs whose use was measured (so that a MIG job without
    a utilization metric does not count as idle); None when nothing measured was held."""
    basis = sums.used_basis_gpu_minutes if sums.used_basis_gpu_minutes is not None else sums.gpu_minutes
    if sums.used_gpu_minutes is None or basis is None or not basis > 0:
        return None
    return sums.used_gpu_minutes / basis


def quota_share_of(
    gpu_hours: float | None, quota_gpus: float | None, start: datetime, end: datetime
) -> float | None:
    """GPU-hours held from `start` to `end` over the nominal GPU quota × those hours; None without
    a quota or a held figure."""
    if quota_gpus is None or not quota_gpus > 0 or gpu_hours is None:
        return None
    return gpu_hours / (quota_gpus * (end - start).total_seconds() / 3600)


def _point(
    week: str, start: datetime, end: datetime, row: TrendRow | None, quota: float | None
) -> TrendPoint:
    if row is None:
        row = TrendRow(group="", week=0, jobs=0, gpu_minutes=0.0, used_gpu_minutes=0.0, idle_gpu_minutes=0.0)
    held = to_hours(row.gpu_minutes)
    return TrendPoint(
        week=week,
        start=start,
        end=end,
        jobs=row.jobs,
        jobs_unmeasured=row.jobs_unmeasured,
        gpu_hours=held,
        used_gpu_hours=to_hours(row.used_gpu_minutes),
        idle_gpu_hours=to_hours(row.idle_gpu_minutes),
        efficiency=efficiency_of(row),
        quota_share=quota_share_of(held, quota, start, end),
    )


def build_series(
    group_by: TrendGroup,
    weeks: Sequence[str],
    tz: str,
    rows: Sequence[TrendRow],
    *,
    groups: Sequence[str] = (),
    quotas: Mapping[str, float] | None = None,
) -> list[TrendSeries]:
    """One series per group that had GPU jobs in the trend's weeks, plus every group in `groups`
    (a team asked for by name has a series even when idle throughout), ordered by group name."""
    bounds = trend_bounds(weeks, tz)
    by_group: dict[str, dict[int, TrendRow]] = {name: {} for name in groups}
    for row in rows:
        by_group.setdefault(row.group, {})[row.week] = row
    quotas = quotas or {}
    series = []
    for group in sorted(by_group):
        quota = quotas.get(group)
        points = tuple(
            _point(week, bounds[i], bounds[i + 1], by_group[group].get(i), quota)
            for i, week in enumerate(weeks)
        )
        series.append(TrendSeries(group_by, group, quota, points))
    return series


def team_quota_gpus(
    namespaces: Sequence[str],
    local_queues: Mapping[str, Sequence[QueueKey]],
    nominal: Mapping[QueueKey, float | None],
) -> float | None:
    """The nominal GPU quota reachable from a team's namespaces: the sum over the distinct
    ClusterQueues its namespaces' LocalQueues point at (`local_queues`: namespace → ClusterQueue
    names; `nominal`: ClusterQueue → nominal GPUs, None where it covers no GPU). None when no
    ClusterQueue with a GPU quota is reachable."""
    reached = {cq for ns in namespaces for cq in local_queues.get(ns, ())}
    quotas = [q for cq in sorted(reached) if (q := nominal.get(cq)) is not None]
    return sum(quotas) if quotas else None
