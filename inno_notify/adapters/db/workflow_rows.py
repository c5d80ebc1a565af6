"""Workflows, their step pods, served models and pipeline events: queries and the JSON of the records.

A workflow row keeps its WorkflowRecord in the columns the queries need and, for the rest (steps
with their attempts, links, creator), a JSON object derived from the domain type (json_codec); a step
pod's row keeps its WorkflowPod alike. A workflow's summary bookkeeping (`summary_state`, `due_at`,
`terminal_recorded_at`) belongs to the store and is never overwritten by an upsert of the record,
like a job's. The tracker writes through a :class:`WorkflowTransaction` (one batch, one
transaction: read what is stored, merge, write); the summarizer claims due workflows with a lease,
so a summarizer that dies leaves them to the next round.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from inno_notify.adapters.db import outbox
from inno_notify.adapters.db.codec import EPOCH
from inno_notify.adapters.db.jobs import ClaimLost, summary_states
from inno_notify.adapters.db.json_codec import RowCodec
from inno_notify.adapters.db.outbox_repository import Summary, load_summaries
from inno_notify.adapters.db.sql import dialect_insert, grouped_in, newest_run, rows_in, upsert_rows
from inno_notify.adapters.db.summary_claims import Lease, SummaryColumns
from inno_notify.adapters.db.tables import jobs, served_models, workflow_pods, workflows
from inno_notify.domain.model import Notification
from inno_notify.domain.workflows import WorkflowKind, WorkflowPod, WorkflowRecord

__all__ = [
    "TerminalWorkflow",
    "WorkflowClaim",
    "WorkflowState",
    "WorkflowTransaction",
    "pod_to_json",
    "record_to_json",
]

_KEY = ("cluster", "uid")


class WorkflowState(enum.StrEnum):
    """Where a workflow stands on the way to its summary."""

    OPEN = "none"  # running (Argo), or an Airflow run that is not quiet yet
    AWAITING = "awaiting_steps"  # ended: its summary is due once its GPU steps are measured
    SUMMARIZED = "summarized"  # its notifications are in the outbox
    SILENT = "silent"  # ended before the catch-up window: recorded, not summarized


# --- the records as rows ----------------------------------------------------------------------------
# A field is the column of the same name; the fields without a column of their own are the JSON
# object in `record` (json_codec.RowCodec), keyed by field name as the store always wrote them.

_WORKFLOWS = RowCodec(WorkflowRecord, workflows, rest="record")
_PODS = RowCodec(WorkflowPod, workflow_pods, rest="record")
# The summary claim's columns (summary_claims.py).
_SUMMARY = SummaryColumns(workflows, workflows.c.due_at, workflows.c.claim_token, workflows.c.claim_term)


def record_to_json(record: WorkflowRecord) -> dict[str, Any]:
    """The JSON a workflow row keeps of its record (what the tracker bounds the size of)."""
    return cast(dict[str, Any], _WORKFLOWS.to_row(record)["record"])


def pod_to_json(pod: WorkflowPod) -> dict[str, Any]:
    """The JSON a step pod's row keeps of its record."""
    return cast(dict[str, Any], _PODS.to_row(pod)["record"])


def _workflow_row(record: WorkflowRecord, quiet_since: datetime | None) -> dict[str, Any]:
    sort_at = record.finished_at or record.created_at or EPOCH  # as codec.job_sort_at
    return {**_WORKFLOWS.to_row(record), "quiet_since": quiet_since, "sort_at": sort_at}


_WORKFLOW_RECORD_COLUMNS = [
    c for c in (*_WORKFLOWS.columns, "record", "quiet_since", "sort_at") if c not in _KEY
]


# --- the tracker's transaction --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TerminalWorkflow:
    """A workflow's end to record: its summary is due at `due_at` (AWAITING), or never (SILENT)."""

    uid: str
    at: datetime
    state: WorkflowState
    due_at: datetime | None


class WorkflowTransaction:
    """The reads and writes of one tracker batch, on one connection, in one transaction."""

    def __init__(self, conn: AsyncConnection) -> None:
        self._conn = conn

    async def get_workflows(self, cluster: str, uids: Sequence[str]) -> dict[str, WorkflowRecord]:
        query = sa.select(workflows).where(workflows.c.cluster == cluster)
        rows = await rows_in(self._conn, query, workflows.c.uid, uids)
        return {row["uid"]: _WORKFLOWS.from_row(row) for row in rows}

    async def pods_of_workflows(self, cluster: str, uids: Sequence[str]) -> dict[str, list[WorkflowPod]]:
        return await pods_of_workflows(self._conn, cluster, uids)

    async def open_workflows(self, cluster: str, kind: WorkflowKind) -> list[WorkflowRecord]:
        rows = await self._conn.execute(
            sa.select(workflows).where(
                workflows.c.cluster == cluster,
                workflows.c.kind == kind.value,
                workflows.c.summary_state == WorkflowState.OPEN.value,
            )
        )
        return [_WORKFLOWS.from_row(row) for row in rows.mappings()]

    async def write(
        self,
        records: Sequence[tuple[WorkflowRecord, datetime | None]],
        pods: Sequence[WorkflowPod],
        ends: Sequence[TerminalWorkflow],
        cluster: str,
    ) -> int:
        """Upserts the workflows (each with its quiet time) and pods, records the ends; returns how
        many workflows ended for the first time."""
        rows = [_workflow_row(r, quiet) for r, quiet in records]
        await upsert_rows(self._conn, workflows, _KEY, rows, _WORKFLOW_RECORD_COLUMNS)
        await upsert_rows(self._conn, workflow_pods, _KEY, [_PODS.to_row(p) for p in pods])
        return await _mark_ended(self._conn, cluster, ends) if ends else 0

    async def adopt_steps(self, cluster: str, steps: Mapping[str, tuple[str, str | None]]) -> None:
        """Step pods kept as runs of their own (a GPU step is measured on its own) become steps of
        their workflow (pod uid → (workflow uid, its owner)): `parent_uid` says so (their summary is
        the workflow's), and where they name no owner they take the workflow's, so their GPU time
        is that person's in the usage API and the digests."""
        if not steps:
            return
        stmt = (
            sa.update(jobs)
            .where(jobs.c.cluster == cluster, jobs.c.uid == sa.bindparam("pod_uid"))
            .values(
                parent_uid=sa.bindparam("parent"),
                owner=sa.func.coalesce(jobs.c.owner, sa.bindparam("inherited", type_=sa.String())),
            )
        )
        rows = [
            {"pod_uid": uid, "parent": parent, "inherited": owner} for uid, (parent, owner) in steps.items()
        ]
        await self._conn.execute(stmt, rows)

    async def served_model(self, cluster: str, uid: str) -> tuple[bool, str | None]:
        """(seen before, revision last recorded) of an InferenceService."""
        row = (
            await self._conn.execute(
                sa.select(served_models.c.revision).where(
                    served_models.c.cluster == cluster, served_models.c.uid == uid
                )
            )
        ).first()
        return (False, None) if row is None else (True, row.revision)

    async def record_served_model(
        self,
        cluster: str,
        uid: str,
        namespace: str,
        name: str,
        revision: str | None,
        announced: bool,
        at: datetime,
        notifications: Sequence[Notification],
    ) -> int:
        """Records the revision (keeping the last one recorded when `revision` is None) and enqueues
        the announcement; returns how many notifications were new."""
        stmt = dialect_insert(self._conn, served_models).values(
            cluster=cluster,
            uid=uid,
            namespace=namespace,
            name=name,
            revision=revision,
            announced=announced,
            recorded_at=at,
        )
        update: dict[str, Any] = {"namespace": stmt.excluded.namespace, "name": stmt.excluded.name}
        if revision is not None:
            update.update(
                revision=stmt.excluded.revision,
                announced=stmt.excluded.announced,
                recorded_at=stmt.excluded.recorded_at,
            )
        await self._conn.execute(stmt.on_conflict_do_update(index_elements=list(_KEY), set_=update))
        return await outbox.enqueue(self._conn, notifications)


async def pods_of_workflows(
    conn: AsyncConnection, cluster: str, uids: Sequence[str]
) -> dict[str, list[WorkflowPod]]:
    query = sa.select(workflow_pods).where(workflow_pods.c.cluster == cluster)
    return await grouped_in(conn, query, workflow_pods.c.workflow_uid, uids, _PODS.from_row)


async def _mark_ended(conn: AsyncConnection, cluster: str, ends: Sequence[TerminalWorkflow]) -> int:
    return await _SUMMARY.record_ends(
        conn, cluster, {end.uid: (end.at, end.state.value, end.due_at) for end in ends}
    )


# --- the summarizer's queries -----------------------------------------------------------------------


async def quiet_airflow_runs(
    conn: AsyncConnection, quiet_before: datetime, limit: int, cluster: str | None = None
) -> list[tuple[WorkflowRecord, list[WorkflowPod]]]:
    """Open Airflow runs whose last pod stopped before `quiet_before`, with their pods (of one
    cluster, or of every cluster with None)."""
    rows = (
        (
            await conn.execute(
                sa.select(workflows)
                .where(
                    workflows.c.kind == WorkflowKind.AIRFLOW.value,
                    workflows.c.summary_state == WorkflowState.OPEN.value,
                    workflows.c.quiet_since <= quiet_before,
                    *([] if cluster is None else [workflows.c.cluster == cluster]),
                )
                .order_by(workflows.c.quiet_since)
                .limit(limit)
            )
        )
        .mappings()
        .all()
    )
    found: list[tuple[WorkflowRecord, list[WorkflowPod]]] = []
    by_cluster: dict[str, list[WorkflowRecord]] = {}
    for row in rows:
        record = _WORKFLOWS.from_row(row)
        by_cluster.setdefault(record.cluster, []).append(record)
    for cluster, records in by_cluster.items():
        pods = await pods_of_workflows(conn, cluster, [r.uid for r in records])
        found.extend((record, pods.get(record.uid, [])) for record in records)
    return found


async def close_run(conn: AsyncConnection, record: WorkflowRecord, end: TerminalWorkflow) -> bool:
    """Stores a finished Airflow run and records its end, if it is still open; False otherwise (a
    new pod of the run arrived meanwhile, or another round closed it)."""
    row = _workflow_row(record, None)
    values = {c: row[c] for c in _WORKFLOW_RECORD_COLUMNS if c != "quiet_since"}
    result = await conn.execute(
        sa.update(workflows)
        .where(
            workflows.c.cluster == record.cluster,
            workflows.c.uid == record.uid,
            workflows.c.summary_state == WorkflowState.OPEN.value,
            workflows.c.quiet_since.is_not(None),
        )
        .values(**values)
    )
    if result.rowcount != 1:
        return False
    return await _mark_ended(conn, record.cluster, [end]) == 1


@dataclass(frozen=True, slots=True)
class WorkflowClaim:
    """Workflows whose summary is due, leased under `token` in leadership `term` (None: no election)."""

    token: str
    term: int | None
    workflows: tuple[WorkflowRecord, ...] = ()


async def claim_due(conn: AsyncConnection, lease: Lease) -> list[WorkflowRecord]:
    """Takes `lease` of the workflows whose summary is due (due again after it), as job usage
    claims do (SummaryColumns.lease_due)."""
    claim = _SUMMARY.lease_due([WorkflowState.AWAITING.value], lease)
    result = await conn.execute(claim)
    return [_WORKFLOWS.from_row(row) for row in result.mappings()]


async def reschedule(
    conn: AsyncConnection, cluster: str, uid: str, due_at: datetime, token: str | None = None
) -> bool:
    """Sets when an ended workflow's summary is next due; False if it is not awaiting it (or, with
    `token`, no longer held by that claim)."""
    result = await conn.execute(
        sa.update(workflows)
        .where(*_SUMMARY.held(cluster, uid, token), workflows.c.summary_state == WorkflowState.AWAITING.value)
        .values(due_at=due_at)
    )
    return bool(result.rowcount == 1)


async def complete(
    conn: AsyncConnection,
    cluster: str,
    uid: str,
    notifications: Sequence[Notification],
    token: str | None = None,
) -> int:
    """Marks the workflow summarized and enqueues its notifications; raises ClaimLost (nothing
    written) when `token` no longer holds it."""
    result = await conn.execute(
        sa.update(workflows)
        .where(*_SUMMARY.held(cluster, uid, token))
        .values(summary_state=WorkflowState.SUMMARIZED.value, due_at=None)
    )
    if token is not None and result.rowcount != 1:
        raise ClaimLost(f"workflow {cluster}/{uid}: its summary claim was taken over")
    return await outbox.enqueue(conn, notifications)


async def summary_state(conn: AsyncConnection, cluster: str, uid: str) -> WorkflowState | None:
    value = (
        await conn.execute(
            sa.select(workflows.c.summary_state).where(workflows.c.cluster == cluster, workflows.c.uid == uid)
        )
    ).scalar()
    return None if value is None else WorkflowState(value)


async def step_figures(
    conn: AsyncConnection, cluster: str, uids: Sequence[str]
) -> tuple[dict[str, Summary], dict[str, str]]:
    """The GPU step pods' records, usage and advice, and their summary states, by pod uid."""
    if not uids:
        return {}, {}
    found = await load_summaries(conn, [(cluster, uid) for uid in uids])
    states = await summary_states(conn, cluster, uids)
    return {uid: summary for (_, uid), summary in found.items()}, {u: s.value for u, s in states.items()}


async def find_workflow(
    conn: AsyncConnection, cluster: str | None, namespace: str, name: str, uid: str | None = None
) -> WorkflowRecord | None:
    """The newest workflow of that name in the namespace (of any cluster when `cluster` is None),
    or the one with that uid."""
    row = await newest_run(conn, workflows, namespace, name, uid, cluster)
    return None if row is None else _WORKFLOWS.from_row(row)
