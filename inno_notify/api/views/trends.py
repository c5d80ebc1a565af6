"""GET /api/v1/trends: GPU-hours held, used and idle, and efficiency, per week, per team or cluster.

The store sums the weeks in one statement (adapters/db/trend_queries.py); the weeks are ISO weeks
in the service's digest zone, the newest being `week` (default: the last complete one), so a
team's newest point is the figure its digest shows. JSON, or CSV with one row per group and week.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, cast

from aiohttp import web
from pydantic import Field

from inno_notify.api import keys, resources
from inno_notify.api.errors import bad_request
from inno_notify.api.params import Text, Week, Weeks
from inno_notify.api.views.respond import JSON_OR_CSV, csv_download, csv_table, json, negotiated
from inno_notify.domain.digest import trend_point_to_dict
from inno_notify.domain.trends import TREND_WEEKS, TrendGroup, TrendSeries, trend_bounds, trend_weeks
from inno_notify.domain.weeks import last_complete_week

CSV_COLUMNS = ("group", "quota_gpus", *resources.TrendWeek.__annotations__)


@dataclass(frozen=True, slots=True)
class TrendQuery:
    group_by: Annotated[TrendGroup, Field(description="One series per team or per cluster.")] = (
        TrendGroup.TEAM
    )
    weeks: Weeks = TREND_WEEKS
    week: Annotated[
        Week | None, Field(description="The newest week, like 2026-W48; default: the last complete week.")
    ] = None
    team: Annotated[Text | None, Field(description="Only this team's series.")] = None
    cluster: Annotated[Text | None, Field(description="Only this cluster's jobs.")] = None


def series_resource(series: TrendSeries) -> resources.TrendSeries:
    return {
        "group": series.group,
        "quota_gpus": series.quota_gpus,
        "weeks": [cast(resources.TrendWeek, trend_point_to_dict(p)) for p in series.points],
    }


async def trends(request: web.Request, given: TrendQuery) -> web.Response:
    media = negotiated(request, JSON_OR_CSV, "trends are available")
    tz = request.app[keys.TRENDS_TIMEZONE]
    last = given.week or last_complete_week(request.app[keys.CLOCK](), tz)
    try:
        weeks = trend_weeks(last, given.weeks)
        trend_bounds(weeks, tz)
    except (ValueError, OverflowError):
        raise bad_request(f"{given.weeks} weeks up to {last} leave the calendar") from None
    team = given.team if given.group_by is TrendGroup.TEAM else None
    if given.team is not None and team is None:
        raise bad_request("team= goes with group_by=team")
    found = await request.app[keys.STORE].trends.weekly(
        given.group_by, weeks, tz, team=team, cluster=given.cluster
    )
    series = [series_resource(s) for s in found]
    if media == "text/csv":
        return csv_download(_csv(series, given.group_by), f"trends-by-{given.group_by.value}.csv")
    return json(resources.TrendReport(group_by=given.group_by, timezone=tz, weeks=list(weeks), series=series))


def _csv(series: list[resources.TrendSeries], group_by: TrendGroup) -> bytes:
    header = [group_by.value if c == "group" else c for c in CSV_COLUMNS]
    rows = (
        {"group": s["group"], "quota_gpus": s["quota_gpus"], **week} for s in series for week in s["weeks"]
    )
    return csv_table(header, ([row[c] for c in CSV_COLUMNS] for row in rows))
