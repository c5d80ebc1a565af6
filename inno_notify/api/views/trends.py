"""GET /api/v1/trends: GPU-hours held, used and idle, and efficiency, per week, per team or cluster.

The store sums the weeks in one statement (adapters/db/trend_queries.py); the weeks are ISO weeks
in the service's digest zone, the newest being `week` (default: the last complete one), so a
team's newest point is the figure its digest shows. JSON, or CSV with one row per group and week.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from typing import Annotated, cast

from aiohttp import web
from pydantic import Field

from inno_notify.api import keys, resources
from inno_notify.api.errors import ApiError, bad_request
from inno_notify.api.negotiate import preferred
from inno_notify.api.params import Text, Week, Weeks
from inno_notify.api.serialize import dumps
from inno_notify.api.views.usage import csv_cell
from inno_notify.domain.digest import trend_point_to_dict
from inno_notify.domain.trends import TREND_WEEKS, TrendGroup, TrendSeries, trend_bounds, trend_weeks
from inno_notify.domain.weeks import last_complete_week

FORMATS = ("application/json", "text/csv")
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
    media = preferred(request.headers.get("Accept"), FORMATS)
    if media is None:
        raise ApiError(406, "not_acceptable", f"trends are available as {' or '.join(FORMATS)}")
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
        return web.Response(
            body=_csv(series, given.group_by),
            content_type="text/csv",
            charset="utf-8",
            headers={"Content-Disposition": f'attachment; filename="trends-by-{given.group_by.value}.csv"'},
        )
    report = resources.TrendReport(group_by=given.group_by, timezone=tz, weeks=list(weeks), series=series)
    return web.Response(body=dumps(report), content_type="application/json")


def _csv(series: list[resources.TrendSeries], group_by: TrendGroup) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow([group_by.value if c == "group" else c for c in CSV_COLUMNS])
    for s in series:
        for week in s["weeks"]:
            row = {"group": s["group"], "quota_gpus": s["quota_gpus"], **week}
            writer.writerow([csv_cell(row[c]) for c in CSV_COLUMNS])
    return out.getvalue().encode()
