"""Workflows, their step pods, served models and pipeline events: queries and the JSON of the records.

A workflow row keeps its whole WorkflowRecord as JSON (steps with their attempts, owner, links) next
to the columns the queries need; its summary bookkeeping (`summary_state`, `due_at`,
`terminal_recorded_at`) belongs to the store and is never overwritten by an upsert of the record,
like a job's. The tracker writes through a :class:`WorkflowTransaction` (one batch, one
transaction: read what is stored, merge, write); the summarizer claims due workflows with a lease,
so a summarizer that dies leaves them to the next round.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from inno_notify.adapters.db import outbox
from inno_notify.adapters.db.codec import Row, parse_iso
from inno_notify.adapters.db.jobs import ClaimLost, summary_states
from inno_notify.adapters.db.leases import taken_over
from inno_notify.adapters.db.outbox_repository import Summary, load_summaries
from inno_notify.adapters.db.sql import chunks, dialect_insert, last_per_key, upsert
from inno_notify.adapters.db.tables import jobs, served_models, workflow_pods, workflows
from inno_notify.domain.model import JobStatus, Link, Notification, NotifyMode
from inno_notify.domain.workflows import (
    AttemptRecord,
    Creator,
    StepRecord,
    WorkflowKind,
    WorkflowPod,
    WorkflowRecord,
)

__all__ = [
    "TerminalWorkflow",
    "WorkflowClaim",
    "WorkflowState",
    "WorkflowTransaction",
    "pod_from_json",
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


# --- the JSON of the records ----------------------------------------------------------------------


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _dt(value: str | None) -> datetime | None:
    return None if value is None else parse_iso(value)


def _links_json(links: Sequence[Link]) -> list[dict[str, str]]:
    return [{"title": link.title, "url": link.url} for link in links]


def _links(data: Sequence[Mapping[str, str]] | None) -> tuple[Link, ...]:
    return tuple(Link(item["title"], item["url"]) for item in data or ())


def _attempt_json(attempt: AttemptRecord) -> dict[str, Any]:
    return {
        "key": attempt.key,
        "phase": attempt.phase,
        "started_at": _iso(attempt.started_at),
        "finished_at": _iso(attempt.finished_at),
        "exit_code": attempt.exit_code,
        "message": attempt.message,
        "pod_name": attempt.pod_name,
    }


def _attempt(data: Mapping[str, Any]) -> AttemptRecord:
    return AttemptRecord(
        key=data["key"],
        phase=data["phase"],
        started_at=_dt(data.get("started_at")),
        finished_at=_dt(data.get("finished_at")),
        exit_code=data.get("exit_code"),
        message=data.get("message"),
        pod_name=data.get("pod_name"),
    )


def record_to_json(record: WorkflowRecord) -> dict[str, Any]:
    creator = record.creator
    return {
        "reason": record.reason,
        "notify": record.notify.value,
        "channels": None if record.channels is None else list(record.channels),
        "steps": [
            {
                "name": step.name,
                "phase": step.phase,
                "template": step.template,
                "attempts": [_attempt_json(a) for a in step.attempts],
                "attempts_dropped": step.attempts_dropped,
            }
            for step in record.steps
        ],
        "steps_dropped": record.steps_dropped,
        "links": _links_json(record.links),
        "resource_version": record.resource_version,
        "creator": None
        if creator is None
        else {
            "subject": creator.subject,
            "email": creator.email,
            "preferred_username": creator.preferred_username,
        },
    }


def _record_from_row(row: Row) -> WorkflowRecord:
    data = row["record"]
    creator = data.get("creator")
    return WorkflowRecord(
        cluster=row["cluster"],
        uid=row["uid"],
        kind=WorkflowKind(row["kind"]),
        namespace=row["namespace"],
        name=row["name"],
        status=JobStatus(row["status"]),
        run_id=row["run_id"],
        reason=data.get("reason"),
        owner=row["owner"],
        team=row["team"],
        notify=NotifyMode(data.get("notify", NotifyMode.ALWAYS.value)),
        channels=None if data.get("channels") is None else tuple(data["channels"]),
        created_at=row["created_at"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        steps=tuple(
            StepRecord(
                name=step["name"],
                phase=step["phase"],
                template=step.get("template"),
                attempts=tuple(_attempt(a) for a in step.get("attempts", ())),
                attempts_dropped=step.get("attempts_dropped", 0),
            )
            for step in data.get("steps", ())
        ),
        steps_dropped=data.get("steps_dropped", 0),
        links=_links(data.get("links")),
        resource_version=data.get("resource_version"),
        creator=None if creator is None else Creator(**creator),
    )


def _workflow_row(record: WorkflowRecord, quiet_since: datetime | None) -> dict[str, Any]:
    return {
        "cluster": record.cluster,
        "uid": record.uid,
        "kind": record.kind.value,
        "namespace": record.namespace,
        "name": record.name,
        "run_id": record.run_id,
        "status": record.status.value,
        "owner": record.owner,
        "team": record.team,
        "created_at": record.created_at,
        "started_at": record.started_at,
        "finished_at": record.finished_at,
        "record": record_to_json(record),
        "quiet_since": quiet_since,
    }


_WORKFLOW_RECORD_COLUMNS = [
    c for c in _workflow_row(WorkflowRecord("", "", WorkflowKind.ARGO, "", ""), None) if c not in _KEY
]


def pod_to_json(pod: WorkflowPod) -> dict[str, Any]:
    return {
        "kind": pod.kind.value,
        "workflow_name": pod.workflow_name,
        "step_key": pod.step_key,
        "step": pod.step,
        "attempt": pod.attempt,
        "run_id": pod.run_id,
        "phase": pod.phase,
        "created_at": _iso(pod.created_at),
        "started_at": _iso(pod.started_at),
        "finished_at": _iso(pod.finished_at),
        "deleted_at": _iso(pod.deleted_at),
        "exit_code": pod.exit_code,
        "exit_reason": pod.exit_reason,
        "gpus": pod.gpus,
        "owner": pod.owner,
        "team": pod.team,
        "notify": pod.notify.value,
        "channels": None if pod.channels is None else list(pod.channels),
        "links": _links_json(pod.links),
    }


def pod_from_json(row: Row) -> WorkflowPod:
    data = row["record"]
    return WorkflowPod(
        cluster=row["cluster"],
        uid=row["uid"],
        namespace=row["namespace"],
        name=row["name"],
        kind=WorkflowKind(data["kind"]),
        workflow_uid=row["workflow_uid"],
        workflow_name=data["workflow_name"],
        step_key=data["step_key"],
        step=data["step"],
        attempt=data.get("attempt", 1),
        run_id=data.get("run_id"),
        phase=data.get("phase", "Pending"),
        created_at=_dt(data.get("created_at")),
        started_at=_dt(data.get("started_at")),
        finished_at=_dt(data.get("finished_at")),
        deleted_at=_dt(data.get("deleted_at")),
        exit_code=data.get("exit_code"),
        exit_reason=data.get("exit_reason"),
        gpus=float(data.get("gpus", 0.0)),
        owner=data.get("owner"),
        team=data.get("team"),
        notify=NotifyMode(data.get("notify", NotifyMode.ALWAYS.value)),
        channels=None if data.get("channels") is None else tuple(data["channels"]),
        links=_links(data.get("links")),
    )


def _pod_row(pod: WorkflowPod) -> dict[str, Any]:
    return {
        "cluster": pod.cluster,
        "uid": pod.uid,
        "workflow_uid": pod.workflow_uid,
        "namespace": pod.namespace,
        "name": pod.name,
        "record": pod_to_json(pod),
    }


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
        found: dict[str, WorkflowRecord] = {}
        for chunk in chunks(list(dict.fromkeys(uids))):
            rows = await self._conn.execute(
                sa.select(workflows).where(workflows.c.cluster == cluster, workflows.c.uid.in_(chunk))
            )
            found.update({row["uid"]: _record_from_row(row) for row in rows.mappings()})
        return found

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
        return [_record_from_row(row) for row in rows.mappings()]

    async def write(
        self,
        records: Sequence[tuple[WorkflowRecord, datetime | None]],
        pods: Sequence[WorkflowPod],
        ends: Sequence[TerminalWorkflow],
        cluster: str,
    ) -> int:
        """Upserts the workflows (each with its quiet time) and pods, records the ends; returns how
        many workflows ended for the first time."""
        if records:
            rows = last_per_key([_workflow_row(r, quiet) for r, quiet in records], _KEY)
            await self._conn.execute(upsert(self._conn, workflows, _KEY, _WORKFLOW_RECORD_COLUMNS), rows)
        if pods:
            rows = last_per_key([_pod_row(p) for p in pods], _KEY)
            columns = [c for c in rows[0] if c not in _KEY]
            await self._conn.execute(upsert(self._conn, workflow_pods, _KEY, columns), rows)
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
    found: dict[str, list[WorkflowPod]] = {}
    for chunk in chunks(list(dict.fromkeys(uids))):
        rows = await conn.execute(
            sa.select(workflow_pods).where(
                workflow_pods.c.cluster == cluster, workflow_pods.c.workflow_uid.in_(chunk)
            )
        )
        for row in rows.mappings():
            found.setdefault(row["workflow_uid"], []).append(pod_from_json(row))
    return found


async def _mark_ended(conn: AsyncConnection, cluster: str, ends: Sequence[TerminalWorkflow]) -> int:
    by_uid = {end.uid: end for end in ends}
    fresh: list[str] = []
    for chunk in chunks(list(by_uid)):
        result = await conn.execute(
            sa.select(workflows.c.uid)
            .where(
                workflows.c.cluster == cluster,
                workflows.c.uid.in_(chunk),
                workflows.c.terminal_recorded_at.is_(None),
            )
            .with_for_update()
        )
        fresh.extend(result.scalars())
    if not fresh:
        return 0
    await conn.execute(
        sa.update(workflows)
        .where(workflows.c.cluster == cluster, workflows.c.uid == sa.bindparam("b_uid"))
        .values(
            terminal_recorded_at=sa.bindparam("b_at"),
            summary_state=sa.bindparam("b_state"),
            due_at=sa.bindparam("b_due"),
        ),
        [
            {
                "b_uid": uid,
                "b_at": by_uid[uid].at,
                "b_state": by_uid[uid].state.value,
                "b_due": by_uid[uid].due_at,
            }
            for uid in fresh
        ],
    )
    return len(fresh)


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
        record = _record_from_row(row)
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


async def claim_due(
    conn: AsyncConnection,
    now: datetime,
    limit: int,
    lease_seconds: float,
    token: str | None = None,
    term: int | None = None,
    cluster: str | None = None,
) -> list[WorkflowRecord]:
    """Leases the due workflows (of `cluster`; None: every cluster) under `token`, due again after
    the lease. A claimer with a `term` also takes, at once, workflows leased under a term no live
    lease holds any more (leases.taken_over), as job usage claims do."""
    claimable = workflows.c.due_at <= now
    if term is not None:
        claimable = sa.or_(claimable, taken_over(workflows.c.claim_token, workflows.c.claim_term, term))
    due = (
        sa.select(workflows.c.cluster, workflows.c.uid)
        .where(
            workflows.c.summary_state == WorkflowState.AWAITING.value,
            claimable,
            *([] if cluster is None else [workflows.c.cluster == cluster]),
        )
        .order_by(workflows.c.due_at, workflows.c.cluster, workflows.c.uid)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    result = await conn.execute(
        sa.update(workflows)
        .where(sa.tuple_(workflows.c.cluster, workflows.c.uid).in_(due))
        .values(due_at=now + timedelta(seconds=lease_seconds), claim_token=token, claim_term=term)
        .returning(*workflows.c)
    )
    return [_record_from_row(row) for row in result.mappings()]


def _claim_held(cluster: str, uid: str, token: str | None) -> list[sa.ColumnElement[bool]]:
    held = [workflows.c.cluster == cluster, workflows.c.uid == uid]
    if token is not None:
        held.append(workflows.c.claim_token == token)
    return held


async def reschedule(
    conn: AsyncConnection, cluster: str, uid: str, due_at: datetime, token: str | None = None
) -> bool:
    """Sets when an ended workflow's summary is next due; False if it is not awaiting it (or, with
    `token`, no longer held by that claim)."""
    result = await conn.execute(
        sa.update(workflows)
        .where(*_claim_held(cluster, uid, token), workflows.c.summary_state == WorkflowState.AWAITING.value)
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
        .where(*_claim_held(cluster, uid, token))
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
    query = sa.select(workflows).where(workflows.c.namespace == namespace, workflows.c.name == name)
    if cluster is not None:
        query = query.where(workflows.c.cluster == cluster)
    if uid is not None:
        query = query.where(workflows.c.uid == uid)
    query = query.order_by(workflows.c.created_at.desc().nulls_last(), workflows.c.uid.desc()).limit(1)
    row = (await conn.execute(query)).mappings().first()
    return None if row is None else _record_from_row(row)
