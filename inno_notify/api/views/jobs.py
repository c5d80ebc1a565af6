"""GET /api/v1/jobs (filtered, keyset-paginated) and GET /api/v1/jobs/{namespace}/{name}."""

from __future__ import annotations

from aiohttp import web

from inno_notify.adapters.db import JobFilter, Store
from inno_notify.api import keys, params, serialize
from inno_notify.api.errors import not_found
from inno_notify.api.views.respond import json
from inno_notify.domain.model import JobRecord, JobStatus

LIST_PARAMS = ("namespace", "owner", "team", "status", "since", "until", "limit", "cursor")


async def _resources(store: Store, records: list[JobRecord]) -> list[dict[str, object]]:
    if not records:
        return []
    job_keys = [(j.cluster, j.uid) for j in records]
    usage, recs = await store.job_details(job_keys)
    return [
        serialize.job(j, usage.get((j.cluster, j.uid)), recs.get((j.cluster, j.uid), [])) for j in records
    ]


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
    page, usage, recs, next_cursor = await store.list_jobs_with_details(
        filters, params.limit(query), params.cursor(query)
    )
    items = [serialize.job(j, usage.get((j.cluster, j.uid)), recs.get((j.cluster, j.uid), [])) for j in page]
    return json({"items": items, "next_cursor": next_cursor})


async def get_job(request: web.Request) -> web.Response:
    params.check_known(request.query, ("uid",))
    namespace = params.path_text(request.match_info, "namespace")
    name = params.path_text(request.match_info, "name")
    uid = params.text(request.query, "uid")
    store = request.app[keys.STORE]
    record = await store.find_job(namespace, name, uid)
    if record is None:
        which = f" with uid {uid}" if uid else ""
        raise not_found(f"no job {namespace}/{name}{which}", code="job_not_found")
    (resource,) = await _resources(store, [record])
    return json(resource)
