"""The weekly team digest, built from aggregated rows (domain/weeks.py is its calendar).

The database does the summing (adapters/db/digest_queries.py hands over a `DigestRows`); what is
left here is pure: the per-person lines, the five most wasteful jobs, the change against the
previous week, the share of the team's quota, and the short "no GPU jobs" digest.

Conventions, stated once so every figure means the same thing:
- A job belongs to the week (and day, for the chart) in which it finished, in the digest's zone.
- Only GPU jobs count (GPU-equivalents requested > 0); the figures are GPU-hours (GPU-minutes / 60).
- A figure that was not measured for any job of the week is None and named in `missing` with a
  reason, never 0. Sums cover the jobs where the figure was measured; `jobs_unmeasured` says how
  many had no usage at all.
- Idle GPU-hours in running pods and workspaces come from the live check's nudges of the week
  (domain/live.py): per idle stretch of a pod, its idle GPU-equivalents × the time from the stretch's
  start (or the week's, if later) to its last nudge in the week. That is what the nudges saw, a
  lower bound (a pod idling on after its last nudge adds nothing more), counted by the pod's owner.
  A pod nudged at least twice in the week is listed as nudged repeatedly.
- Advice adoption counts the new runs of families that finished in the week (domain.adoption):
  "advice followed in 5 of 8 new runs" counts runs whose previous run was given advice.
- Costs (where `accounting.rates` price GPU-hours, domain/costs.py): the person rows come per
  person *and GPU model* (a job's model is the one that held most of its GPU-minutes), so every
  GPU-hour is priced at its own model's rate — the week's GPU cost by model, and each person's
  idle cost as the sum over their models. Only GPU-hours are priced here (CPU and memory prices,
  where set, count in the API's usage and in budgets): the digest's figures are GPU figures. A
  model no rate matches has no cost (None, never 0), is left out of the sums of costs like the
  API's usage groups leave it out, and is named in a note.
- Budgets: the team's budgets as service.budgets reports them now (their current period, with the
  forecast), handed in: one source of figures for the digest, the API and the alerts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

from inno_notify.domain.adoption import AdoptionPerson, AdoptionTally, adoption_to_dict, combine
from inno_notify.domain.budgets import BudgetReport
from inno_notify.domain.costs import Held, Rates, cost_of
from inno_notify.domain.trends import TrendPoint, efficiency_of, quota_share_of, to_hours
from inno_notify.domain.weeks import week_bounds, week_monday

TOP_WASTE = 5
TOP_NUDGED = 10
TOP_IDLE_COST = 5
NO_OWNER = "(no owner)"
NO_MODEL = "(model not measured)"


# --- what the database hands over -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TeamTotals:
    """Sums over a team's GPU jobs that finished in one week; None where nothing was measured."""

    jobs: int = 0
    # Jobs without a usage record or whose GPU-minutes are null.
    jobs_unmeasured: int = 0
    succeeded: int = 0
    failed: int = 0
    oom: int = 0
    gpu_minutes: float | None = None
    used_gpu_minutes: float | None = None
    # GPU-minutes held by the jobs whose used GPU-minutes are known: efficiency's denominator, so
    # that a MIG job without a utilization metric does not count as idle.
    used_basis_gpu_minutes: float | None = None
    idle_gpu_minutes: float | None = None
    # GiB × hours held, over the jobs where both the memory request and the peak are known.
    memory_requested_gib_hours: float | None = None
    memory_peak_gib_hours: float | None = None


@dataclass(frozen=True, slots=True)
class PersonRow:
    """One person's jobs of the week of one GPU model (the store groups by both, so that costs are
    priced per model); build_digest sums a person's rows."""

    owner: str | None
    jobs: int
    gpu_minutes: float | None
    used_gpu_minutes: float | None
    idle_gpu_minutes: float | None
    # As TeamTotals.used_basis_gpu_minutes; None: the same as gpu_minutes.
    used_basis_gpu_minutes: float | None = None
    gpu_model: str | None = None


@dataclass(frozen=True, slots=True)
class DailyRow:
    """One person's GPU-minutes of the jobs that finished on local day `day` (0 = Monday)."""

    owner: str | None
    day: int
    gpu_minutes: float
    used_gpu_minutes: float | None


@dataclass(frozen=True, slots=True)
class WasteRow:
    """A job and its largest recommendation by wasted GPU-minutes."""

    cluster: str
    uid: str
    namespace: str
    name: str
    owner: str | None
    waste_gpu_minutes: float
    kind: str
    severity: str
    message: str


@dataclass(frozen=True, slots=True)
class NudgedPod:
    """A pod nudged about idle GPUs, as the digest names it: what a nudge about it and the week's
    row of all its nudges both carry. Its fields come first in both (the nudge ledger stores an
    entry as a plain array of its fields in order)."""

    cluster: str
    pod_uid: str
    namespace: str
    pod: str
    kind: str
    owner: str | None


@dataclass(frozen=True, slots=True)
class NudgedPodRow(NudgedPod):
    """A pod of the team nudged about idle GPUs in the week, with what its nudges saw (see above)."""

    nudges: int
    idle_gpu_hours: float


@dataclass(frozen=True, slots=True)
class NudgeEntry(NudgedPod):
    """One idle nudge about one pod, as kept for its team's digest (times in Unix seconds)."""

    observed_at: float
    idle_since: float
    idle_gpu_equivalents: float


def nudged_pod_rows(
    entries: Sequence[NudgeEntry], start: datetime, end: datetime
) -> tuple[NudgedPodRow, ...]:
    """Per pod nudged in [start, end): its nudges, and its idle GPU-hours within the week — per idle
    stretch (its `idle_since`), the stretch's GPU-equivalents × the time from its start (or the
    week's, if later) to its last nudge in the week."""
    low, high = start.timestamp(), end.timestamp()
    per_pod: dict[tuple[str, str], list[NudgeEntry]] = {}
    for entry in entries:
        if low <= entry.observed_at < high:
            per_pod.setdefault((entry.cluster, entry.pod_uid), []).append(entry)
    rows = []
    for (cluster, pod_uid), found in sorted(per_pod.items()):
        stretches: dict[float, tuple[float, float]] = {}
        for e in found:
            last, gpus = stretches.get(e.idle_since, (e.observed_at, e.idle_gpu_equivalents))
            stretches[e.idle_since] = (max(last, e.observed_at), max(gpus, e.idle_gpu_equivalents))
        hours = sum(
            gpus * max(0.0, last - max(since, low)) / 3600 for since, (last, gpus) in stretches.items()
        )
        latest = max(found, key=lambda e: e.observed_at)
        rows.append(
            NudgedPodRow(
                cluster=cluster,
                pod_uid=pod_uid,
                namespace=latest.namespace,
                pod=latest.pod,
                kind=latest.kind,
                owner=latest.owner,
                nudges=len({e.observed_at for e in found}),
                idle_gpu_hours=hours,
            )
        )
    return tuple(rows)


@dataclass(frozen=True, slots=True)
class DigestRows:
    """Everything the SQL aggregation returns for one team and week."""

    totals: TeamTotals
    people: tuple[PersonRow, ...] = ()
    daily: tuple[DailyRow, ...] = ()
    # The jobs whose largest recommendation wastes the most, best first or not: more than TOP_WASTE
    # where several tie at the last place, so that build_digest breaks the tie by namespace and name.
    top_waste: tuple[WasteRow, ...] = ()
    # Either already computed in the database (Postgres percentile_cont) ...
    queue_p50_seconds: float | None = None
    queue_p95_seconds: float | None = None
    # ... or the sorted queue waits, for a dialect without percentile functions (SQLite).
    queue_seconds_sorted: tuple[float, ...] | None = None
    # The previous week's totals, where they were fetched along.
    previous: TeamTotals | None = None
    # The team's pods nudged about idle GPUs during the week.
    nudged: tuple[NudgedPodRow, ...] = ()
    # Whether the week's new runs of families followed their previous runs' advice, per person.
    adoption: tuple[AdoptionPerson, ...] = ()


# --- the digest -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Missing:
    figure: str
    reason: str


@dataclass(frozen=True, slots=True)
class PersonLine:
    owner: str
    jobs: int
    gpu_hours: float | None
    used_gpu_hours: float | None
    idle_gpu_hours: float | None
    efficiency: float | None


@dataclass(frozen=True, slots=True)
class WasteLine:
    namespace: str
    name: str
    uid: str
    owner: str
    waste_gpu_hours: float
    kind: str
    severity: str
    recommendation: str


@dataclass(frozen=True, slots=True)
class LiveIdleLine:
    """One person's idle GPU-hours in running pods and workspaces, as the week's nudges saw them."""

    owner: str
    pods: int
    nudges: int
    idle_gpu_hours: float


@dataclass(frozen=True, slots=True)
class NudgedPodLine:
    namespace: str
    pod: str
    kind: str
    owner: str
    nudges: int
    idle_gpu_hours: float


@dataclass(frozen=True, slots=True)
class ModelLine:
    """The week's GPU-hours of one GPU model and their cost (None: no rate matches the model)."""

    gpu_model: str
    jobs: int
    gpu_hours: float | None
    idle_gpu_hours: float | None
    cost: float | None
    idle_cost: float | None


@dataclass(frozen=True, slots=True)
class IdleCostLine:
    """A person's idle GPU-hours of the week and what they cost, priced per GPU model."""

    owner: str
    idle_gpu_hours: float
    idle_cost: float


@dataclass(frozen=True, slots=True)
class Change:
    """This week against the previous one; `delta` and `percent` are None where either is unknown."""

    previous: float | None
    delta: float | None
    percent: float | None


@dataclass(frozen=True, slots=True)
class PersonSeries:
    """One person's daily GPU-hours for the chart (seven local days, Monday first)."""

    owner: str
    held: tuple[float, ...]
    used: tuple[float | None, ...]


@dataclass(frozen=True, slots=True)
class Digest:
    team: str
    week: str
    timezone: str
    start: datetime
    end: datetime
    no_gpu_jobs: bool
    jobs: int
    jobs_unmeasured: int
    succeeded: int
    failed: int
    oom: int
    gpu_hours: float | None
    used_gpu_hours: float | None
    idle_gpu_hours: float | None
    efficiency: float | None
    memory_requested_gib_hours: float | None
    memory_peak_gib_hours: float | None
    queue_p50_seconds: float | None
    queue_p95_seconds: float | None
    people: tuple[PersonLine, ...]
    top_waste: tuple[WasteLine, ...]
    days: tuple[date, ...]
    daily: tuple[PersonSeries, ...]
    change_gpu_hours: Change
    change_efficiency: Change
    change_idle_gpu_hours: Change
    quota_gpus: float | None
    quota_share: float | None
    missing: tuple[Missing, ...] = field(default=())
    # Idle GPUs in running pods and workspaces (the week's nudges): by person, largest first, and
    # the pods nudged at least twice.
    live_idle: tuple[LiveIdleLine, ...] = ()
    nudged_repeatedly: tuple[NudgedPodLine, ...] = ()
    # Advice adoption of the week's new runs (domain.adoption): the team's, and per person with
    # advice to follow, most advised runs first.
    adoption: AdoptionTally = field(default_factory=AdoptionTally)
    adoption_people: tuple[AdoptionPerson, ...] = ()
    # The team's weekly trend ending with this week, oldest first (domain/trends.py).
    trend: tuple[TrendPoint, ...] = ()
    # Costs (module docstring), where accounting.rates price GPU-hours; currency None: no prices.
    currency: str | None = None
    cost: float | None = None
    idle_cost: float | None = None
    by_model: tuple[ModelLine, ...] = ()
    top_idle_cost: tuple[IdleCostLine, ...] = ()
    # The team's budgets in their current period (service.budgets), with their forecasts.
    budgets: tuple[BudgetReport, ...] = ()

    @property
    def live_idle_gpu_hours(self) -> float | None:
        """The sum of `live_idle`; None when no pod of the team was nudged in the week."""
        return sum(line.idle_gpu_hours for line in self.live_idle) if self.live_idle else None

    @property
    def week_hours(self) -> float:
        """167, 168 or 169: the length of the local week."""
        return (self.end - self.start).total_seconds() / 3600


def percentile(sorted_values: Sequence[float], fraction: float) -> float | None:
    """Linear interpolation between closest ranks: what Postgres' percentile_cont computes."""
    if not sorted_values:
        return None
    position = fraction * (len(sorted_values) - 1)
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


def change(current: float | None, previous: float | None) -> Change:
    if current is None or previous is None:
        return Change(previous, None, None)
    delta = current - previous
    percent = None if previous == 0 else 100 * delta / previous
    return Change(previous, delta, percent)


def build_digest(
    team: str,
    week: str,
    tz: str,
    rows: DigestRows,
    previous: TeamTotals | None = None,
    *,
    quota_gpus: float | None = None,
    trend: Sequence[TrendPoint] = (),
    rates: Rates | None = None,
    budgets: Sequence[BudgetReport] = (),
) -> Digest:
    """The digest of `team` for `week` in zone `tz` from the aggregated rows of that week.

    `previous` is the previous week's totals (None: not looked up); `quota_gpus` the nominal GPU
    quota of the team's Kueue ClusterQueue, where known; `rates` the prices of GPU-hours
    (accounting.rates; None or unpriced: no costs); `budgets` the team's budgets as they stand.
    """
    start, end = week_bounds(week, tz)
    monday = week_monday(week)
    t = rows.totals
    missing: list[Missing] = []
    gpu_hours = to_hours(t.gpu_minutes)
    used = to_hours(t.used_gpu_minutes)
    idle = to_hours(t.idle_gpu_minutes)
    if t.jobs:
        for name, value in (
            ("gpu_hours", gpu_hours),
            ("used_gpu_hours", used),
            ("idle_gpu_hours", idle),
            ("memory_gib_hours", t.memory_requested_gib_hours),
        ):
            if value is None:
                missing.append(Missing(name, "not measured for any job of the week"))
    p50, p95 = rows.queue_p50_seconds, rows.queue_p95_seconds
    if rows.queue_seconds_sorted is not None:
        p50 = percentile(rows.queue_seconds_sorted, 0.5)
        p95 = percentile(rows.queue_seconds_sorted, 0.95)
    if t.jobs and p50 is None:
        missing.append(Missing("queue_wait", "no job of the week has a scheduling time"))
    if quota_gpus is None:
        missing.append(Missing("quota_share", "no Kueue quota known for the team"))
    prev_gpu = to_hours(previous.gpu_minutes) if previous else None
    prev_eff = efficiency_of(previous) if previous else None
    prev_idle = to_hours(previous.idle_gpu_minutes) if previous else None
    efficiency = efficiency_of(t)
    people = _people(rows.people)
    costs = _costs(rows.people, rates)
    if costs.unpriced:
        models = ", ".join(costs.unpriced)
        missing.append(Missing("cost", f"no rate in accounting.rates matches {models}: not priced"))
    return Digest(
        team=team,
        week=week,
        timezone=tz,
        start=start,
        end=end,
        no_gpu_jobs=t.jobs == 0,
        jobs=t.jobs,
        jobs_unmeasured=t.jobs_unmeasured,
        succeeded=t.succeeded,
        failed=t.failed,
        oom=t.oom,
        gpu_hours=gpu_hours,
        used_gpu_hours=used,
        idle_gpu_hours=idle,
        efficiency=efficiency,
        memory_requested_gib_hours=t.memory_requested_gib_hours,
        memory_peak_gib_hours=t.memory_peak_gib_hours,
        queue_p50_seconds=p50,
        queue_p95_seconds=p95,
        people=people,
        top_waste=_top_waste(rows.top_waste),
        days=tuple(monday + timedelta(days=i) for i in range(7)),
        daily=_series(rows.daily, [p.owner for p in people]),
        change_gpu_hours=change(gpu_hours, prev_gpu),
        change_efficiency=change(efficiency, prev_eff),
        change_idle_gpu_hours=change(idle, prev_idle),
        quota_gpus=quota_gpus,
        quota_share=quota_share_of(gpu_hours, quota_gpus, start, end),
        missing=tuple(missing),
        live_idle=_live_idle(rows.nudged),
        nudged_repeatedly=_nudged_repeatedly(rows.nudged),
        adoption=combine([p.tally for p in rows.adoption]),
        adoption_people=_adoption_people(rows.adoption),
        trend=tuple(trend),
        currency=costs.currency,
        cost=costs.cost,
        idle_cost=costs.idle_cost,
        by_model=costs.by_model,
        top_idle_cost=costs.top_idle_cost,
        budgets=tuple(budgets),
    )


@dataclass(frozen=True, slots=True)
class _Costs:
    currency: str | None = None
    cost: float | None = None
    idle_cost: float | None = None
    by_model: tuple[ModelLine, ...] = ()
    top_idle_cost: tuple[IdleCostLine, ...] = ()
    # The models with GPU-hours no rate matches (NO_MODEL for the unmeasured).
    unpriced: tuple[str, ...] = ()


def gpu_rates(rates: Rates | None) -> Rates | None:
    """The GPU-hour prices alone (the digest prices GPU figures only); None where none is set."""
    if rates is None or not rates.gpu_hour or rates.currency is None:
        return None
    return Rates(currency=rates.currency, gpu_hour=rates.gpu_hour)


def _known_sum(values: Sequence[float | None]) -> float | None:
    """The sum of the known values; None when none is known (as SQL's sum)."""
    known = [v for v in values if v is not None]
    return math.fsum(known) if known else None


def _costs(rows: Sequence[PersonRow], rates: Rates | None) -> _Costs:
    """The week's GPU cost by model and idle cost by person, each row priced at its model's rate."""
    priced_at = gpu_rates(rates)
    if priced_at is None or not rows:
        return _Costs(currency=None if priced_at is None else priced_at.currency)
    per_model: dict[str | None, list[PersonRow]] = {}
    idle_per_owner: dict[str, list[tuple[float | None, float | None]]] = {}
    for row in rows:
        if row.gpu_minutes is None:
            continue  # nothing measured: counted in jobs_unmeasured, nothing to price
        per_model.setdefault(row.gpu_model, []).append(row)
        cost = cost_of(Held(row.gpu_model, row.gpu_minutes, row.idle_gpu_minutes), priced_at)
        idle = None if cost is None else cost.idle
        idle_per_owner.setdefault(row.owner or NO_OWNER, []).append((row.idle_gpu_minutes, idle))
    lines = []
    unpriced = []
    for model, model_rows in per_model.items():
        held = Held(
            model,
            _known_sum([r.gpu_minutes for r in model_rows]),
            _known_sum([r.idle_gpu_minutes for r in model_rows]),
        )
        cost = cost_of(held, priced_at)
        amount, idle = (None, None) if cost is None else (cost.amount, cost.idle)
        if amount is None and held.gpu_minutes:
            unpriced.append(model or NO_MODEL)
        lines.append(
            ModelLine(
                gpu_model=model or NO_MODEL,
                jobs=sum(r.jobs for r in model_rows),
                gpu_hours=to_hours(held.gpu_minutes),
                idle_gpu_hours=to_hours(held.idle_gpu_minutes),
                cost=amount,
                idle_cost=idle,
            )
        )
    # Most expensive first; unpriced models after them, by GPU-hours; then by name.
    lines.sort(key=lambda m: (m.cost is None, -(m.cost or 0.0), -(m.gpu_hours or 0.0), m.gpu_model))
    top = []
    for owner, parts in idle_per_owner.items():
        idle_cost = _known_sum([cost for _, cost in parts])
        if idle_cost is not None and idle_cost > 0:
            minutes = _known_sum([m for m, cost in parts if cost is not None]) or 0.0
            top.append(IdleCostLine(owner, minutes / 60, idle_cost))
    top.sort(key=lambda line: (-line.idle_cost, line.owner))
    return _Costs(
        currency=priced_at.currency,
        cost=_known_sum([m.cost for m in lines]),
        idle_cost=_known_sum([m.idle_cost for m in lines]),
        by_model=tuple(lines),
        top_idle_cost=tuple(top[:TOP_IDLE_COST]),
        unpriced=tuple(sorted(unpriced)),
    )


def _adoption_people(rows: Sequence[AdoptionPerson]) -> tuple[AdoptionPerson, ...]:
    per_owner: dict[str, list[AdoptionTally]] = {}
    for row in rows:
        per_owner.setdefault(row.owner or NO_OWNER, []).append(row.tally)
    people = [AdoptionPerson(owner, combine(tallies)) for owner, tallies in per_owner.items()]
    people = [p for p in people if p.tally.advised]
    people.sort(key=lambda p: (-p.tally.advised, -(p.tally.gpu_hours_freed or 0.0), p.owner or ""))
    return tuple(people)


def _live_idle(rows: Sequence[NudgedPodRow]) -> tuple[LiveIdleLine, ...]:
    per_owner: dict[str, list[NudgedPodRow]] = {}
    for row in rows:
        per_owner.setdefault(row.owner or NO_OWNER, []).append(row)
    lines = [
        LiveIdleLine(
            owner=owner,
            pods=len({(r.cluster, r.pod_uid) for r in pods}),
            nudges=sum(r.nudges for r in pods),
            idle_gpu_hours=sum(r.idle_gpu_hours for r in pods),
        )
        for owner, pods in per_owner.items()
    ]
    lines.sort(key=lambda line: (-line.idle_gpu_hours, line.owner))
    return tuple(lines)


def _nudged_repeatedly(rows: Sequence[NudgedPodRow]) -> tuple[NudgedPodLine, ...]:
    repeated = sorted(
        (r for r in rows if r.nudges >= 2),
        key=lambda r: (-r.nudges, -r.idle_gpu_hours, r.namespace, r.pod, r.pod_uid),
    )
    return tuple(
        NudgedPodLine(r.namespace, r.pod, r.kind, r.owner or NO_OWNER, r.nudges, r.idle_gpu_hours)
        for r in repeated[:TOP_NUDGED]
    )


def _per_person(rows: Sequence[PersonRow]) -> list[PersonRow]:
    """A person's rows (one per GPU model) summed into one, the model dropped."""
    per_owner: dict[str | None, list[PersonRow]] = {}
    for row in rows:
        per_owner.setdefault(row.owner, []).append(row)
    merged = []
    for owner, found in per_owner.items():
        if len(found) == 1:
            merged.append(found[0])
            continue
        # A row's basis: its own where the store summed it, else (a row without one) its held
        # minutes where its use is known; a row whose use is unknown adds to neither.
        basis = [
            r.used_basis_gpu_minutes
            if r.used_basis_gpu_minutes is not None
            else (r.gpu_minutes if r.used_gpu_minutes is not None else None)
            for r in found
        ]
        merged.append(
            PersonRow(
                owner,
                sum(r.jobs for r in found),
                _known_sum([r.gpu_minutes for r in found]),
                _known_sum([r.used_gpu_minutes for r in found]),
                _known_sum([r.idle_gpu_minutes for r in found]),
                _known_sum(basis),
            )
        )
    return merged


def _people(rows: Sequence[PersonRow]) -> tuple[PersonLine, ...]:
    rows = _per_person(rows)
    lines = [
        PersonLine(
            owner=r.owner or NO_OWNER,
            jobs=r.jobs,
            gpu_hours=to_hours(r.gpu_minutes),
            used_gpu_hours=to_hours(r.used_gpu_minutes),
            idle_gpu_hours=to_hours(r.idle_gpu_minutes),
            efficiency=efficiency_of(r),
        )
        for r in rows
    ]
    # Largest consumers first; unmeasured people last, then by name for a stable order.
    lines.sort(key=lambda p: (p.gpu_hours is None, -(p.gpu_hours or 0.0), p.owner))
    return tuple(lines)


def _top_waste(rows: Sequence[WasteRow]) -> tuple[WasteLine, ...]:
    ranked = sorted(rows, key=lambda r: (-r.waste_gpu_minutes, r.namespace, r.name, r.uid))
    return tuple(
        WasteLine(
            namespace=r.namespace,
            name=r.name,
            uid=r.uid,
            owner=r.owner or NO_OWNER,
            waste_gpu_hours=r.waste_gpu_minutes / 60,
            kind=r.kind,
            severity=r.severity,
            recommendation=r.message,
        )
        for r in ranked[:TOP_WASTE]
        if r.waste_gpu_minutes > 0
    )


def _series(rows: Sequence[DailyRow], order: Sequence[str]) -> tuple[PersonSeries, ...]:
    held: dict[str, list[float]] = {}
    used: dict[str, list[float | None]] = {}
    for row in rows:
        if not 0 <= row.day < 7:
            raise ValueError(f"day index {row.day} outside the week")
        owner = row.owner or NO_OWNER
        held.setdefault(owner, [0.0] * 7)[row.day] += row.gpu_minutes / 60
        slot = used.setdefault(owner, [0.0] * 7)
        if row.used_gpu_minutes is None or slot[row.day] is None:
            slot[row.day] = None
        else:
            slot[row.day] = (slot[row.day] or 0.0) + row.used_gpu_minutes / 60
    # The chart lists people in the order of the table: largest consumers first.
    ordered = [n for n in order if n in held] + sorted(n for n in held if n not in order)
    return tuple(PersonSeries(n, tuple(held[n]), tuple(used[n])) for n in ordered)


def digest_to_dict(digest: Digest) -> dict[str, Any]:
    """The digest as JSON-ready data (GET /api/v1/digests/{team}, `inno-notify digest --format json`)."""

    def change_dict(c: Change) -> dict[str, float | None]:
        return {"previous": c.previous, "delta": c.delta, "percent": c.percent}

    return {
        "team": digest.team,
        "week": digest.week,
        "timezone": digest.timezone,
        "start": digest.start.isoformat(),
        "end": digest.end.isoformat(),
        "week_hours": digest.week_hours,
        "no_gpu_jobs": digest.no_gpu_jobs,
        "jobs": {
            "total": digest.jobs,
            "unmeasured": digest.jobs_unmeasured,
            "succeeded": digest.succeeded,
            "failed": digest.failed,
            "oom": digest.oom,
        },
        "gpu_hours": digest.gpu_hours,
        "used_gpu_hours": digest.used_gpu_hours,
        "idle_gpu_hours": digest.idle_gpu_hours,
        "efficiency": digest.efficiency,
        "memory_gib_hours": {
            "requested": digest.memory_requested_gib_hours,
            "peak": digest.memory_peak_gib_hours,
        },
        "queue_wait_seconds": {"p50": digest.queue_p50_seconds, "p95": digest.queue_p95_seconds},
        "people": [
            {
                "owner": p.owner,
                "jobs": p.jobs,
                "gpu_hours": p.gpu_hours,
                "used_gpu_hours": p.used_gpu_hours,
                "idle_gpu_hours": p.idle_gpu_hours,
                "efficiency": p.efficiency,
            }
            for p in digest.people
        ],
        "top_waste": [
            {
                "namespace": w.namespace,
                "name": w.name,
                "uid": w.uid,
                "owner": w.owner,
                "waste_gpu_hours": w.waste_gpu_hours,
                "kind": w.kind,
                "severity": w.severity,
                "recommendation": w.recommendation,
            }
            for w in digest.top_waste
        ],
        "daily": {
            "days": [d.isoformat() for d in digest.days],
            "people": [{"owner": s.owner, "held": list(s.held), "used": list(s.used)} for s in digest.daily],
        },
        "change": {
            "gpu_hours": change_dict(digest.change_gpu_hours),
            "efficiency": change_dict(digest.change_efficiency),
            "idle_gpu_hours": change_dict(digest.change_idle_gpu_hours),
        },
        "quota": {"gpus": digest.quota_gpus, "share": digest.quota_share},
        "live": {
            "idle_gpu_hours": digest.live_idle_gpu_hours,
            "people": [
                {"owner": p.owner, "pods": p.pods, "nudges": p.nudges, "idle_gpu_hours": p.idle_gpu_hours}
                for p in digest.live_idle
            ],
            "nudged_repeatedly": [
                {
                    "namespace": n.namespace,
                    "pod": n.pod,
                    "kind": n.kind,
                    "owner": n.owner,
                    "nudges": n.nudges,
                    "idle_gpu_hours": n.idle_gpu_hours,
                }
                for n in digest.nudged_repeatedly
            ],
        },
        "adoption": {
            **adoption_to_dict(digest.adoption),
            "people": [
                {"owner": p.owner or NO_OWNER, **adoption_to_dict(p.tally)} for p in digest.adoption_people
            ],
        },
        "trend": [trend_point_to_dict(p) for p in digest.trend],
        "costs": {
            "currency": digest.currency,
            "gpu_cost": digest.cost,
            "idle_cost": digest.idle_cost,
            "by_model": [
                {
                    "gpu_model": m.gpu_model,
                    "jobs": m.jobs,
                    "gpu_hours": m.gpu_hours,
                    "idle_gpu_hours": m.idle_gpu_hours,
                    "cost": m.cost,
                    "idle_cost": m.idle_cost,
                }
                for m in digest.by_model
            ],
            "top_idle_cost": [
                {"owner": p.owner, "idle_gpu_hours": p.idle_gpu_hours, "idle_cost": p.idle_cost}
                for p in digest.top_idle_cost
            ],
        },
        "budgets": [budget_report_to_dict(r) for r in digest.budgets],
        "missing": [{"figure": m.figure, "reason": m.reason} for m in digest.missing],
    }


def trend_point_to_dict(point: TrendPoint) -> dict[str, Any]:
    """One week of a trend as the API and the digest JSON show it."""
    return {
        "week": point.week,
        "start": point.start.isoformat(),
        "end": point.end.isoformat(),
        "jobs": point.jobs,
        "jobs_unmeasured": point.jobs_unmeasured,
        "gpu_hours": point.gpu_hours,
        "used_gpu_hours": point.used_gpu_hours,
        "idle_gpu_hours": point.idle_gpu_hours,
        "efficiency": point.efficiency,
        "quota_share": point.quota_share,
    }


def budget_report_to_dict(report: BudgetReport, *, plain: bool = True) -> dict[str, Any]:
    """A budget as the digest's JSON shows it, the fields of GET /api/v1/budgets' items: `plain`,
    the period's word and ISO 8601 times; else the Period and the datetimes themselves, for the
    API, whose serializer writes them (api.serialize)."""
    status, budget = report.status, report.status.budget
    return {
        "team": budget.team,
        "period": budget.period.value if plain else budget.period,
        "gpu_model": budget.gpu_model,
        "unit": budget.unit,
        "currency": status.currency,
        "start": status.start.isoformat() if plain else status.start,
        "end": status.end.isoformat() if plain else status.end,
        "budget": budget.allowance,
        "spent": status.spent,
        "share": status.share,
        "forecast": status.forecast,
        "by_model": [
            {"gpu_model": m.gpu_model, "gpu_hours": m.gpu_hours, "cost": m.cost} for m in report.by_model
        ],
    }
