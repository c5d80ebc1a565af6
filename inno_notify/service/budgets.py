"""Budgets as they stand: what the API answers, and the alerts the leader sends a team's leads.

Both read the same thing: one pass of the store over the teams' jobs finished in this period and
in the three before it (``usage_queries.spend_cells``), summed per budget by the domain
(``domain.budgets.status_of``). An alert is a pipeline message to the team's leads on their
channels, keyed by team, budget, period and kind: the outbox takes a key once, so the check can
run every few minutes, and on a new leader after a restart, without anyone hearing twice.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from inno_notify.adapters.channels import figures
from inno_notify.adapters.db.repository import Store
from inno_notify.domain.budgets import (
    Alert,
    AlertKind,
    Budget,
    BudgetReport,
    BudgetStatus,
    Period,
    due_alerts,
    spans_of,
    spend_by_model,
    status_of,
)
from inno_notify.domain.costs import Rates
from inno_notify.domain.message_json import MESSAGE_KEY
from inno_notify.domain.messages import PipelineMessage, encode_pipeline
from inno_notify.domain.model import Notification
from inno_notify.service.pausing import rounds
from inno_notify.service.planner import DirectoryPlanner

log = logging.getLogger("inno_notify.budgets")

CHECK_EVERY_SECONDS = 300.0
SENDER = "inno-notify budgets"


class Budgets:
    """The configured budgets over the store's figures."""

    def __init__(
        self,
        store: Store,
        budgets: Sequence[Budget],
        rates: Rates,
        timezone: str,
        clock: Callable[[], datetime],
        cluster: str | None = None,
    ) -> None:
        self.store = store
        self.budgets = tuple(budgets)
        self.rates = rates
        self.zone = ZoneInfo(timezone)
        self.clock = clock
        self.cluster = cluster

    async def reports(self, team: str | None = None, period: Period | None = None) -> list[BudgetReport]:
        """Every budget (of ``team``, of ``period``) as it stands now, with this period's spend by
        GPU model; one store pass per period kind."""
        chosen = [b for b in self.budgets if team in (None, b.team) and period in (None, b.period)]
        now = self.clock()
        reports = []
        for kind in sorted({b.period for b in chosen}):
            spans = spans_of(kind, now, self.zone)
            of_kind = [b for b in chosen if b.period == kind]
            teams = {b.team for b in of_kind}
            cells = await self.store.usage.spend_cells(teams, spans.windows(), self.cluster)
            for budget in of_kind:
                status = status_of(budget, spans, cells, self.rates)
                reports.append(BudgetReport(status, spend_by_model(budget, cells, self.rates)))
        return reports

    async def alert(self, planner: DirectoryPlanner) -> int:
        """Enqueues every alert due now; returns how many rows the outbox took (0 for alerts
        already sent this period)."""
        now = self.clock()
        alerts = due_alerts(r.status for r in await self.reports())
        rows: list[Notification] = []
        for alert in alerts:
            message = PipelineMessage(
                key=alert.key, title=title(alert), text=text(alert), sender=SENDER, created_at=now
            )
            plan = await planner.to_leads(
                alert.status.budget.team, alert.key, {MESSAGE_KEY: encode_pipeline(message)}, now
            )
            if not plan.notifications:
                why = plan.silent_reason or "no channel"
                log.warning("budget alert %s reaches nobody: %s", alert.key, why)
                continue
            rows += plan.notifications
        return await self.store.outbox.enqueue(rows) if rows else 0

    async def run(self, planner: DirectoryPlanner, stop: asyncio.Event) -> None:
        """Checks every ``CHECK_EVERY_SECONDS`` until ``stop``; a failed check is logged and tried
        again next time (nothing is half-sent: a check's rows are enqueued in one statement)."""

        async def check() -> float:
            await self.alert(planner)
            return CHECK_EVERY_SECONDS

        await rounds(check, stop, log=log, what="budget check", retry_seconds=CHECK_EVERY_SECONDS)


def _amount(status: BudgetStatus, value: float) -> str:
    if status.budget.unit == "gpu_hours":
        return f"{figures.number(value)} GPU-hours"
    return f"{figures.number(value)} {status.currency or ''}".rstrip()


def _period_name(status: BudgetStatus) -> str:
    start = status.start
    if status.budget.period is Period.MONTH:
        return start.strftime("%B %Y")
    return f"the week of {start:%d %b %Y}"


def title(alert: Alert) -> str:
    status, budget = alert.status, alert.status.budget
    model = f" ({budget.gpu_model})" if budget.gpu_model else ""
    if alert.kind is AlertKind.FORECAST:
        return f"Budget: {budget.team}{model} is on course to pass its budget for {_period_name(status)}"
    share = "80 %" if alert.kind is AlertKind.SPENT_80 else "100 %"
    return f"Budget: {budget.team}{model} has spent {share} of its budget for {_period_name(status)}"


def text(alert: Alert) -> str:
    status, budget = alert.status, alert.status.budget
    spent = status.spent or 0.0
    lines = [
        f"Spent so far: {_amount(status, spent)} of {_amount(status, budget.allowance)} "
        f"({figures.number(100 * spent / budget.allowance)} %)."
    ]
    if status.forecast is not None:
        forecast = _amount(status, status.forecast)
        last_day = status.end - timedelta(seconds=1)
        lines.append(f"Forecast for the period's end ({last_day:%d %b}): {forecast}.")
    return "\n".join(lines)
