"""The admins' cluster digest as people read it (domain/cluster_digest.py): spelt figures, e-mail.

As for the team digest (digest_views.py), templates get plain strings and never compute; the
channel's template environment escapes them. Admins get it by e-mail only (`digest.admin_recipients`).
Templates: `email/cluster_digest.{subject,txt,html}.j2`, overridable by the same relative path;
DigestRenderer.cluster_message renders them.
"""

from __future__ import annotations

from dataclasses import dataclass

from inno_notify.adapters.channels.digest_figures import (
    hours,
    hours_columns,
    money,
    percent,
    sparkline,
    trend_text,
)
from inno_notify.domain.cluster_digest import ClusterDigest


@dataclass(frozen=True, slots=True)
class TeamLineView:
    team: str
    jobs: str
    gpu_hours: str
    used_gpu_hours: str
    idle_gpu_hours: str
    efficiency: str
    quota_share: str
    # "12.50 EUR" where rates price GPU-hours, else "".
    idle_cost: str = ""


@dataclass(frozen=True, slots=True)
class ClusterView:
    name: str
    # This week's held / used / idle and efficiency, then the trend line.
    week: str
    trend: str
    # One block per week, oldest first, for the HTML table's small chart.
    sparkline: str


@dataclass(frozen=True, slots=True)
class ClusterDigestView:
    week: str
    period: str
    headline: str
    no_gpu_jobs: bool
    teams: tuple[TeamLineView, ...]
    more_teams: str
    clusters: tuple[ClusterView, ...]
    adoption: tuple[str, ...]
    # What the teams are ranked by: "idle cost" where rates price GPU-hours, else "idle GPU-hours".
    ranked_by: str = "idle GPU-hours"
    priced: bool = False


def cluster_digest_view(d: ClusterDigest) -> ClusterDigestView:
    last_day = d.end.date()
    period = f"{d.start:%d %b} – {last_day:%d %b %Y} ({d.timezone}, week starts shown in UTC)"
    idle = [t.idle_gpu_hours for t in d.teams if t.idle_gpu_hours is not None]
    if d.no_gpu_jobs:
        headline = f"No GPU jobs finished in {d.week}."
    else:
        top = d.teams[0]
        idle_text = hours(sum(idle) if idle else None, "GPU-h")
        most = hours(top.idle_gpu_hours, "GPU-h")
        if d.currency is not None and top.idle_cost is not None:
            most += f", {money(top.idle_cost, d.currency)}"
        headline = (
            f"{len(d.teams) + d.more_teams} teams ran GPU jobs; {idle_text} idle in the top "
            f"{len(d.teams)}, most in {top.team} ({most})."
        )
    clusters = []
    for series in d.clusters:
        point = d.week_of(series)
        week = (
            "no GPU jobs"
            if point is None or point.jobs == 0
            else f"{hours(point.gpu_hours)} held, {hours(point.used_gpu_hours)} used, "
            f"{hours(point.idle_gpu_hours)} idle, efficiency {percent(point.efficiency)}"
            + ("" if point.quota_share is None else f", {percent(point.quota_share)} of Kueue quota")
        )
        clusters.append(
            ClusterView(
                name=series.group,
                week=week,
                trend=trend_text(series.points) if len(series.points) > 1 else "",
                sparkline=sparkline([p.gpu_hours for p in series.points]),
            )
        )
    more = ""
    if d.more_teams:
        more = f"and {d.more_teams} more teams, {hours(d.more_idle_gpu_hours, 'GPU-h')} idle together"
        if d.currency is not None and d.more_idle_cost is not None:
            more += f" ({money(d.more_idle_cost, d.currency)})"
    return ClusterDigestView(
        week=d.week,
        period=period,
        headline=headline,
        no_gpu_jobs=d.no_gpu_jobs,
        teams=tuple(
            TeamLineView(
                team=t.team,
                **hours_columns(t),
                quota_share="no Kueue quota known"
                if t.quota_gpus is None
                else f"{percent(t.quota_share)} of {t.quota_gpus:g} GPUs",
                idle_cost="" if d.currency is None else money(t.idle_cost, d.currency),
            )
            for t in d.teams
        ),
        more_teams=more,
        clusters=tuple(clusters),
        adoption=d.adoption,
        ranked_by="idle GPU-hours" if d.currency is None else "idle cost",
        priced=d.currency is not None,
    )
