"""What the live check reads: the running GPU pods with their workloads, and when each pod was last nudged.

Running pods come from the records ingestion keeps (the watchers see every pod): the workloads whose
status is `running` (the status index), then their pods (the (cluster, job_uid) index) that run,
hold GPUs and have not ended. The last nudge of a pod is the newest `idle_nudge` outbox row whose
`job_uid` is the pod's uid (the (cluster, job_uid) index): the outbox is the record of what was
sent, so a restarted service, or another replica taking over, sees the same history.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from inno_notify.adapters.db import codec
from inno_notify.adapters.db.jobs import pods_of_jobs
from inno_notify.adapters.db.sql import chunks
from inno_notify.adapters.db.tables import jobs, outbox
from inno_notify.domain.model import JobRecord, JobStatus, NotificationKind, PodRecord

__all__ = ["last_nudges", "running_gpu_pods"]

RUNNING_PHASE = "Running"


async def running_gpu_pods(
    conn: AsyncConnection, cluster: str, namespaces: Sequence[str] = ()
) -> list[tuple[JobRecord, PodRecord]]:
    """(workload, pod) for every pod of a running workload that runs now and holds GPUs."""
    query = sa.select(jobs).where(jobs.c.status == JobStatus.RUNNING.value, jobs.c.cluster == cluster)
    if namespaces:
        query = query.where(jobs.c.namespace.in_(list(namespaces)))
    workloads = {row["uid"]: codec.job_from_row(row) for row in (await conn.execute(query)).mappings()}
    if not workloads:
        return []
    found: list[tuple[JobRecord, PodRecord]] = []
    for job_uid, pods in (await pods_of_jobs(conn, cluster, list(workloads))).items():
        for pod in pods:
            running = pod.phase == RUNNING_PHASE and pod.finished_at is None and pod.deleted_at is None
            if running and pod.gpu_equivalents > 0:
                found.append((workloads[job_uid], pod))
    found.sort(key=lambda pair: (pair[1].namespace, pair[1].name, pair[1].uid))
    return found


async def last_nudges(conn: AsyncConnection, cluster: str, pod_uids: Sequence[str]) -> dict[str, datetime]:
    """When each pod was last nudged (any recipient, any channel); pods never nudged are absent."""
    found: dict[str, datetime] = {}
    for chunk in chunks(list(dict.fromkeys(pod_uids))):
        query = (
            sa.select(outbox.c.job_uid, sa.func.max(outbox.c.created_at).label("last"))
            .where(
                outbox.c.cluster == cluster,
                outbox.c.job_uid.in_(chunk),
                outbox.c.kind == NotificationKind.IDLE_NUDGE.value,
            )
            .group_by(outbox.c.job_uid)
        )
        for row in (await conn.execute(query)).mappings():
            last = row["last"]
            if isinstance(last, datetime):
                found[row["job_uid"]] = last
    return found
