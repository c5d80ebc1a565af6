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

from inno_notify.domain.costs import Held, Rates, cost_of

MIN_ELAPSED = 0.1
WARN_SHARE = 0.8


class Period(enum.StrEnum):
    MONTH = "month"
    WEEK = "week"


@dataclass(frozen=True, slots=True)
class Budget:
    """A team's allowance for each month or week."""

    team: str
    """The directory team (`directory.teams[].name`) whose jobs count."""

    period: Period = Period.MONTH
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
    if period == Period.WEEK:
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
class ModelSpend:
    """This period's GPU-hours and cost of one GPU model, for a budget's team."""

    gpu_model: str | None
    gpu_hours: float | None
    cost: float | None


@dataclass(frozen=True, slots=True)
class BudgetReport:
    """A budget as the API shows it: its status and this period's spend by GPU model."""

    status: BudgetStatus
    by_model: tuple[ModelSpend, ...]


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


@dataclass(frozen=True, slots=True)
class SpendCell:
    """What a team's jobs of one GPU model that finished in one span held (the store sums them)."""

    span: int
    team: str
    held: Held


@dataclass(frozen=True, slots=True)
class Spans:
    """The windows a budget's status is summed over: this period so far (span 0) and, for each of
    ``EARLIER`` periods before it, the part up to the same point of that period and the rest."""

    now: datetime
    current: tuple[datetime, datetime]
    earlier: tuple[tuple[datetime, datetime, datetime], ...]  # (start, same point, end)

    def windows(self) -> list[tuple[datetime, datetime]]:
        """Span i's [start, end): 0 is this period so far, then (by the same point, rest) pairs."""
        out = [(self.current[0], self.now)]
        for start, cut, end in self.earlier:
            out += [(start, cut), (cut, end)]
        return out


EARLIER = 3


def spans_of(period: Period, now: datetime, zone: ZoneInfo, earlier: int = EARLIER) -> Spans:
    start, end = period_bounds(period, now, zone)
    elapsed = elapsed_share(start, end, now)
    before = []
    for back in range(1, earlier + 1):
        b_start, b_end = period_bounds(period, now, zone, back)
        before.append((b_start, b_start + (b_end - b_start) * elapsed, b_end))
    return Spans(now, (start, end), tuple(before))


def _amount(budget: Budget, held: Held, rates: Rates) -> float | None:
    """What ``held`` counts against ``budget``: GPU-hours, or its cost (None: not priced)."""
    if not budget.counts(held.gpu_model):
        return 0.0
    if budget.unit == "gpu_hours":
        return None if held.gpu_minutes is None else held.gpu_minutes / 60.0
    cost = cost_of(held, rates)
    return None if cost is None else cost.amount


def status_of(budget: Budget, spans: Spans, cells: Iterable[SpendCell], rates: Rates) -> BudgetStatus:
    """The budget's spend so far and forecast from the team's cells. Cells whose spend is unknown
    (unmeasured, a GPU model without a price) add nothing: the spend is what could be counted."""
    sums = [0.0] * (1 + 2 * len(spans.earlier))
    counted = uncounted = 0  # this period's cells
    for cell in cells:
        if cell.team != budget.team:
            continue
        amount = _amount(budget, cell.held, rates)
        if amount is not None:
            sums[cell.span] += amount
        if cell.span == 0:
            counted, uncounted = (counted + 1, uncounted) if amount is not None else (counted, uncounted + 1)
    # Spend of which nothing could be counted is unknown, not 0.
    spent = None if uncounted and not counted else sums[0]
    earlier = [
        EarlierPeriod(by_same_point=sums[1 + 2 * i], total=sums[1 + 2 * i] + sums[2 + 2 * i])
        for i in range(len(spans.earlier))
    ]
    start, end = spans.current
    return BudgetStatus(
        budget=budget,
        start=start,
        end=end,
        spent=spent,
        forecast=None if spent is None else forecast(spent, elapsed_share(start, end, spans.now), earlier),
        currency=rates.currency if budget.unit == "amount" else None,
    )


def spend_by_model(budget: Budget, cells: Iterable[SpendCell], rates: Rates) -> tuple[ModelSpend, ...]:
    """This period's GPU-hours and cost of each GPU model the budget counts, for its team."""
    mine = [c for c in cells if c.span == 0 and c.team == budget.team and budget.counts(c.held.gpu_model)]
    by_model = []
    for cell in sorted(mine, key=lambda c: c.held.gpu_model or ""):
        held = cell.held
        cost = cost_of(held, rates)
        hours = None if held.gpu_minutes is None else held.gpu_minutes / 60.0
        by_model.append(ModelSpend(held.gpu_model, hours, None if cost is None else cost.amount))
    return tuple(by_model)
