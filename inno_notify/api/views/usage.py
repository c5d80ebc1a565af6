"""GET /api/v1/usage: usage per team, owner or namespace, as JSON or CSV (capacity planning)."""

from __future__ import annotations

import csv
import io
from typing import Any

from aiohttp import web

from inno_notify.adapters.db.usage_queries import GroupBy, UsageGroup
from inno_notify.api import keys, params, serialize
from inno_notify.api.errors import ApiError
from inno_notify.api.negotiate import preferred
from inno_notify.api.views.respond import json

PARAMS = ("group_by", "since", "until")
FORMATS = ("application/json", "text/csv")
# A cell starting with one of these is a formula to a spreadsheet; owners and namespaces come from
# cluster objects, so a crafted annotation must not run in an admin's spreadsheet.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


async def usage(request: web.Request) -> web.Response:
    query = request.query
    params.check_known(query, PARAMS)
    group_by = params.choice(query, "group_by", GroupBy) or GroupBy.TEAM
    since, until = params.time_range(query)
    media = preferred(request.headers.get("Accept"), FORMATS)
    if media is None:
        raise ApiError(406, "not_acceptable", f"usage is available as {' or '.join(FORMATS)}")
    store = request.app[keys.STORE]

    async def compute() -> list[UsageGroup]:
        return await store.usage_by_group(group_by, since, until)

    cached = await request.app[keys.USAGE_CACHE].get((group_by, since, until), compute)
    groups: list[UsageGroup] = cached.value
    rows = [serialize.usage_group(g) for g in groups]
    if media == "text/csv":
        return _csv(rows, group_by)
    return json(
        {
            "group_by": group_by.value,
            "since": since,
            "until": until,
            "computed_at": cached.computed_at,
            "groups": rows,
        }
    )


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def _csv(rows: list[dict[str, Any]], group_by: GroupBy) -> web.Response:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow([group_by.value if f == "group" else f for f in serialize.USAGE_FIELDS])
    for row in rows:
        writer.writerow([_cell(row[f]) for f in serialize.USAGE_FIELDS])
    return web.Response(
        text=out.getvalue(),
        content_type="text/csv",
        charset="utf-8",
        headers={"Content-Disposition": f'attachment; filename="usage-by-{group_by.value}.csv"'},
    )
