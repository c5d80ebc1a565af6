"""Usage per team, owner or namespace, aggregated in SQL: what admins plan capacity from.

One GROUP BY over jobs, whose rows keep copies of their measured usage (jobs.usage_copies), so
the database sums one table and the API never pulls a million rows into Python. A job counts
wholly in the window in which it finished (`finished_at` in [since, until)); jobs still running
have no usage yet and are left out.

The figures of a group:

- ``jobs``: jobs that finished in the window.
- ``measured_jobs``: those of them whose GPU-minutes were measured (the others are unmeasured, not
  zero: Prometheus was down, the job was shorter than a scrape, …).
- ``gpu_minutes``, ``used_gpu_minutes``, ``idle_gpu_minutes``: sums over the measured jobs of the
  job figures of CONTRACT.md §4 (GPU-equivalents × minutes held; the same weighted by measured
  utilization; the GPU-minutes of GPUs that stayed below the idle threshold). ``None`` when no job
  of the group had the figure measured.
- ``cpu_core_hours``, ``memory_gib_hours``: over the measured jobs, requested cores and GiB of
  memory × parallelism × runtime — what the cost of a group prices besides its GPU-hours.
- ``memory_requested_bytes`` vs ``memory_peak_bytes``: over the jobs where both are known, the sum
  of the per-pod memory request × parallelism (what the job reserved with all its pods running at
  once) and the sum of the per-pod peak × parallelism (the largest pod's peak working set scaled the
  same way, so the two compare like with like). ``memory_jobs`` counts those jobs; both sums are
  ``None`` when it is 0.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from inno_notify.adapters.db.sql import finished_in, seconds_after
from inno_notify.adapters.db.tables import jobs
from inno_notify.domain.budgets import SpendCell
from inno_notify.domain.costs import GIB, Cost, Held, Rates, cost_of

AGGREGATION_WORK_MEM = "64MB"


class GroupBy(enum.StrEnum):
    TEAM = "team"
    OWNER = "owner"
    NAMESPACE = "namespace"


@dataclass(frozen=True, slots=True)
class UsageFigures:
    """The figures of a set of finished jobs (see the module docstring for what each one means).

    Sums stay floats (memory sums too) while cells are added up; a complete group's memory sums are
    rounded to whole bytes (group_cells).
    """

    jobs: int = 0
    measured_jobs: int = 0
    gpu_minutes: float | None = None
    used_gpu_minutes: float | None = None
    idle_gpu_minutes: float | None = None
    memory_jobs: int = 0
    memory_requested_bytes: float | None = None
    memory_peak_bytes: float | None = None
    cpu_core_hours: float | None = None
    memory_gib_hours: float | None = None

    def __add__(self, other: UsageFigures) -> UsageFigures:
        """Both sets' figures: counts add up, and a sum known in either is known."""
        sums: list[Any] = [_add(getattr(self, name), getattr(other, name)) for name in _FIGURES]
        return UsageFigures(*sums)


_FIGURES = tuple(f.name for f in dataclasses.fields(UsageFigures))


@dataclass(frozen=True, slots=True)
class UsageGroup:
    """One group's figures, and their cost where accounting.rates price them."""

    key: str | None  # None: jobs with no resolvable owner / team
    figures: UsageFigures
    cost: Cost | None = None


@dataclass(frozen=True, slots=True)
class UsageCell:
    """The figures of the jobs of one (team, owner, namespace): what every grouping is summed from."""

    team: str | None
    owner: str | None
    namespace: str
    figures: UsageFigures
    gpu_model: str | None = None

    def cost(self, rates: Rates) -> Cost | None:
        """What the cell's measured jobs cost (their GPU model's price: cells are per model)."""
        f = self.figures
        held = Held(self.gpu_model, f.gpu_minutes, f.idle_gpu_minutes, f.cpu_core_hours, f.memory_gib_hours)
        return cost_of(held, rates)


def _float(value: object) -> float | None:
    return None if value is None else float(value)  # type: ignore[arg-type]  # Decimal on Postgres


def _add(total: float | None, value: float | None) -> float | None:
    if value is None:
        return total
    return value if total is None else total + value


def _round(value: float | None) -> int | None:
    return None if value is None else round(value)


_NONE = UsageFigures()  # of no jobs


async def usage_cells(
    conn: AsyncConnection,
    since: datetime | None = None,
    until: datetime | None = None,
    cluster: str | None = None,
) -> list[UsageCell]:
    """The figures per (team, owner, namespace) of the jobs finished in [since, until).

    One aggregation serves every `group_by` (see group_cells): there are far fewer cells than jobs,
    and the pass over every finished job is what costs.
    """
    # The job's copies of its usage figures (jobs.usage_copies, written with the usage): the pass
    # reads the jobs table alone, with no join of a million usage rows to build and probe.
    c = jobs.c
    parallelism = sa.func.coalesce(c.requested["parallelism"].as_integer(), 1)
    both_known = sa.and_(c.memory_requested_bytes.is_not(None), c.memory_peak_bytes.is_not(None))
    # REAL products: SQLite's integer sum() raises on overflow, and petabyte-scale sums are real.
    requested = sa.case((both_known, sa.cast(c.memory_requested_bytes, sa.Double) * parallelism))
    peak = sa.case((both_known, sa.cast(c.memory_peak_bytes, sa.Double) * parallelism))
    keys = (c.team, c.owner, c.namespace, c.gpu_model)
    query = (
        sa.select(
            *keys,
            sa.func.count().label("jobs"),
            sa.func.count(c.gpu_minutes_held).label("measured_jobs"),
            sa.func.sum(c.gpu_minutes_held).label("gpu_minutes"),
            sa.func.sum(c.gpu_minutes_used).label("used_gpu_minutes"),
            sa.func.sum(c.gpu_minutes_idle).label("idle_gpu_minutes"),
            sa.func.count(sa.case((both_known, 1))).label("memory_jobs"),
            sa.func.sum(requested).label("memory_requested_bytes"),
            sa.func.sum(peak).label("memory_peak_bytes"),
            *_request_hours(conn.dialect.name),
        )
        .where(c.finished_at.is_not(None), *finished_in(jobs, since, until, cluster))
        .group_by(*keys)
    )
    await _tune_for_aggregation(conn)
    result = await conn.execute(query)
    return [
        UsageCell(
            team=row.team,
            owner=row.owner,
            namespace=row.namespace,
            gpu_model=row.gpu_model,
            figures=UsageFigures(
                jobs=int(row.jobs),
                measured_jobs=int(row.measured_jobs),
                gpu_minutes=_float(row.gpu_minutes),
                used_gpu_minutes=_float(row.used_gpu_minutes),
                idle_gpu_minutes=_float(row.idle_gpu_minutes),
                memory_jobs=int(row.memory_jobs),
                memory_requested_bytes=_float(row.memory_requested_bytes),
                memory_peak_bytes=_float(row.memory_peak_bytes),
                cpu_core_hours=_float(row.cpu_core_hours),
                memory_gib_hours=_float(row.memory_gib_hours),
            ),
        )
        for row in result
    ]


def _request_hours(dialect: str) -> tuple[sa.Label[Any], sa.Label[Any]]:
    """Sums of the requested cores and GiB of memory held over the runtime (× parallelism), of the
    measured jobs (those the GPU figures are summed over): what rates price besides GPU-hours."""
    c = jobs.c
    parallelism = sa.func.coalesce(c.requested["parallelism"].as_integer(), 1)
    hours = seconds_after(dialect, c.finished_at, c.started_at) * parallelism / 3600.0
    measured = c.gpu_minutes_held.is_not(None)
    core_hours = sa.case((measured, sa.func.coalesce(c.cpu_requested_cores, 0.0) * hours))
    gib_hours = sa.case(
        (measured, sa.cast(sa.func.coalesce(c.memory_requested_bytes, 0), sa.Double) / float(GIB) * hours)
    )
    return sa.func.sum(core_hours).label("cpu_core_hours"), sa.func.sum(gib_hours).label("memory_gib_hours")


async def _tune_for_aggregation(conn: AsyncConnection) -> None:
    if conn.dialect.name == "postgresql":
        # A pass over every finished job: its hash tables get more than the default 4 MB (a spill to
        # disk otherwise), JIT would compile a plan that runs once, and parallel workers took as
        # long as one process on a loaded machine while taking cores from the API's requests
        # (docs/api.md). The settings end with the transaction.
        for setting in (
            f"work_mem = '{AGGREGATION_WORK_MEM}'",
            "jit = off",
            "max_parallel_workers_per_gather = 0",
        ):
            await conn.exec_driver_sql(f"SET LOCAL {setting}")


async def spend_cells(
    conn: AsyncConnection,
    teams: Collection[str],
    windows: Sequence[tuple[datetime, datetime]],
    cluster: str | None = None,
) -> list[SpendCell]:
    """What the jobs of ``teams`` that finished in each of ``windows`` (disjoint, [start, end))
    held, per window, team and GPU model: what budgets are counted from, in one pass."""
    if not teams or not windows:
        return []
    c = jobs.c
    within = [sa.and_(c.finished_at >= start, c.finished_at < end) for start, end in windows]
    span = sa.case(*((condition, i) for i, condition in enumerate(within)), else_=-1).label("span")
    query = (
        sa.select(
            span,
            c.team,
            c.gpu_model,
            sa.func.sum(c.gpu_minutes_held).label("gpu_minutes"),
            sa.func.sum(c.gpu_minutes_idle).label("idle_gpu_minutes"),
            *_request_hours(conn.dialect.name),
        )
        .where(
            c.team.in_(sorted(teams)),
            *finished_in(jobs, min(w[0] for w in windows), max(w[1] for w in windows), cluster),
        )
        .group_by(span, c.team, c.gpu_model)
    )
    await _tune_for_aggregation(conn)
    return [
        SpendCell(
            span=int(row.span),
            team=row.team,
            held=Held(
                row.gpu_model,
                _float(row.gpu_minutes),
                _float(row.idle_gpu_minutes),
                _float(row.cpu_core_hours),
                _float(row.memory_gib_hours),
            ),
        )
        for row in await conn.execute(query)
        if row.span >= 0
    ]


def group_cells(
    cells: Sequence[UsageCell], group_by: GroupBy, rates: Rates | None = None
) -> list[UsageGroup]:
    """The cells summed per team, owner or namespace, most GPU-minutes first (then by key, None
    last); with ``rates``, each group's cost: the sum over its cells whose cost is known (a cell of
    a GPU model no price matches counts in the GPU-minutes, not in the cost), None where none is."""
    totals: dict[str | None, UsageFigures] = {}
    costs: dict[str | None, tuple[float | None, float | None]] = {}
    currency = rates.currency if rates is not None and rates.priced else None
    for cell in cells:
        key: str | None = getattr(cell, group_by.value)
        totals[key] = totals.get(key, _NONE) + cell.figures
        if rates is not None and currency is not None:
            cost = cell.cost(rates)
            amount, idle = costs.get(key, (None, None))
            if cost is not None:
                costs[key] = (_add(amount, cost.amount), _add(idle, cost.idle))
    groups = [
        UsageGroup(
            key,
            replace(
                total,
                memory_requested_bytes=_round(total.memory_requested_bytes),
                memory_peak_bytes=_round(total.memory_peak_bytes),
            ),
            None if currency is None else Cost(*costs.get(key, (None, None)), currency),
        )
        for key, total in totals.items()
    ]
    groups.sort(
        key=lambda g: (
            g.figures.gpu_minutes is None,
            -(g.figures.gpu_minutes or 0.0),
            g.key is None,
            g.key or "",
        )
    )
    return groups
