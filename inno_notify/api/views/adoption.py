"""GET /api/v1/adoption: whether new runs followed their family's advice and what it freed, as
JSON or CSV (one row per team and owner).

The store groups the judged runs (adapters/db/adoption.py) by team, owner and outcome in SQL;
the sums per group and the total are domain.adoption's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, cast

from aiohttp import web
from pydantic import Field

from inno_notify.adapters.db.adoption import AdoptionGroup
from inno_notify.api import keys, resources
from inno_notify.api.params import Later, Text, Time
from inno_notify.api.views.respond import JSON_OR_CSV, csv_download, csv_table, json, negotiated
from inno_notify.domain.adoption import AdoptionTally, adoption_to_dict, combine

# The CSV's columns: the group resource's fields, team and owner first.
CSV_COLUMNS = ("team", "owner", *resources.AdoptionFigures.__annotations__)


@dataclass(frozen=True, slots=True)
class AdoptionWindow:
    team: Text | None = None
    since: Annotated[Time | None, Field(description="RFC 3339; new runs that finished at or after it.")] = (
        None
    )
    until: Annotated[
        Time | None, Field(description="RFC 3339; new runs that finished before it."), Later("since")
    ] = None


def _figures(t: AdoptionTally) -> resources.AdoptionFigures:
    # The resource's keys are the tally's fields, as the digest's `adoption` has them.
    return cast(resources.AdoptionFigures, adoption_to_dict(t))


def _group(g: AdoptionGroup) -> resources.AdoptionGroup:
    return {"team": g.team, "owner": g.owner, **_figures(g.tally)}


async def adoption(request: web.Request, given: AdoptionWindow) -> web.Response:
    media = negotiated(request, JSON_OR_CSV, "adoption is available")
    found = await request.app[keys.STORE].adoption.groups(
        team=given.team, since=given.since, until=given.until
    )
    groups = [_group(g) for g in found]
    if media == "text/csv":
        return csv_download(_csv(groups), "adoption.csv")
    return json(
        resources.AdoptionReport(
            team=given.team,
            since=given.since,
            until=given.until,
            total=_figures(combine([g.tally for g in found])),
            groups=groups,
        )
    )


def _csv(rows: list[resources.AdoptionGroup]) -> bytes:
    values: list[dict[str, Any]] = [dict(row) for row in rows]
    return csv_table(CSV_COLUMNS, ([v[c] for c in CSV_COLUMNS] for v in values))
