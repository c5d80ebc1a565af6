"""GET /api/v1/usage: usage per team, owner or namespace, as JSON or CSV (capacity planning).

The store sums every finished job of the window per (team, owner, namespace) once; the three
groupings are sums of those cells. The usage cache keeps the cells per window, and each cached
report remembers the bodies it has encoded, so a repeated request costs a dictionary lookup rather
than a regrouping and re-encoding.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated

from aiohttp import web
from pydantic import Field

from inno_notify.adapters.db import Store
from inno_notify.adapters.db.usage_queries import GroupBy, UsageCell, group_cells
from inno_notify.api import keys, resources, serialize
from inno_notify.api.params import Later, Text, Time
from inno_notify.api.views.respond import JSON_OR_CSV, csv_download, csv_table, negotiated

# The CSV's columns: the resource's fields, in order (the first is named after the grouping).
CSV_COLUMNS = tuple(resources.UsageGroup.__annotations__)

# (since, until, cluster): one cached report per window and cluster (None: every cluster).
Window = tuple[datetime | None, datetime | None, str | None]


@dataclass(frozen=True, slots=True)
class UsageWindow:
    group_by: Annotated[GroupBy, Field(description="What to group by.")] = GroupBy.TEAM
    since: Annotated[Time | None, Field(description="RFC 3339; jobs that finished at or after it.")] = None
    until: Annotated[
        Time | None, Field(description="RFC 3339; jobs that finished before it."), Later("since")
    ] = None
    cluster: Annotated[
        Text | None, Field(description="Only this cluster's jobs; without it, every cluster's summed.")
    ] = None


class UsageReport:
    """The cells of one window and, once asked for, their encoded bodies per grouping and format."""

    def __init__(self, cells: list[UsageCell]) -> None:
        self.cells = cells
        self.bodies: dict[tuple[GroupBy, str], bytes] = {}


def compute(store: Store, window: Window) -> Callable[[], Awaitable[UsageReport]]:
    """The cache's computation of one window's report."""

    async def run() -> UsageReport:
        return UsageReport(await store.usage.usage_cells(*window))

    return run


async def warm(app: web.Application) -> None:
    """Computes the report of all time (the window dashboards ask for) before anyone waits on it."""
    await app[keys.USAGE_CACHE].get((None, None, None), compute(app[keys.STORE], (None, None, None)))


async def usage(request: web.Request, given: UsageWindow) -> web.Response:
    group_by, since, until = given.group_by, given.since, given.until
    media = negotiated(request, JSON_OR_CSV, "usage is available")
    window = (since, until, given.cluster)
    cached = await request.app[keys.USAGE_CACHE].get(window, compute(request.app[keys.STORE], window))
    report: UsageReport = cached.value
    body = report.bodies.get((group_by, media))
    if body is None:
        groups = group_cells(report.cells, group_by, request.app[keys.RATES])
        rows = [serialize.usage_group(g) for g in groups]
        if media == "text/csv":
            body = _csv(rows, group_by)
        else:
            document = resources.UsageReport(
                group_by=group_by, since=since, until=until, computed_at=cached.computed_at, groups=rows
            )
            body = serialize.dumps(document)
        report.bodies[(group_by, media)] = body
    if media == "text/csv":
        return csv_download(body, f"usage-by-{group_by.value}.csv")
    return web.Response(body=body, content_type="application/json")


def _csv(rows: list[resources.UsageGroup], group_by: GroupBy) -> bytes:
    header = [group_by.value if f == "group" else f for f in CSV_COLUMNS]
    return csv_table(header, ([row[f] for f in CSV_COLUMNS] for row in rows))  # type: ignore[literal-required]
