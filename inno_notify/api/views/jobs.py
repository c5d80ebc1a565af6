"""GET /api/v1/jobs (filtered, keyset-paginated) and GET /api/v1/jobs/{namespace}/{name}.

Both read the store's job rows and turn them straight into the resource (serialize.job_row): the
list is the API's hottest path, and building domain records only to take them apart again cost
most of its CPU time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, cast

from aiohttp import web
from pydantic import Field

from inno_notify.adapters.db import JobFilter
from inno_notify.adapters.db.job_details import JobPage
from inno_notify.api import keys, resources, serialize
from inno_notify.api.errors import not_found
from inno_notify.api.params import DEFAULT_LIMIT, Cursor, Later, Limit, Text, Time
from inno_notify.api.views.respond import json
from inno_notify.domain.costs import Rates
from inno_notify.domain.model import JobStatus, KindName


@dataclass(frozen=True, slots=True)
class JobFilters:
    since: Annotated[
        Time | None,
        Field(description="RFC 3339; only jobs that finished (or, unfinished, were created) at or after it."),
    ] = None
    until: Annotated[
        Time | None,
        Field(description="RFC 3339; only jobs that finished (or were created) before it."),
        Later("since"),
    ] = None
    namespace: Text | None = None
    owner: Text | None = None
    team: Text | None = None
    status: Annotated[JobStatus | None, Field(description="Lifecycle state.")] = None
    kind: Annotated[KindName | None, Field(description="Only runs of this kind (CONTRACT §3a).")] = None
    cluster: Annotated[
        Text | None,
        Field(description="Only this cluster's jobs (its `cluster` setting); without it, every cluster's."),
    ] = None
    limit: Limit = DEFAULT_LIMIT
    cursor: Cursor | None = None


@dataclass(frozen=True, slots=True)
class JobName:
    namespace: Text
    name: Text
    uid: Annotated[Text | None, Field(description="The job's uid, for one older run of that name.")] = None
    cluster: Annotated[
        Text | None, Field(description="The job's cluster, where several clusters run a job of that name.")
    ] = None


def _items(page: JobPage, rates: Rates) -> list[resources.Job]:
    # The store's recommendation dicts carry resources.Recommendation's keys (RECOMMENDATION_FIELDS).
    recommendations = cast("Sequence[list[resources.Recommendation]]", page.recommendations)
    return [serialize.job_row(row, recs, rates) for row, recs in zip(page.rows, recommendations, strict=True)]


async def list_jobs(request: web.Request, given: JobFilters) -> web.Response:
    filters = JobFilter(
        namespace=given.namespace,
        owner=given.owner,
        team=given.team,
        status=given.status,
        since=given.since,
        until=given.until,
        cluster=given.cluster,
        kinds=None if given.kind is None else given.kind.stored,
    )
    page = await request.app[keys.STORE].jobs.job_page(filters, given.limit, given.cursor)
    return json(resources.JobPage(items=_items(page, request.app[keys.RATES]), next_cursor=page.next_cursor))


async def get_job(request: web.Request, given: JobName) -> web.Response:
    page = await request.app[keys.STORE].jobs.find_job_row(
        given.namespace, given.name, given.uid, cluster=given.cluster
    )
    if not page.rows:
        which = f" with uid {given.uid}" if given.uid else ""
        raise not_found(f"no job {given.namespace}/{given.name}{which}", code="job_not_found")
    (resource,) = _items(page, request.app[keys.RATES])
    return json(resource)
