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
- ``memory_requested_bytes`` vs ``memory_peak_bytes``: over the jobs where both are known, the sum
  of the per-pod memory request × parallelism (what the job reserved with all its pods running at
  once) and the sum of the per-pod peak × parallelism (the largest pod's peak working set scaled the
  same way, so the two compare like with like). ``memory_jobs`` counts those jobs; both sums are
  ``None`` when it is 0.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from inno_notify.adapters.db.sql import finished_in
from inno_notify.adapters.db.tables import jobs

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

    def __add__(self, other: UsageFigures) -> UsageFigures:
        """Both sets' figures: counts add up, and a sum known in either is known."""
        sums: list[Any] = [_add(getattr(self, name), getattr(other, name)) for name in _FIGURES]
        return UsageFigures(*sums)


_FIGURES = tuple(f.name for f in dataclasses.fields(UsageFigures))


@dataclass(frozen=True, slots=True)
class UsageGroup:
    """One group's figures."""

    key: str | None  # None: jobs with no resolvable owner / team
    figures: UsageFigures


@dataclass(frozen=True, slots=True)
class UsageCell:
    """The figures of the jobs of one (team, owner, namespace): what every grouping is summed from."""

    team: str | None
    owner: str | None
    namespace: str
    figures: UsageFigures


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
    keys = (c.team, c.owner, c.namespace)
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
        )
        .where(c.finished_at.is_not(None), *finished_in(jobs, since, until, cluster))
        .group_by(*keys)
    )
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
    result = await conn.execute(query)
    return [
        UsageCell(
            team=row.team,
            owner=row.owner,
            namespace=row.namespace,
            figures=UsageFigures(
                jobs=int(row.jobs),
                measured_jobs=int(row.measured_jobs),
                gpu_minutes=_float(row.gpu_minutes),
                used_gpu_minutes=_float(row.used_gpu_minutes),
                idle_gpu_minutes=_float(row.idle_gpu_minutes),
                memory_jobs=int(row.memory_jobs),
                memory_requested_bytes=_float(row.memory_requested_bytes),
                memory_peak_bytes=_float(row.memory_peak_bytes),
            ),
        )
        for row in result
    ]


def group_cells(cells: Sequence[UsageCell], group_by: GroupBy) -> list[UsageGroup]:
    """The cells summed per team, owner or namespace, most GPU-minutes first (then by key, None last)."""
    totals: dict[str | None, UsageFigures] = {}
    for cell in cells:
        key: str | None = getattr(cell, group_by.value)
        totals[key] = totals.get(key, _NONE) + cell.figures
    groups = [
        UsageGroup(
            key,
            replace(
                total,
                memory_requested_bytes=_round(total.memory_requested_bytes),
                memory_peak_bytes=_round(total.memory_peak_bytes),
            ),
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
