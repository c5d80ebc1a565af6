"""A team's budget for a month or a week: spend so far, where the period will end, and the alerts due.

``Budget`` *is* an entry of the ``budgets`` configuration list (pydantic validates its fields and
runs ``__post_init__``). A budget is counted in GPU-hours (``gpu_hours``) or in money (``amount``,
in ``accounting.rates.currency``), optionally for the GPU models a glob matches.

Periods begin at local midnight in ``digest.timezone``: a month on its first day, a week on Monday.
The forecast for the period's end:

- none before ``MIN_ELAPSED`` of the period has passed: three days of a month say too little, and
  an alert built on them would be noise;
- with earlier periods that spent anything: spend so far divided by the share of their total those
  periods had spent by the same point of their own period (their mean share) — a team that spends
  most at the end of a month (deadlines) is not forecast as if it spent evenly;
- else: spend so far carried on at its rate (spend / elapsed share).

Alerts (``due_alerts``): once per period and kind, when actual spend reaches 80 % and 100 % of the
budget and when the forecast first exceeds it. Each alert's ``key`` names the team, the budget,
the period and the kind; the outbox refuses a key it has seen, so a restart sends nothing again.

Pure: the period's figures come in, with ``now``; nothing here reads a clock or the store.
"""

from __future__ import annotations

import enum
import fnmatch
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal
from zoneinfo import ZoneInfo

MIN_ELAPSED = 0.1
WARN_SHARE = 0.8
Period = Literal["month", "week"]


@dataclass(frozen=True, slots=True)
class Budget:
    """A team's allowance for each month or week."""

    team: str
    """The directory team (`directory.teams[].name`) whose jobs count."""

    period: Period = "month"
    """month or week, starting at local midnight in `digest.timezone` (weeks on Monday)."""

    gpu_hours: float | None = None
    """The allowance in GPU-hours held (GPU-equivalents × hours); give this or `amount`."""

    amount: float | None = None
    """The allowance in money, in `accounting.rates.currency`; give this or `gpu_hours`."""

    gpu_model: str | None = None
    """Only GPU-hours of the models this glob matches count (case-insensitive), e.g. "*H100*"."""

    def __post_init__(self) -> None:
        if not self.team.strip():
            raise ValueError("team: must name a directory team")
        if (self.gpu_hours is None) == (self.amount is None):
            raise ValueError("give exactly one of gpu_hours and amount")
        allowance = self.allowance
        if not (math.isfinite(allowance) and allowance > 0):
            raise ValueError(f"{self.unit}: must be a finite number > 0, not {allowance!r}")

    @property
    def unit(self) -> Literal["gpu_hours", "amount"]:
        return "gpu_hours" if self.gpu_hours is not None else "amount"

    @property
    def allowance(self) -> float:
        value = self.gpu_hours if self.gpu_hours is not None else self.amount
        assert value is not None  # __post_init__
        return value

    @property
    def name(self) -> str:
        """The budget's name in alerts' keys and the API: team, period, and the model glob if any."""
        return f"{self.team}/{self.period}" + (f"/{self.gpu_model}" if self.gpu_model else "")

    def counts(self, gpu_model: str | None) -> bool:
        """Whether the GPU-hours of ``gpu_model`` count against this budget."""
        if self.gpu_model is None:
            return True
        return fnmatch.fnmatchcase((gpu_model or "").casefold(), self.gpu_model.casefold())


def period_bounds(period: Period, at: datetime, zone: ZoneInfo, back: int = 0) -> tuple[datetime, datetime]:
    """The [start, end) of the period holding ``at`` (aware), or of the ``back``-th one before it."""
    local = at.astimezone(zone)
    if period == "week":
        monday = (local - timedelta(days=local.weekday())).date() - timedelta(weeks=back)
        start = datetime(monday.year, monday.month, monday.day, tzinfo=zone)
        end_day = monday + timedelta(weeks=1)
        return start, datetime(end_day.year, end_day.month, end_day.day, tzinfo=zone)
    months = local.year * 12 + local.month - 1 - back
    start = datetime(months // 12, months % 12 + 1, 1, tzinfo=zone)
    return start, datetime((months + 1) // 12, (months + 1) % 12 + 1, 1, tzinfo=zone)


def elapsed_share(start: datetime, end: datetime, now: datetime) -> float:
    """How much of [start, end) has passed at ``now``, in [0, 1]."""
    total = (end - start).total_seconds()
    return min(1.0, max(0.0, (now - start).total_seconds() / total)) if total > 0 else 1.0


@dataclass(frozen=True, slots=True)
class EarlierPeriod:
    """An earlier period's spend: by the same share of it as has now passed, and in all."""

    by_same_point: float
    total: float


def forecast(spent: float, elapsed: float, earlier: Sequence[EarlierPeriod] = ()) -> float | None:
    """The spend at the period's end (module docstring); None before ``MIN_ELAPSED``."""
    if elapsed >= 1.0:
        return spent
    if elapsed < MIN_ELAPSED:
        return None
    shares = [p.by_same_point / p.total for p in earlier if p.total > 0]
    share = sum(shares) / len(shares) if shares else 0.0
    if share > 0:
        # The shape of earlier periods, but never below what has already been spent.
        return max(spent, spent / share)
    return spent / elapsed


class AlertKind(enum.StrEnum):
    FORECAST = "forecast"  # the forecast for the period's end exceeds the budget
    SPENT_80 = "spent_80"  # actual spend reached 80 %
    SPENT_100 = "spent_100"  # actual spend reached 100 %


@dataclass(frozen=True, slots=True)
class BudgetStatus:
    """One budget in one period: what the API answers and the alerts are made from."""

    budget: Budget
    start: datetime
    end: datetime
    spent: float | None
    """GPU-hours or money spent so far; None where a money budget's spend could not be priced."""
    forecast: float | None
    currency: str | None

    @property
    def share(self) -> float | None:
        return None if self.spent is None else self.spent / self.budget.allowance


@dataclass(frozen=True, slots=True)
class Alert:
    kind: AlertKind
    status: BudgetStatus
    key: str


def alert_key(status: BudgetStatus, kind: AlertKind) -> str:
    return f"budget:{status.budget.name}:{status.start.date().isoformat()}:{kind.value}"


def due_alerts(statuses: Iterable[BudgetStatus]) -> list[Alert]:
    """Every alert the statuses call for (the outbox drops those already sent this period, by key).

    At 100 % of actual spend the 80 % alert is due too: a team that jumps past both in one day
    gets both, each once, rather than a 100 % alert that reads as the first word."""
    alerts = []
    for status in statuses:
        due = []
        share = status.share
        if share is not None and share >= WARN_SHARE:
            due.append(AlertKind.SPENT_80)
        if share is not None and share >= 1.0:
            due.append(AlertKind.SPENT_100)
        if status.forecast is not None and status.forecast > status.budget.allowance:
            due.append(AlertKind.FORECAST)
        alerts += [Alert(kind, status, alert_key(status, kind)) for kind in due]
    return alerts
