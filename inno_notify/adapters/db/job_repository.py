"""Jobs and pods: ingestion batches, reads, the objects set aside, and each job's summary state.

`Store.jobs`. Ingestion writes thousands of records per statement (an IngestTransaction per
batch, never one commit per row). A finished job is claimed for usage collection under a claim
token and settled by `complete_summary`, which stores its usage, series and advice, sets its
summary state and enqueues its notifications in one transaction: a summary is either wholly
planned or not at all. Leader-only writes are fenced (transactions.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncConnection

from inno_notify.adapters.db import adoption as adoption_queries
from inno_notify.adapters.db import job_details, job_page, jobs, outbox, rejected, series, usage_round
from inno_notify.adapters.db.job_details import JobPage
from inno_notify.adapters.db.jobs import JobFilter, SummaryState, TerminalMark, UsageClaim
from inno_notify.adapters.db.summary_claims import Lease
from inno_notify.adapters.db.transactions import DEFAULT_USAGE_LEASE_SECONDS, Repository
from inno_notify.adapters.db.usage_round import JobSummary, RoundReads, RunsAsked
from inno_notify.domain.adoption import Adoption
from inno_notify.domain.model import (
    JobRecord,
    Notification,
    PodRecord,
    Recommendation,
    RejectedObject,
    Usage,
    UsageSeries,
)


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

    async def runs_of(self, cluster: str, uids: Sequence[str]) -> dict[str, str]:
        """uid -> its run, for those of `uids` that are links to one (domain.kinds.Link)."""
        return await jobs.runs_of(self._conn, cluster, uids)

    async def save_links(
        self, cluster: str, links: Mapping[str, str], moves: Mapping[str, str], now: datetime
    ) -> None:
        """Records the links (uid -> parent) and moves the pods stored under a link to its run
        (`moves`: link uid -> run uid)."""
        await jobs.save_links(self._conn, cluster, links, now)
        await jobs.adopt_pods(self._conn, cluster, moves)

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


class JobRepository(Repository):
    """Jobs and pods of the watched clusters (see the module docstring)."""

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

    async def pods_of_jobs(self, cluster: str, job_uids: Sequence[str]) -> dict[str, list[PodRecord]]:
        async with self.read() as conn:
            return await jobs.pods_of_jobs(conn, cluster, job_uids)

    async def stored_versions(self, cluster: str) -> dict[str, str]:
        """uid → the resourceVersion its job or pod record was written from (a restart's relist
        skips what is stored as it is)."""
        async with self.read() as conn:
            return await jobs.stored_versions(conn, cluster)

    @contextlib.asynccontextmanager
    async def ingest_transaction(self) -> AsyncIterator[IngestTransaction]:
        """One ingestion batch: commits when the block ends, rolls back if it raises."""
        async with self._leader_write() as conn:
            yield IngestTransaction(conn)

    async def record_rejected(self, rejections: Sequence[RejectedObject], at: datetime) -> None:
        """Records objects that could not be read or stored: one row per (cluster, kind, uid), its
        count raised each time the object is refused again (see rejected.py)."""
        if not rejections:
            return
        async with self._leader_write() as conn:
            await rejected.record(conn, rejections, at)

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
        async with self._claim_write() as (conn, token, term):
            claimed = await jobs.claim_usage_due(conn, Lease(now, limit, lease_seconds, token, term, cluster))
        return UsageClaim(token, term, tuple(claimed))

    async def reschedule_usage(
        self, cluster: str, uid: str, due_at: datetime, *, claim: str | None = None
    ) -> bool:
        """Sets when a job awaiting usage is next due (Prometheus not ready yet); False if not awaiting
        (or, with `claim`, no longer held by that claim)."""
        return await self._settling_write(
            lambda conn: jobs.reschedule_usage(conn, cluster, uid, due_at, claim)
        )

    async def release_usage(self, cluster: str, uids: Sequence[str], due_at: datetime, *, claim: str) -> int:
        """Ends `claim` on those of the jobs (of `cluster`) it still holds, due again at `due_at`
        rather than when the lease ends: a round that could not settle them hands them to the next
        one. Returns how many it released; the others were settled, or taken by another claim."""
        return await self._settling_write(lambda conn: jobs.release_usage(conn, cluster, uids, due_at, claim))

    async def set_summary_state(
        self, cluster: str, uid: str, state: SummaryState, *, claim: str | None = None
    ) -> None:
        """Raises ClaimLost when `claim` no longer holds the job."""
        await self._settling_write(
            lambda conn: jobs.set_summary_state(conn, cluster, uid, state, token=claim)
        )

    async def summary_states(self, cluster: str, uids: Sequence[str]) -> dict[str, SummaryState]:
        async with self.read() as conn:
            return await jobs.summary_states(conn, cluster, uids)

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
        adoption: Adoption | None = None,
        chart: bytes | None = None,
    ) -> int:
        """Stores a job's usage (with its series over time and the chart drawn from it, if given)
        and advice, sets its summary state and enqueues its notifications, all in one transaction:
        a summary is either wholly planned or not at all. Returns how many notifications were new.
        With state REMEASURE the job is measured again from `remeasure_at`. With `claim`, nothing
        is stored unless that usage claim still holds the job (ClaimLost). `adoption` (the run
        judged against its family's previous advice) is stored with it, once (adoption.py). A lost
        connection is tried once more on a fresh one (Repository._settling_write): the claim check
        makes that safe."""

        async def write(conn: AsyncConnection) -> int:
            # The claim first: a claim taken over (or ended by a try that committed unseen) stores nothing.
            await jobs.set_summary_state(conn, cluster, uid, state, remeasure_at, claim)
            # The usage and the advice, with the job row's copies of both in one update of it.
            await jobs.save_usage(conn, cluster, uid, usage, recommendations)
            if usage_series is not None:
                await series.save_series(conn, cluster, uid, usage_series, chart)
            if adoption is not None:
                await adoption_queries.record(conn, adoption)
            return await outbox.enqueue(conn, notifications)

        return await self._settling_write(write)

    async def read_round(self, cluster: str, uids: Sequence[str], asks: Sequence[RunsAsked]) -> RoundReads:
        """Everything a usage round reads for its jobs (`uids`) before it computes: their summary
        states and pods, and each ask's family runs (with their pods or advice), on one connection
        in a fixed number of statements (usage_round.py)."""
        async with self.read() as conn:
            return await usage_round.read_round(conn, cluster, uids, asks)

    async def complete_summaries(
        self, cluster: str, summaries: Sequence[JobSummary], *, claim: str | None = None
    ) -> dict[str, int]:
        """complete_summary for many jobs in one transaction: all are stored or none (ClaimLost
        when `claim` no longer holds one of them). Returns how many notifications of each job were
        new. A lost connection is tried once more on a fresh one, as complete_summary is."""
        return await self._settling_write(
            lambda conn: usage_round.write_summaries(conn, cluster, summaries, claim)
        )
