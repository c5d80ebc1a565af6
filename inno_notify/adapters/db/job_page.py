"""What a job's page shows, read in one go: the run, its usage, advice, pods and usage series.

One read connection for the five reads (a page is opened by a person following a link, but a
link shared in a channel is opened by many at once: a pooled connection each would be dear).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncConnection

from inno_notify.adapters.db import jobs, series
from inno_notify.domain.model import JobRecord, PodRecord, Recommendation, Usage, UsageSeries


@dataclass(frozen=True, slots=True)
class JobPageData:
    job: JobRecord
    usage: Usage | None
    recommendations: list[Recommendation]
    pods: list[PodRecord]
    series: UsageSeries | None


async def job_page_data(
    conn: AsyncConnection, namespace: str, name: str, uid: str | None, cluster: str | None = None
) -> JobPageData | None:
    """The run with that uid (else the newest of that name), with everything its page shows."""
    job = await jobs.find_job(conn, namespace, name, uid, cluster)
    if job is None:
        return None
    return JobPageData(
        job=job,
        usage=await jobs.get_usage(conn, job.cluster, job.uid),
        recommendations=await jobs.recommendations_of(conn, job.cluster, job.uid),
        pods=await jobs.pods_of(conn, job.cluster, job.uid),
        series=(await series.series_of(conn, job.cluster, [job.uid])).get(job.uid),
    )
