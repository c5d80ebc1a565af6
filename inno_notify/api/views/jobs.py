"""GET /api/v1/jobs (filtered, keyset-paginated) and GET /api/v1/jobs/{namespace}/{name}.

Both read the store's job rows and turn them straight into the resource (serialize.job_row): the
list is the API's hottest path, and building domain records only to take them apart again cost
most of its CPU time.
"""

from __future__ import annotations

from aiohttp import web

from inno_notify.adapters.db import JobFilter
from inno_notify.adapters.db.job_details import JobPage
from inno_notify.api import keys, params, serialize
from inno_notify.api.errors import not_found
from inno_notify.api.views.respond import json
from inno_notify.domain.model import JobStatus

LIST_PARAMS = ("namespace", "owner", "team", "status", "since", "until", "limit", "cursor")


def _items(page: JobPage) -> list[dict[str, object]]:
    return [serialize.job_row(row, recs) for row, recs in zip(page.rows, page.recommendations, strict=True)]


async def list_jobs(request: web.Request) -> web.Response:
    query = request.query
    params.check_known(query, LIST_PARAMS)
    since, until = params.time_range(query)
    filters = JobFilter(
        namespace=params.text(query, "namespace"),
        owner=params.text(query, "owner"),
        team=params.text(query, "team"),
        status=params.choice(query, "status", JobStatus),
        since=since,
        until=until,
    )
    store = request.app[keys.STORE]
    page = await store.job_page(filters, params.limit(query), params.cursor(query))
    return json({"items": _items(page), "next_cursor": page.next_cursor})


async def get_job(request: web.Request) -> web.Response:
    params.check_known(request.query, ("uid",))
    namespace = params.path_text(request.match_info, "namespace")
    name = params.path_text(request.match_info, "name")
    uid = params.text(request.query, "uid")
    store = request.app[keys.STORE]
    page = await store.find_job_row(namespace, name, uid)
    if not page.rows:
        which = f" with uid {uid}" if uid else ""
        raise not_found(f"no job {namespace}/{name}{which}", code="job_not_found")
    (resource,) = _items(page)
    return json(resource)
