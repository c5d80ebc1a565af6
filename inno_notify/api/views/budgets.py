"""GET /api/v1/budgets: each configured budget as it stands — spend so far, forecast, by GPU model.

The figures come from service.budgets (the same the leads' alerts are made of): one store pass over
the teams' jobs of this period and the three before it. Every budget is computed at once and cached
as one report (fresh for a minute, then refreshed in the background; warmed as the app starts), and
each request takes its team's and period's from it: requests for twenty teams at once wait on one
computation instead of starting twenty, which the cache would have to turn away beyond its limit.
JSON, or CSV with one row per budget and GPU model (a budget with no spend yet has one row with
empty model columns).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, cast

from aiohttp import web
from pydantic import Field

from inno_notify.api import keys, resources
from inno_notify.api.params import Text
from inno_notify.api.views.respond import JSON_OR_CSV, csv_download, csv_table, json, negotiated
from inno_notify.domain.budgets import BudgetReport, Period
from inno_notify.domain.digest import budget_report_to_dict

_BUDGET_COLUMNS = tuple(c for c in resources.Budget.__annotations__ if c != "by_model")
_MODEL_COLUMNS = tuple(resources.ModelSpend.__annotations__)
CSV_COLUMNS = (*_BUDGET_COLUMNS, *(f"model_{c}" if c != "gpu_model" else "model" for c in _MODEL_COLUMNS))


# The budget cache's one key: every budget's report.
ALL_BUDGETS = "all"


async def warm(app: web.Application) -> None:
    """Computes every budget's report before a lead waits on it (none without budgets)."""
    provider = app[keys.BUDGETS]
    if provider is not None:
        await app[keys.BUDGET_CACHE].get(ALL_BUDGETS, provider)


@dataclass(frozen=True, slots=True)
class BudgetQuery:
    team: Annotated[Text | None, Field(description="Only this team's budgets.")] = None
    period: Annotated[Period | None, Field(description="Only monthly or only weekly budgets.")] = None


def budget_resource(report: BudgetReport) -> resources.Budget:
    return cast(resources.Budget, budget_report_to_dict(report, plain=False))


async def budgets(request: web.Request, given: BudgetQuery) -> web.Response:
    media = negotiated(request, JSON_OR_CSV, "budgets are available")
    provider = request.app[keys.BUDGETS]
    reports: list[BudgetReport] = []
    computed_at = request.app[keys.CLOCK]()
    if provider is not None:
        cached = await request.app[keys.BUDGET_CACHE].get(ALL_BUDGETS, provider)
        team, period = given.team, given.period
        reports = [
            r
            for r in cached.value
            if team in (None, r.status.budget.team) and period in (None, r.status.budget.period)
        ]
        computed_at = cached.computed_at
    items = [budget_resource(r) for r in reports]
    if media == "text/csv":
        return csv_download(_csv(items), "budgets.csv")
    return json(resources.BudgetList(items=items, computed_at=computed_at))


def _csv(items: list[resources.Budget]) -> bytes:
    return csv_table(CSV_COLUMNS, (row for item in items for row in _rows(item)))


def _rows(item: resources.Budget) -> list[list[Any]]:
    """One row per GPU model the budget spent on; one with empty model columns when none."""
    head = [item[c] for c in _BUDGET_COLUMNS]  # type: ignore[literal-required]
    models: list[resources.ModelSpend | None] = [*item["by_model"]] or [None]
    return [[*head, *(None if m is None else m[c] for c in _MODEL_COLUMNS)] for m in models]  # type: ignore[literal-required]
