"""Rows for tests to set up and inspect directly, written and read through the store's own queries.

The store offers what the service uses; tests also need to put a job, its usage or an outbox row in
place without running the pipeline that would write them, and to look at state no reader exposes.
Each helper is one transaction on the store's engine (unfenced: the fencing tests use the store's
own writers), composed of the query modules' functions so the rows are exactly what the service
writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa

from inno_notify.adapters.db import codec, directory, jobs, outbox, rejected, tables
from inno_notify.adapters.db.jobs import SummaryState
from inno_notify.adapters.db.outbox_repository import Claim, FailureRecord, RetryRecord, SentRecord
from inno_notify.adapters.db.repository import Store
from inno_notify.adapters.db.workflow_rows import WorkflowTransaction
from inno_notify.domain.model import (
    DirectoryUser,
    JobRecord,
    Notification,
    PodRecord,
    Recommendation,
    RejectedObject,
    Usage,
)
from inno_notify.domain.workflows import WorkflowRecord


async def upsert_jobs(store: Store, records: Sequence[JobRecord]) -> None:
    async with store.engine.begin() as conn:
        await jobs.upsert_jobs(conn, records)


async def upsert_pods(store: Store, records: Sequence[PodRecord]) -> None:
    async with store.engine.begin() as conn:
        await jobs.upsert_pods(conn, records)


async def get_job(store: Store, cluster: str, uid: str) -> JobRecord | None:
    async with store.read() as conn:
        return (await jobs.get_jobs(conn, cluster, [uid])).get(uid)


async def all_jobs(store: Store) -> list[JobRecord]:
    """Every stored job, of every cluster."""
    async with store.read() as conn:
        return [codec.job_from_row(row) for row in (await conn.execute(sa.select(tables.jobs))).mappings()]


async def get_jobs(store: Store, cluster: str, uids: Sequence[str]) -> dict[str, JobRecord]:
    async with store.read() as conn:
        return await jobs.get_jobs(conn, cluster, uids)


async def pods_of(store: Store, cluster: str, job_uid: str) -> list[PodRecord]:
    async with store.read() as conn:
        return await jobs.pods_of(conn, cluster, job_uid)


async def job_uids_of_pods(store: Store, cluster: str, pod_uids: Sequence[str]) -> dict[str, str]:
    async with store.read() as conn:
        return await jobs.job_uids_of_pods(conn, cluster, pod_uids)


async def open_jobs(
    store: Store, cluster: str, namespaces: Sequence[str] = (), *, kind: str | None = None
) -> list[JobRecord]:
    async with store.read() as conn:
        return await jobs.open_jobs(conn, cluster, namespaces, kind)


async def mark_terminal(
    store: Store,
    cluster: str,
    uid: str,
    at: datetime,
    *,
    state: SummaryState = SummaryState.AWAITING_USAGE,
    usage_due_at: datetime | None = None,
) -> bool:
    """Records that the job ended, as ingestion does (due for usage from `usage_due_at`, default
    `at`); True only the first time."""
    if state is SummaryState.AWAITING_USAGE and usage_due_at is None:
        usage_due_at = at
    elif state is not SummaryState.AWAITING_USAGE:
        usage_due_at = None
    async with store.engine.begin() as conn:
        return await jobs.mark_terminal(conn, cluster, uid, at, state, usage_due_at)


async def summary_state(store: Store, cluster: str, uid: str) -> SummaryState | None:
    return (await store.jobs.summary_states(cluster, [uid])).get(uid)


async def summarize(
    store: Store,
    cluster: str,
    uid: str,
    notifications: Sequence[Notification],
    state: SummaryState = SummaryState.SUMMARIZED,
) -> int:
    """Sets the job's summary state and enqueues its notifications (a summary without usage)."""
    async with store.engine.begin() as conn:
        await jobs.set_summary_state(conn, cluster, uid, state)
        return await outbox.enqueue(conn, notifications)


async def save_usage(store: Store, cluster: str, uid: str, usage: Usage) -> None:
    async with store.engine.begin() as conn:
        await jobs.save_usage(conn, cluster, uid, usage)


async def save_recommendations(store: Store, cluster: str, uid: str, recs: Sequence[Recommendation]) -> None:
    async with store.engine.begin() as conn:
        await jobs.save_recommendations(conn, cluster, uid, recs)


async def recommendations_of(store: Store, cluster: str, uid: str) -> list[Recommendation]:
    async with store.read() as conn:
        return await jobs.recommendations_of(conn, cluster, uid)


async def rejected_objects(
    store: Store, cluster: str | None = None, limit: int = 100
) -> list[RejectedObject]:
    """The objects set aside, most recently refused first."""
    async with store.read() as conn:
        return await rejected.list_recent(conn, cluster, limit)


async def directory_user(store: Store, email: str) -> DirectoryUser | None:
    """The directory entry without the person's own preferences."""
    async with store.read() as conn:
        return await directory.directory_user(conn, email)


async def get_checkpoint(store: Store, key: str) -> str | None:
    async with store.read() as conn:
        return await directory.get_checkpoint(conn, key)


async def set_checkpoint(store: Store, key: str, value: str) -> None:
    async with store.engine.begin() as conn:
        await directory.set_checkpoint(conn, key, value)


async def get_workflow(store: Store, cluster: str, uid: str) -> WorkflowRecord | None:
    async with store.read() as conn:
        return (await WorkflowTransaction(conn).get_workflows(cluster, [uid])).get(uid)


async def ingest(
    store: Store,
    job_records: Sequence[JobRecord],
    pod_records: Sequence[PodRecord],
    marks: Sequence[jobs.TerminalMark],
) -> int:
    """One ingestion batch in one transaction (IngestTransaction.write); returns how many jobs ended
    for the first time."""
    clusters = sorted({j.cluster for j in job_records} | {p.cluster for p in pod_records})
    async with store.jobs.ingest_transaction() as tx:
        return await tx.write(clusters[0] if clusters else "", job_records, pod_records, marks)


async def claim_usage_due(
    store: Store, now: datetime, limit: int, lease_seconds: float = 300.0
) -> list[JobRecord]:
    """The jobs of a usage claim (`store.jobs.claim_usage`), for tests that settle without it."""
    return list((await store.jobs.claim_usage(now, limit, lease_seconds)).jobs)


async def mark_sent(store: Store, claim: Claim | str, rows: Sequence[SentRecord]) -> int:
    """A claim's sent rows recorded as the dispatcher records a round's outcomes; the rows settled."""
    async with store.outbox.recorder(claim) as outcomes:
        return await outcomes.sent(rows)


async def mark_retry(store: Store, claim: Claim | str, rows: Sequence[RetryRecord]) -> int:
    async with store.outbox.recorder(claim) as outcomes:
        return await outcomes.retry(rows)


async def mark_failed(store: Store, claim: Claim | str, rows: Sequence[FailureRecord], at: datetime) -> int:
    async with store.outbox.recorder(claim) as outcomes:
        return await outcomes.failed(rows, at)


async def get_usage(store: Store, cluster: str, uid: str) -> Usage | None:
    """The job's stored usage figures."""
    async with store.read() as conn:
        return await jobs.get_usage(conn, cluster, uid)
