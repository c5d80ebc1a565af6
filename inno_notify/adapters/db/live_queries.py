"""What the live check reads: the running GPU pods with their workloads, and when each pod was last nudged.

Running pods come from the records ingestion keeps (the watchers see every pod): the workloads whose
status is `running` (the status index), then their pods (the (cluster, job_uid) index) that run,
hold GPUs and have not ended. The last nudge of a pod is kept in `checkpoints`
(`nudged/{cluster}/{pod uid}`, written with the nudge in its transaction), since a round's nudge
lists all of a person's idle pods in one row; rows written before that (one per pod, `job_uid` the
pod's uid, the (cluster, job_uid) index) still count. So a restarted service, or another replica
taking over, sees the same history. Entries older than any `repeat_hours` is pruned.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from inno_notify.adapters.db import codec
from inno_notify.adapters.db.jobs import pods_of_jobs
from inno_notify.adapters.db.sql import chunks, upsert
from inno_notify.adapters.db.tables import checkpoints, jobs, outbox
from inno_notify.domain.model import JobRecord, JobStatus, NotificationKind, PodRecord

__all__ = ["last_nudges", "record_nudged", "running_gpu_pods"]

NUDGED_PREFIX = "nudged/"


def _nudged_key(cluster: str, pod_uid: str) -> str:
    return f"{NUDGED_PREFIX}{cluster}/{pod_uid}"


async def record_nudged(
    conn: AsyncConnection, cluster: str, pod_uids: Sequence[str], at: datetime, keep_after: datetime
) -> None:
    """Records that these pods were nudged `at`, and forgets this cluster's pods nudged before
    `keep_after` (past the repeat period they may be nudged again either way)."""
    prefix = f"{NUDGED_PREFIX}{cluster}/"
    await conn.execute(
        sa.delete(checkpoints).where(
            checkpoints.c.key.startswith(prefix, autoescape=True),
            checkpoints.c.value < keep_after.isoformat(),
        )
    )
    rows = [{"key": _nudged_key(cluster, uid), "value": at.isoformat()} for uid in dict.fromkeys(pod_uids)]
    if rows:
        await conn.execute(upsert(conn, checkpoints, ["key"], ["value"]), rows)


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
        keys = {_nudged_key(cluster, uid): uid for uid in chunk}
        rows = await conn.execute(
            sa.select(checkpoints.c.key, checkpoints.c.value).where(checkpoints.c.key.in_(keys))
        )
        for key, value in rows:
            with contextlib.suppress(ValueError):
                found[keys[key]] = datetime.fromisoformat(value)
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
            if isinstance(last, datetime) and (row["job_uid"] not in found or found[row["job_uid"]] < last):
                found[row["job_uid"]] = last
    return found
