"""GET /api/v1/recommendations: open advice across jobs, largest waste first."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from aiohttp import web
from pydantic import Field

from inno_notify.api import keys, resources, serialize
from inno_notify.api.params import DEFAULT_LIMIT, Cursor, Limit, Text, Time
from inno_notify.api.views.respond import json


@dataclass(frozen=True, slots=True)
class RecommendationFilters:
    since: Annotated[Time | None, Field(description="RFC 3339; of jobs that finished at or after it.")] = None
    team: Text | None = None
    owner: Text | None = None
    cluster: Annotated[
        Text | None, Field(description="Only this cluster's jobs; without it, every cluster's.")
    ] = None
    limit: Limit = DEFAULT_LIMIT
    cursor: Cursor | None = None


async def list_recommendations(request: web.Request, given: RecommendationFilters) -> web.Response:
    page, next_cursor = await request.app[keys.STORE].usage.open_recommendations(
        team=given.team,
        owner=given.owner,
        cluster=given.cluster,
        since=given.since,
        limit=given.limit,
        cursor=given.cursor,
    )
    items = [serialize.job_recommendation(r) for r in page]
    return json(resources.RecommendationPage(items=items, next_cursor=next_cursor))
