"""Workflows (Argo, Airflow), served models and pipeline events (workflow_rows.py).

`Store.workflows`: the workflow tracker's batches, the claim and completion of workflow
summaries, and pipeline events posted to the API (each recorded once per key with its outbox
rows). Leader-only writes are fenced (transactions.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from datetime import datetime

from inno_notify.adapters.db import workflow_rows
from inno_notify.adapters.db.outbox_repository import Summary
from inno_notify.adapters.db.summary_claims import Lease
from inno_notify.adapters.db.transactions import DEFAULT_USAGE_LEASE_SECONDS, Repository
from inno_notify.adapters.db.workflow_rows import (
    TerminalWorkflow,
    WorkflowClaim,
    WorkflowState,
    WorkflowTransaction,
)
from inno_notify.domain.model import Notification
from inno_notify.domain.workflows import WorkflowPod, WorkflowRecord


class WorkflowRepository(Repository):
    """Workflows, their pods and summaries."""

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
            return await workflow_rows.quiet_airflow_runs(conn, quiet_before, limit, cluster)

    async def close_airflow_run(self, record: WorkflowRecord, end: TerminalWorkflow) -> bool:
        """Stores the finished run and its end, if it is still open and quiet (workflow_rows.close_run)."""
        async with self._leader_write() as conn:
            return await workflow_rows.close_run(conn, record, end)

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
        async with self._claim_write() as (conn, token, term):
            lease = Lease(now, limit, lease_seconds, token, term, cluster)
            claimed = await workflow_rows.claim_due(conn, lease)
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
            return await workflow_rows.reschedule(conn, cluster, uid, due_at, claim)

    async def complete_workflow(
        self, cluster: str, uid: str, notifications: Sequence[Notification], *, claim: str | None = None
    ) -> int:
        """Marks the workflow summarized and enqueues its notifications in one transaction; returns
        how many were new. Raises ClaimLost (nothing written) when `claim` no longer holds it."""
        async with self._leader_write() as conn:
            return await workflow_rows.complete(conn, cluster, uid, notifications, claim)

    async def workflow_state(self, cluster: str, uid: str) -> WorkflowState | None:
        async with self.read() as conn:
            return await workflow_rows.summary_state(conn, cluster, uid)

    async def find_workflow(self, cluster: str, namespace: str, name: str) -> WorkflowRecord | None:
        """The newest workflow of that name in the namespace."""
        async with self.read() as conn:
            return await workflow_rows.find_workflow(conn, cluster, namespace, name)

    async def workflow_page_data(
        self, namespace: str, name: str, uid: str | None = None
    ) -> tuple[WorkflowRecord, list[WorkflowPod], dict[str, Summary]] | None:
        """A workflow run (the newest of that name, or the one with that uid, of any cluster) with
        its pods and its GPU steps' figures (its page); None if there is no such workflow."""
        async with self.read() as conn:
            record = await workflow_rows.find_workflow(conn, None, namespace, name, uid)
            if record is None:
                return None
            found = await workflow_rows.pods_of_workflows(conn, record.cluster, [record.uid])
            pods = found.get(record.uid, [])
            figures, _ = await workflow_rows.step_figures(
                conn, record.cluster, [p.uid for p in pods if p.gpus > 0]
            )
            return record, pods, figures

    async def workflow_pods(self, cluster: str, workflow_uid: str) -> list[WorkflowPod]:
        async with self.read() as conn:
            return (await workflow_rows.pods_of_workflows(conn, cluster, [workflow_uid])).get(
                workflow_uid, []
            )

    async def step_figures(
        self, cluster: str, uids: Sequence[str]
    ) -> tuple[dict[str, Summary], dict[str, str]]:
        """Records, usage and advice of workflow steps' pods (by pod uid), and their summary states."""
        async with self.read() as conn:
            return await workflow_rows.step_figures(conn, cluster, uids)
