"""The store: the one object the rest of the service uses to read and write the database.

Every method is one transaction and takes or returns domain records, so callers never see a row
or a connection. Batch methods take sequences: the ingestion path writes thousands of records per
statement, never one commit per row. The queries themselves live in jobs.py, outbox.py and
directory.py; here they are only composed into transactions. The dispatcher's side of the outbox
(claims, leases, outcomes) is `Store.outbox`, an OutboxRepository.

Leader-only writes (ingestion, usage, summaries, enqueueing, outbox claims) are fenced: each
transaction first checks the store's `fence` (leases.py), which raises LostLeadership once this
replica's leadership term is over. Without election the fence is UNFENCED and costs nothing.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from inno_notify.adapters.db import (
    digest_queries,
    directory,
    job_details,
    job_page,
    jobs,
    live_queries,
    nudge_ledger,
    outbox,
    preferences,
    recommendation_queries,
    rejected,
    series,
    usage_queries,
    workflows,
)
from inno_notify.adapters.db.engine import DEFAULT_STATEMENT_TIMEOUT_SECONDS, READ_INTENT, create_engine
from inno_notify.adapters.db.job_details import JobPage
from inno_notify.adapters.db.jobs import (
    JobFilter,
    RecordNotFound,
    SummaryState,
    TerminalMark,
    UsageClaim,
)
from inno_notify.adapters.db.leases import UNFENCED, Fence
from inno_notify.adapters.db.outbox_repository import OutboxRepository, Summary
from inno_notify.adapters.db.telegram_bot import BotTransaction, update_offset
from inno_notify.adapters.db.workflows import (
    EventRecord,
    TerminalWorkflow,
    WorkflowClaim,
    WorkflowState,
    WorkflowTransaction,
)
from inno_notify.domain.digest import Digest, NudgeEntry
from inno_notify.domain.model import (
    DeliveryStatus,
    DirectoryUser,
    JobRecord,
    Notification,
    PodRecord,
    Recommendation,
    RejectedObject,
    Team,
    Usage,
    UsageSeries,
)
from inno_notify.domain.preferences import Origin, Preferences
from inno_notify.domain.workflows import WorkflowPod, WorkflowRecord

__all__ = [
    "BotTransaction",
    "EventRecord",
    "JobFilter",
    "RecordNotFound",
    "Store",
    "SummaryState",
    "TerminalMark",
    "TerminalWorkflow",
    "UsageClaim",
    "WorkflowState",
    "WorkflowTransaction",
]

DEFAULT_USAGE_LEASE_SECONDS = 300.0


class IngestTransaction:
    """The reads and writes of one ingestion batch on one connection, in one transaction.

    A batch reads what is stored, merges in memory and writes back; doing all of it on one
    connection saves a pool checkout (and its liveness ping) per step, and on Postgres it also
    makes the read-merge-write atomic.
    """

    def __init__(self, conn: AsyncConnection) -> None:
        self._conn = conn

    async def get_jobs(self, cluster: str, uids: Sequence[str]) -> dict[str, JobRecord]:
        return await jobs.get_jobs(self._conn, cluster, uids)

    async def pods_of_jobs(self, cluster: str, job_uids: Sequence[str]) -> dict[str, list[PodRecord]]:
        return await jobs.pods_of_jobs(self._conn, cluster, job_uids)

    async def job_uids_of_pods(self, cluster: str, pod_uids: Sequence[str]) -> dict[str, str]:
        return await jobs.job_uids_of_pods(self._conn, cluster, pod_uids)

    async def open_jobs(
        self, cluster: str, namespaces: Sequence[str] = (), *, kind: str | None = None
    ) -> list[JobRecord]:
        return await jobs.open_jobs(self._conn, cluster, namespaces, kind)

    async def write(
        self,
        cluster: str,
        job_records: Sequence[JobRecord],
        pod_records: Sequence[PodRecord],
        marks: Sequence[TerminalMark],
    ) -> int:
        """Upserts the batch's jobs and pods and records the jobs that ended; returns how many
        ended for the first time."""
        clusters = {j.cluster for j in job_records} | {p.cluster for p in pod_records}
        if clusters - {cluster}:
            raise ValueError(f"one batch, one cluster: got {sorted(clusters)}")
        await jobs.upsert_jobs(self._conn, job_records)
        await jobs.upsert_pods(self._conn, pod_records)
        return await jobs.mark_terminals(self._conn, cluster, marks) if marks else 0


class Store:
    """Repository over an AsyncEngine (Postgres or SQLite) whose schema is at the newest revision."""

    def __init__(self, engine: AsyncEngine, fence: Fence = UNFENCED) -> None:
        self._engine = engine
        self._reader = engine.execution_options(**READ_INTENT)
        self._fence = fence
        self._outbox = OutboxRepository(engine, fence)

    @classmethod
    def from_url(
        cls,
        url: str,
        fence: Fence = UNFENCED,
        *,
        statement_timeout_seconds: float | None = DEFAULT_STATEMENT_TIMEOUT_SECONDS,
        idle_in_transaction_seconds: float | None = None,
    ) -> Store:
        engine = create_engine(
            url,
            statement_timeout_seconds=statement_timeout_seconds,
            idle_in_transaction_seconds=idle_in_transaction_seconds,
        )
        return cls(engine, fence)

    @property
    def engine(self) -> AsyncEngine:
        return self._engine

    def read(self) -> AbstractAsyncContextManager[AsyncConnection]:
        """A connection for reads only: on SQLite its transaction takes no write lock, so it runs
        beside an ingest batch instead of queueing behind it. Writes use `engine.begin()`, whose
        transaction takes the write lock up front (engine.py says why)."""
        return self._reader.connect()

    @property
    def outbox(self) -> OutboxRepository:
        """Claiming outbox rows and recording what became of them (the dispatcher's side)."""
        return self._outbox

    async def close(self) -> None:
        await self._engine.dispose()

    @contextlib.asynccontextmanager
    async def _leader_write(self) -> AsyncIterator[AsyncConnection]:
        """A leader-only write transaction: the fence is its first statement (see the docstring)."""
        async with self._engine.begin() as conn:
            await self._fence.check(conn)
            yield conn

    async def ping(self) -> None:
        """Raises if the database cannot be reached (readiness, `inno-notify check`)."""
        async with self.read() as conn:
            await conn.execute(sa.text("SELECT 1"))

    # --- jobs and pods ------------------------------------------------------------------------

    async def upsert_jobs(self, records: Sequence[JobRecord]) -> None:
        """Stores the records as given (the caller has merged them), one statement for the batch."""
        async with self._leader_write() as conn:
            await jobs.upsert_jobs(conn, records)

    async def upsert_pods(self, records: Sequence[PodRecord]) -> None:
        async with self._leader_write() as conn:
            await jobs.upsert_pods(conn, records)

    async def get_job(self, cluster: str, uid: str) -> JobRecord | None:
        return (await self.get_jobs(cluster, [uid])).get(uid)

    async def get_jobs(self, cluster: str, uids: Sequence[str]) -> dict[str, JobRecord]:
        async with self.read() as conn:
            return await jobs.get_jobs(conn, cluster, uids)

    async def find_job(
        self, namespace: str, name: str, uid: str | None = None, *, cluster: str | None = None
    ) -> JobRecord | None:
        """The newest job (by creation time) of that name, or the one with that uid."""
        async with self.read() as conn:
            return await jobs.find_job(conn, namespace, name, uid, cluster)

    async def job_page_data(
        self, namespace: str, name: str, uid: str | None = None, *, cluster: str | None = None
    ) -> job_page.JobPageData | None:
        """A job run with its usage, advice, pods and series (its page); None if there is no such job."""
        async with self.read() as conn:
            return await job_page.job_page_data(conn, namespace, name, uid, cluster)

    async def pods_of(self, cluster: str, job_uid: str) -> list[PodRecord]:
        """The job's pods in creation order."""
        async with self.read() as conn:
            return await jobs.pods_of(conn, cluster, job_uid)

    async def pods_of_jobs(self, cluster: str, job_uids: Sequence[str]) -> dict[str, list[PodRecord]]:
        async with self.read() as conn:
            return await jobs.pods_of_jobs(conn, cluster, job_uids)

    async def job_uids_of_pods(self, cluster: str, pod_uids: Sequence[str]) -> dict[str, str]:
        async with self.read() as conn:
            return await jobs.job_uids_of_pods(conn, cluster, pod_uids)

    async def open_jobs(
        self, cluster: str, namespaces: Sequence[str] = (), *, kind: str | None = None
    ) -> list[JobRecord]:
        async with self.read() as conn:
            return await jobs.open_jobs(conn, cluster, namespaces, kind)

    @contextlib.asynccontextmanager
    async def ingest_transaction(self) -> AsyncIterator[IngestTransaction]:
        """One ingestion batch: commits when the block ends, rolls back if it raises."""
        async with self._leader_write() as conn:
            yield IngestTransaction(conn)

    async def ingest(
        self,
        job_records: Sequence[JobRecord],
        pod_records: Sequence[PodRecord],
        marks: Sequence[TerminalMark],
    ) -> int:
        """One ingestion batch in one transaction: jobs, pods, and the jobs that ended.

        Returns how many jobs were recorded as ended for the first time.
        """
        clusters = sorted({j.cluster for j in job_records} | {p.cluster for p in pod_records})
        async with self.ingest_transaction() as tx:
            return await tx.write(clusters[0] if clusters else "", job_records, pod_records, marks)

    # --- objects set aside by ingestion ---------------------------------------------------------

    async def record_rejected(self, rejections: Sequence[RejectedObject], at: datetime) -> None:
        """Records objects that could not be read or stored: one row per (cluster, kind, uid), its
        count raised each time the object is refused again (see rejected.py)."""
        if not rejections:
            return
        async with self._leader_write() as conn:
            await rejected.record(conn, rejections, at)

    async def rejected_objects(self, cluster: str | None = None, limit: int = 100) -> list[RejectedObject]:
        """The objects set aside, most recently refused first."""
        async with self.read() as conn:
            return await rejected.list_recent(conn, cluster, limit)

    async def list_jobs(
        self, filters: JobFilter, limit: int = 50, cursor: str | None = None
    ) -> tuple[list[JobRecord], str | None]:
        """A page, newest finish (else creation) first, and the next page's cursor (None on the last).

        Raises InvalidCursor for a cursor this store did not hand out.
        """
        async with self.read() as conn:
            return await jobs.list_jobs(conn, filters, limit, cursor)

    # --- the terminal transition and usage collection -----------------------------------------

    async def mark_terminal(
        self,
        cluster: str,
        uid: str,
        at: datetime,
        *,
        state: SummaryState = SummaryState.AWAITING_USAGE,
        usage_due_at: datetime | None = None,
    ) -> bool:
        """Records that the job ended; True only the first time, so its summary is planned once.

        With `state` AWAITING_USAGE the job becomes claimable by claim_usage_due from
        `usage_due_at` (default: `at`); SILENT records the end without a summary.
        """
        if state is SummaryState.AWAITING_USAGE and usage_due_at is None:
            usage_due_at = at
        elif state is not SummaryState.AWAITING_USAGE:
            usage_due_at = None
        async with self._leader_write() as conn:
            return await jobs.mark_terminal(conn, cluster, uid, at, state, usage_due_at)

    async def claim_usage(
        self,
        now: datetime,
        limit: int,
        lease_seconds: float = DEFAULT_USAGE_LEASE_SECONDS,
        *,
        cluster: str | None = None,
    ) -> UsageClaim:
        """Jobs awaiting usage whose due time has come, leased under a fresh claim token (due again
        after the lease) so that a collector that dies mid-way leaves them to the next one. A
        leader also takes at once the jobs leased in a term that ended (jobs.claim_usage_due).
        With `cluster`, only that cluster's jobs. Pass the token to the writes that settle the
        jobs (`claim=`)."""
        token = secrets.token_hex(16)
        async with self._engine.begin() as conn:
            term = await self._fence.check(conn)
            claimed = await jobs.claim_usage_due(conn, now, limit, lease_seconds, token, term, cluster)
        return UsageClaim(token, term, tuple(claimed))

    async def claim_usage_due(
        self, now: datetime, limit: int, lease_seconds: float = DEFAULT_USAGE_LEASE_SECONDS
    ) -> list[JobRecord]:
        """The jobs of `claim_usage`, for callers that do not check the claim when settling."""
        return list((await self.claim_usage(now, limit, lease_seconds)).jobs)

    async def reschedule_usage(
        self, cluster: str, uid: str, due_at: datetime, *, claim: str | None = None
    ) -> bool:
        """Sets when a job awaiting usage is next due (Prometheus not ready yet); False if not awaiting
        (or, with `claim`, no longer held by that claim)."""
        async with self._leader_write() as conn:
            return await jobs.reschedule_usage(conn, cluster, uid, due_at, claim)

    async def set_summary_state(
        self, cluster: str, uid: str, state: SummaryState, *, claim: str | None = None
    ) -> None:
        """Raises ClaimLost when `claim` no longer holds the job."""
        async with self._leader_write() as conn:
            await jobs.set_summary_state(conn, cluster, uid, state, token=claim)

    async def summary_states(self, cluster: str, uids: Sequence[str]) -> dict[str, SummaryState]:
        async with self.read() as conn:
            return await jobs.summary_states(conn, cluster, uids)

    async def summary_state(self, cluster: str, uid: str) -> SummaryState | None:
        async with self.read() as conn:
            return await jobs.summary_state(conn, cluster, uid)

    async def summarize(
        self,
        cluster: str,
        uid: str,
        notifications: Sequence[Notification],
        state: SummaryState = SummaryState.SUMMARIZED,
    ) -> int:
        """Sets the job's summary state and enqueues its notifications in one transaction.

        Returns how many notifications were new. Raises RecordNotFound if the job is not stored.
        """
        async with self._leader_write() as conn:
            await jobs.set_summary_state(conn, cluster, uid, state)
            return await outbox.enqueue(conn, notifications)

    async def family_history(
        self, cluster: str, namespace: str, family: str, before: datetime, limit: int = 20
    ) -> list[tuple[JobRecord, Usage]]:
        """Earlier measured runs of a job family, newest first (right-sizing learns from them)."""
        async with self.read() as conn:
            return await jobs.family_history(conn, cluster, namespace, family, before, limit)

    async def complete_summary(
        self,
        cluster: str,
        uid: str,
        usage: Usage,
        recommendations: Sequence[Recommendation],
        notifications: Sequence[Notification],
        state: SummaryState = SummaryState.SUMMARIZED,
        remeasure_at: datetime | None = None,
        *,
        claim: str | None = None,
        usage_series: UsageSeries | None = None,
    ) -> int:
        """Stores a job's usage (with its series over time, if given) and advice, sets its summary
        state and enqueues its notifications, all in one transaction: a summary is either wholly
        planned or not at all. Returns how many notifications were new. With state REMEASURE the job
        is measured again from `remeasure_at`. With `claim`, nothing is stored unless that usage
        claim still holds the job (ClaimLost)."""
        async with self._leader_write() as conn:
            # The claim first: a claim taken over stores nothing.
            await jobs.set_summary_state(conn, cluster, uid, state, remeasure_at, claim)
            await jobs.save_usage(conn, cluster, uid, usage)
            if usage_series is not None:
                await series.save_series(conn, cluster, uid, usage_series)
            await jobs.save_recommendations(conn, cluster, uid, recommendations)
            return await outbox.enqueue(conn, notifications)

    async def save_usage(self, cluster: str, uid: str, usage: Usage) -> None:
        async with self._leader_write() as conn:
            await jobs.save_usage(conn, cluster, uid, usage)

    async def get_usage(self, cluster: str, uid: str) -> Usage | None:
        async with self.read() as conn:
            return await jobs.get_usage(conn, cluster, uid)

    async def series_of(self, cluster: str, uids: Sequence[str]) -> dict[str, UsageSeries]:
        """The stored usage series of these jobs, by uid (the charts of a dispatch round)."""
        async with self.read() as conn:
            return await series.series_of(conn, cluster, uids)

    async def save_recommendations(self, cluster: str, uid: str, recs: Sequence[Recommendation]) -> None:
        """Replaces the job's recommendations with `recs` (kept in this order)."""
        async with self._leader_write() as conn:
            await jobs.save_recommendations(conn, cluster, uid, recs)

    async def recommendations_of(self, cluster: str, uid: str) -> list[Recommendation]:
        async with self.read() as conn:
            return await jobs.recommendations_of(conn, cluster, uid)

    # --- the live check -------------------------------------------------------------------------

    async def running_gpu_pods(
        self, cluster: str, namespaces: Sequence[str] = ()
    ) -> list[tuple[JobRecord, PodRecord]]:
        """(workload, pod) of every running pod that holds GPUs (live_queries.py)."""
        async with self.read() as conn:
            return await live_queries.running_gpu_pods(conn, cluster, namespaces)

    async def enqueue_nudges(
        self, nudges: Sequence[tuple[Sequence[Notification], tuple[str, NudgeEntry] | None]]
    ) -> int:
        """Enqueues each nudge's rows and, for a nudge whose rows were new, adds its (team, entry)
        to the nudge ledger the digest reads; one fenced transaction (the live check is leader-only
        work). Returns how many rows were new."""
        written = 0
        entries: list[tuple[str, NudgeEntry]] = []
        async with self._leader_write() as conn:
            for rows, entry in nudges:
                new = await outbox.enqueue(conn, rows)
                written += new
                if new and entry is not None:
                    entries.append(entry)
            await nudge_ledger.record(conn, entries)
        return written

    async def last_nudges(self, cluster: str, pod_uids: Sequence[str]) -> dict[str, datetime]:
        """When each of these pods was last nudged about idle GPUs; never-nudged pods are absent."""
        async with self.read() as conn:
            return await live_queries.last_nudges(conn, cluster, pod_uids)

    # --- outbox -------------------------------------------------------------------------------

    async def enqueue(self, notifications: Sequence[Notification]) -> int:
        """Inserts those whose dedup key is new; returns how many. `id` of the inputs is ignored."""
        async with self._leader_write() as conn:
            return await outbox.enqueue(conn, notifications)

    async def delivery_statuses(self, dedup_keys: Sequence[str]) -> dict[str, str]:
        """Where the given outbox rows stand (pending, sent, failed), by dedup key."""
        async with self.read() as conn:
            return await outbox.statuses(conn, dedup_keys)

    async def outbox_depth(self) -> dict[str, int]:
        """Notifications per delivery status."""
        async with self.read() as conn:
            return await outbox.depth(conn)

    async def get_notification(self, id: int) -> Notification | None:
        async with self.read() as conn:
            return await outbox.get(conn, id)

    async def list_notifications(
        self, status: DeliveryStatus | None = None, limit: int = 50, cursor: str | None = None
    ) -> tuple[list[Notification], str | None]:
        """The delivery log, newest first, and the next page's cursor (None on the last page)."""
        async with self.read() as conn:
            return await outbox.list_page(conn, status, limit, cursor)

    async def retry_notification(self, id: int, now: datetime) -> bool:
        """Re-queues a failed notification, due now with attempts reset; False unless it had failed."""
        async with self._engine.begin() as conn:
            return await outbox.retry(conn, id, now)

    # --- directory and checkpoints ------------------------------------------------------------

    async def upsert_user(self, user: DirectoryUser) -> None:
        async with self._engine.begin() as conn:
            await directory.upsert_user(conn, user)

    async def upsert_users(self, users: Sequence[DirectoryUser]) -> None:
        """Many directory entries in one transaction (the configured directory at every start)."""
        async with self._engine.begin() as conn:
            await directory.upsert_users(conn, users)

    async def get_user(self, email: str) -> DirectoryUser | None:
        async with self.read() as conn:
            return await directory.get_user(conn, email)

    async def list_users(self) -> list[DirectoryUser]:
        async with self.read() as conn:
            return await directory.list_users(conn)

    async def delete_user(self, email: str) -> bool:
        async with self._engine.begin() as conn:
            return await directory.delete_user(conn, email)

    async def directory_user(self, email: str) -> DirectoryUser | None:
        """The directory entry as the YAML file or an admin wrote it, without the person's own
        preferences (get_user applies them)."""
        async with self.read() as conn:
            return await directory.directory_user(conn, email)

    async def get_preferences(self, email: str) -> Preferences | None:
        async with self.read() as conn:
            return await preferences.get_preferences(conn, email)

    async def all_preferences(self) -> dict[str, Preferences]:
        """Everyone's own preferences, by e-mail as stored."""
        async with self.read() as conn:
            return await preferences.all_preferences(conn)

    async def change_preferences(
        self,
        email: str,
        now: datetime,
        *,
        changes: Mapping[str, Any] | None = None,
        origin: Origin | None = None,
        reset: Sequence[str] = (),
    ) -> Preferences:
        """Sets and unsets a person's preferences (the API's edit; any replica may make it)."""
        async with self._engine.begin() as conn:
            return await preferences.change_preferences(
                conn, email, now, changes=changes, origin=origin, reset=reset
            )

    @contextlib.asynccontextmanager
    async def bot_transaction(self, *, fenced: bool) -> AsyncIterator[BotTransaction]:
        """One Telegram update's reads and writes (telegram_bot.py). `fenced`: the leader's, for
        updates it polled; a webhook's request is handled by whichever replica it reached."""
        writer = self._leader_write() if fenced else self._engine.begin()
        async with writer as conn:
            yield BotTransaction(conn)

    async def telegram_offset(self, bot_id: str) -> int:
        """The first Telegram update id of that bot not handled yet."""
        async with self.read() as conn:
            return await update_offset(conn, bot_id)

    async def set_telegram_offset(self, bot_id: str, offset: int) -> None:
        """Moves the leader's update offset past updates handled (or set aside) without a transaction
        of their own."""
        async with self._leader_write() as conn:
            await BotTransaction(conn).set_offset(bot_id, offset)

    async def replace_teams(self, teams: Sequence[Team]) -> None:
        async with self._engine.begin() as conn:
            await directory.replace_teams(conn, teams)

    async def list_teams(self) -> list[Team]:
        async with self.read() as conn:
            return await directory.list_teams(conn)

    async def get_checkpoint(self, key: str) -> str | None:
        async with self.read() as conn:
            return await directory.get_checkpoint(conn, key)

    async def set_checkpoint(self, key: str, value: str) -> None:
        async with self._engine.begin() as conn:
            await directory.set_checkpoint(conn, key, value)

    # --- admin API read side --------------------------------------------------------------------

    async def usage_by_group(
        self,
        group_by: usage_queries.GroupBy,
        since: datetime | None = None,
        until: datetime | None = None,
        cluster: str | None = None,
    ) -> list[usage_queries.UsageGroup]:
        """Usage per team, owner or namespace of the jobs finished in [since, until)."""
        async with self.read() as conn:
            return await usage_queries.usage_by_group(conn, group_by, since, until, cluster)

    async def open_recommendations(
        self,
        *,
        team: str | None = None,
        owner: str | None = None,
        cluster: str | None = None,
        since: datetime | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> tuple[list[recommendation_queries.JobRecommendation], str | None]:
        """Open recommendations, largest waste first, and the next page's cursor."""
        async with self.read() as conn:
            return await recommendation_queries.open_recommendations(
                conn, team=team, owner=owner, cluster=cluster, since=since, limit=limit, cursor=cursor
            )

    # --- weekly digest ------------------------------------------------------------------------

    async def team_digest(
        self, team: str, week: str, tz: str, *, cluster: str | None = None, quota_gpus: float | None = None
    ) -> Digest:
        """A team's digest of ISO `week` in zone `tz`, aggregated by the database (digest_queries)."""
        async with self.read() as conn:
            return await digest_queries.load_digest(
                conn, team, week, tz, cluster=cluster, quota_gpus=quota_gpus
            )

    async def job_page(self, filters: JobFilter, limit: int = 50, cursor: str | None = None) -> JobPage:
        """A page of job rows with their usage and recommendations (the API's job list), newest
        finish (else creation) first. Raises InvalidCursor for a cursor this store did not hand out."""
        async with self.read() as conn:
            return await job_details.job_page(conn, filters, limit, cursor)

    async def find_job_row(
        self, namespace: str, name: str, uid: str | None = None, *, cluster: str | None = None
    ) -> JobPage:
        """The newest job of that name (or the one with that uid; of `cluster` if given) as a
        one-row page; no row if none."""
        async with self.read() as conn:
            return await job_details.find_job_row(conn, namespace, name, uid, cluster)

    async def usage_cells(
        self, since: datetime | None = None, until: datetime | None = None, cluster: str | None = None
    ) -> list[usage_queries.UsageCell]:
        """Usage per (team, owner, namespace) of the jobs finished in [since, until); every grouping
        of usage_by_group is a sum of these (usage_queries.group_cells)."""
        async with self.read() as conn:
            return await usage_queries.usage_cells(conn, since, until, cluster)

    # --- workflows, served models, pipeline events (workflows.py) ---------------------------------

    @contextlib.asynccontextmanager
    async def workflow_transaction(self) -> AsyncIterator[WorkflowTransaction]:
        """One batch of the workflow tracker: commits when the block ends, rolls back if it raises."""
        async with self._leader_write() as conn:
            yield WorkflowTransaction(conn)

    async def quiet_airflow_runs(
        self, quiet_before: datetime, limit: int = 100, *, cluster: str | None = None
    ) -> list[tuple[WorkflowRecord, list[WorkflowPod]]]:
        """Open Airflow runs none of whose pods ran since `quiet_before`, with their pods."""
        async with self.read() as conn:
            return await workflows.quiet_airflow_runs(conn, quiet_before, limit, cluster)

    async def close_airflow_run(self, record: WorkflowRecord, end: TerminalWorkflow) -> bool:
        """Stores the finished run and its end, if it is still open and quiet (see workflows.close_run)."""
        async with self._leader_write() as conn:
            return await workflows.close_run(conn, record, end)

    async def claim_workflows(
        self,
        now: datetime,
        limit: int,
        lease_seconds: float = DEFAULT_USAGE_LEASE_SECONDS,
        *,
        cluster: str | None = None,
    ) -> WorkflowClaim:
        """Ended workflows (of `cluster`; None: all) whose summary is due, leased under a fresh
        claim token and the leader's term; a leader also takes at once the workflows leased in a
        term that ended. Pass the token to the writes that settle them (`claim=`)."""
        token = secrets.token_hex(16)
        async with self._engine.begin() as conn:
            term = await self._fence.check(conn)
            claimed = await workflows.claim_due(conn, now, limit, lease_seconds, token, term, cluster)
        return WorkflowClaim(token, term, tuple(claimed))

    async def claim_workflows_due(
        self, now: datetime, limit: int, lease_seconds: float = DEFAULT_USAGE_LEASE_SECONDS
    ) -> list[WorkflowRecord]:
        """The workflows of `claim_workflows`, for callers that do not check the claim when settling."""
        return list((await self.claim_workflows(now, limit, lease_seconds)).workflows)

    async def reschedule_workflow(
        self, cluster: str, uid: str, due_at: datetime, *, claim: str | None = None
    ) -> bool:
        """False if it is not awaiting its summary (or, with `claim`, no longer held by it)."""
        async with self._leader_write() as conn:
            return await workflows.reschedule(conn, cluster, uid, due_at, claim)

    async def complete_workflow(
        self, cluster: str, uid: str, notifications: Sequence[Notification], *, claim: str | None = None
    ) -> int:
        """Marks the workflow summarized and enqueues its notifications in one transaction; returns
        how many were new. Raises ClaimLost (nothing written) when `claim` no longer holds it."""
        async with self._leader_write() as conn:
            return await workflows.complete(conn, cluster, uid, notifications, claim)

    async def workflow_state(self, cluster: str, uid: str) -> WorkflowState | None:
        async with self.read() as conn:
            return await workflows.summary_state(conn, cluster, uid)

    async def get_workflow(self, cluster: str, uid: str) -> WorkflowRecord | None:
        async with self.read() as conn:
            return (await WorkflowTransaction(conn).get_workflows(cluster, [uid])).get(uid)

    async def find_workflow(self, cluster: str, namespace: str, name: str) -> WorkflowRecord | None:
        """The newest workflow of that name in the namespace."""
        async with self.read() as conn:
            return await workflows.find_workflow(conn, cluster, namespace, name)

    async def workflow_pods(self, cluster: str, workflow_uid: str) -> list[WorkflowPod]:
        async with self.read() as conn:
            return (await workflows.pods_of_workflows(conn, cluster, [workflow_uid])).get(workflow_uid, [])

    async def step_figures(
        self, cluster: str, uids: Sequence[str]
    ) -> tuple[dict[str, Summary], dict[str, str]]:
        """Records, usage and advice of workflow steps' pods (by pod uid), and their summary states."""
        async with self.read() as conn:
            return await workflows.step_figures(conn, cluster, uids)

    async def get_event(self, key: str) -> EventRecord | None:
        """The pipeline event posted under `key`, if any."""
        async with self.read() as conn:
            return await workflows.find_event(conn, key)

    async def record_event(
        self, key: str, sender: str, title: str, notifications: Sequence[Notification], at: datetime
    ) -> EventRecord:
        """A pipeline event and its outbox rows, once per key (see workflows.record_event)."""
        async with self._engine.begin() as conn:
            return await workflows.record_event(conn, key, sender, title, notifications, at)
