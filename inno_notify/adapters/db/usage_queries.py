"""Usage per team, owner or namespace, aggregated in SQL: what admins plan capacity from.

One GROUP BY over jobs joined with their measured usage, so the database does the summing and
the API never pulls a million rows into Python. A job counts wholly in the window in which it
finished (`finished_at` in [since, until)); jobs still running have no usage yet and are left out.

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

import enum
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from inno_notify.adapters.db.tables import jobs, usage


class GroupBy(enum.StrEnum):
    TEAM = "team"
    OWNER = "owner"
    NAMESPACE = "namespace"


@dataclass(frozen=True, slots=True)
class UsageGroup:
    """One group's figures (see the module docstring for what each one means)."""

    key: str | None  # None: jobs with no resolvable owner / team
    jobs: int
    measured_jobs: int
    gpu_minutes: float | None
    used_gpu_minutes: float | None
    idle_gpu_minutes: float | None
    memory_jobs: int
    memory_requested_bytes: int | None
    memory_peak_bytes: int | None


def _float(value: object) -> float | None:
    return None if value is None else float(value)  # type: ignore[arg-type]  # Decimal on Postgres


def _int(value: object) -> int | None:
    return None if value is None else round(float(value))  # type: ignore[arg-type]


async def usage_by_group(
    conn: AsyncConnection,
    group_by: GroupBy,
    since: datetime | None = None,
    until: datetime | None = None,
    cluster: str | None = None,
) -> list[UsageGroup]:
    """The groups with any job finished in [since, until), most GPU-minutes first."""
    key = jobs.c[group_by.value]
    parallelism = sa.func.coalesce(jobs.c.requested["parallelism"].as_integer(), 1)
    both_known = sa.and_(jobs.c.memory_requested_bytes.is_not(None), usage.c.memory_peak_bytes.is_not(None))
    # REAL products: SQLite's integer sum() raises on overflow, and petabyte-scale sums are real.
    requested = sa.case((both_known, sa.cast(jobs.c.memory_requested_bytes, sa.Double) * parallelism))
    peak = sa.case((both_known, sa.cast(usage.c.memory_peak_bytes, sa.Double) * parallelism))
    gpu_minutes = sa.func.sum(usage.c.gpu_minutes)
    query = (
        sa.select(
            key.label("key"),
            sa.func.count().label("jobs"),
            sa.func.count(usage.c.gpu_minutes).label("measured_jobs"),
            gpu_minutes.label("gpu_minutes"),
            sa.func.sum(usage.c.used_gpu_minutes).label("used_gpu_minutes"),
            sa.func.sum(usage.c.idle_gpu_minutes).label("idle_gpu_minutes"),
            sa.func.count(sa.case((both_known, 1))).label("memory_jobs"),
            sa.func.sum(requested).label("memory_requested_bytes"),
            sa.func.sum(peak).label("memory_peak_bytes"),
        )
        .select_from(
            jobs.outerjoin(usage, sa.and_(usage.c.cluster == jobs.c.cluster, usage.c.job_uid == jobs.c.uid))
        )
        .where(jobs.c.finished_at.is_not(None))
        .group_by(key)
        .order_by(gpu_minutes.desc().nulls_last(), key.asc().nulls_last())
    )
    if since is not None:
        query = query.where(jobs.c.finished_at >= since)
    if until is not None:
        query = query.where(jobs.c.finished_at < until)
    if cluster is not None:
        query = query.where(jobs.c.cluster == cluster)
    result = await conn.execute(query)
    return [
        UsageGroup(
            key=row.key,
            jobs=int(row.jobs),
            measured_jobs=int(row.measured_jobs),
            gpu_minutes=_float(row.gpu_minutes),
            used_gpu_minutes=_float(row.used_gpu_minutes),
            idle_gpu_minutes=_float(row.idle_gpu_minutes),
            memory_jobs=int(row.memory_jobs),
            memory_requested_bytes=_int(row.memory_requested_bytes),
            memory_peak_bytes=_int(row.memory_peak_bytes),
        )
        for row in result
    ]
