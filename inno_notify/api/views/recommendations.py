"""GET /api/v1/recommendations: open advice across jobs, largest waste first."""

from __future__ import annotations

from aiohttp import web

from inno_notify.api import keys, params, serialize
from inno_notify.api.views.respond import json

PARAMS = ("team", "owner", "since", "limit", "cursor")


async def list_recommendations(request: web.Request) -> web.Response:
    query = request.query
    params.check_known(query, PARAMS)
    since, _ = params.time_range(query, with_until=False)
    page, next_cursor = await request.app[keys.STORE].open_recommendations(
        team=params.text(query, "team"),
        owner=params.text(query, "owner"),
        since=since,
        limit=params.limit(query),
        cursor=params.cursor(query),
    )
    return json({"items": [serialize.job_recommendation(r) for r in page], "next_cursor": next_cursor})
