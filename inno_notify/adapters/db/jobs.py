"""Queries on jobs, their pods, usage and recommendations, each on a connection the caller owns.

The caller (the Store) decides the transaction; these functions only build and run statements, so
that one transaction can combine them (a job's summary state and its outbox rows, for instance).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from inno_notify.adapters.db import codec
from inno_notify.adapters.db.leases import FencedOut
from inno_notify.adapters.db.sql import chunks, grouped_in, newest_run, rows_in, upsert_rows
from inno_notify.adapters.db.summary_claims import End, Lease, SummaryColumns
from inno_notify.adapters.db.tables import jobs, pods, recommendations, usage, workload_links
from inno_notify.domain.kinds import LINK_DEPTH
from inno_notify.domain.model import JobRecord, JobStatus, PodRecord, Recommendation, Usage

_JOB_KEY = ("cluster", "uid")
# What an upsert of a JobRecord may overwrite; the summary bookkeeping columns belong to the store.
_JOB_RECORD_COLUMNS = tuple(codec.job_to_row(JobRecord(cluster="", uid="", namespace="", name="")))
_POD_RECORD_COLUMNS = tuple(
    codec.pod_to_row(
        PodRecord(cluster="", uid="", namespace="", name="", job_uid=None, phase="", created_at=None)
    )
)


class SummaryState(enum.StrEnum):
    """Where a job stands on the way to its summary."""

    NONE = "none"  # not finished, or finished but not yet recorded as terminal
    AWAITING_USAGE = "awaiting_usage"  # finished; usage collection pending (see claim_usage_due)
    SUMMARIZED = "summarized"  # its notifications are in the outbox
    # Summarized with figures missing (Prometheus was away); measured again until it answers.
    REMEASURE = "remeasure"
    SILENT = "silent"  # finished, recorded, deliberately not summarized (too old, opted out)


# States whose usage is (again) due for measurement.
_MEASURABLE = (SummaryState.AWAITING_USAGE.value, SummaryState.REMEASURE.value)
# The usage claim's columns (summary_claims.py).
_SUMMARY = SummaryColumns(jobs, jobs.c.usage_due_at, jobs.c.usage_claim_token, jobs.c.usage_claim_term)


class RecordNotFound(LookupError):
    """The record an operation refers to is not stored."""


@dataclass(frozen=True, slots=True)
class JobFilter:
    """Filters of the job list; `since`/`until` bound the finish time (creation time while running)."""

    cluster: str | None = None
    namespace: str | None = None
    owner: str | None = None
    team: str | None = None
    status: JobStatus | None = None
    since: datetime | None = None
    until: datetime | None = None
    # Stored kinds (domain.model.KindName.stored); None: every kind.
    kinds: tuple[str, ...] | None = None


async def upsert_jobs(conn: AsyncConnection, records: Sequence[JobRecord]) -> None:
    await upsert_rows(conn, jobs, _JOB_KEY, [codec.job_to_row(j) for j in records], _JOB_RECORD_COLUMNS)


async def upsert_pods(conn: AsyncConnection, records: Sequence[PodRecord]) -> None:
    await upsert_rows(conn, pods, _JOB_KEY, [codec.pod_to_row(p) for p in records], _POD_RECORD_COLUMNS)


async def stored_versions(conn: AsyncConnection, cluster: str) -> dict[str, str]:
    """The resourceVersion each stored job and pod was last written from, by uid (a bare pod's run
    and the pod share a uid and are written together from the same object)."""
    found: dict[str, str] = {}
    for table in (jobs, pods):
        result = await conn.execute(
            sa.select(table.c.uid, table.c.resource_version).where(
                table.c.cluster == cluster, table.c.resource_version.is_not(None)
            )
        )
        found.update({uid: version for uid, version in result})
    return found


async def get_jobs(conn: AsyncConnection, cluster: str, uids: Sequence[str]) -> dict[str, JobRecord]:
    rows = await rows_in(conn, sa.select(jobs).where(jobs.c.cluster == cluster), jobs.c.uid, uids)
    return {row["uid"]: codec.job_from_row(row) for row in rows}


async def find_job(
    conn: AsyncConnection, namespace: str, name: str, uid: str | None = None, cluster: str | None = None
) -> JobRecord | None:
    row = await newest_run(conn, jobs, namespace, name, uid, cluster)
    return None if row is None else codec.job_from_row(row)


async def pods_of(conn: AsyncConnection, cluster: str, job_uid: str) -> list[PodRecord]:
    result = await conn.execute(sa.select(pods).where(pods.c.cluster == cluster, pods.c.job_uid == job_uid))
    found = [codec.pod_from_row(row) for row in result.mappings()]
    # Creation order; NULLs (never seen created) last, the same on both dialects.
    found.sort(key=lambda p: (p.created_at is None, p.created_at or codec.EPOCH, p.name, p.uid))
    return found


async def pods_of_jobs(
    conn: AsyncConnection, cluster: str, job_uids: Sequence[str]
) -> dict[str, list[PodRecord]]:
    """The pods of many jobs in one round trip per chunk, each list in creation order."""
    query = sa.select(pods).where(pods.c.cluster == cluster)
    found = await grouped_in(conn, query, pods.c.job_uid, job_uids, codec.pod_from_row)
    for group in found.values():
        group.sort(key=lambda p: (p.created_at is None, p.created_at or codec.EPOCH, p.name, p.uid))
    return found


async def job_uids_of_pods(conn: AsyncConnection, cluster: str, pod_uids: Sequence[str]) -> dict[str, str]:
    """pod uid -> job uid for the stored pods among `pod_uids` (events name pods, not jobs)."""
    query = sa.select(pods.c.uid, pods.c.job_uid).where(pods.c.cluster == cluster)
    rows = await rows_in(conn, query, pods.c.uid, pod_uids)
    return {row["uid"]: row["job_uid"] for row in rows if row["job_uid"]}


async def save_links(conn: AsyncConnection, cluster: str, links: Mapping[str, str], now: datetime) -> None:
    """Records that each object (uid) belongs to the run `links[uid]` (domain.kinds.Link)."""
    if not links:
        return
    rows = [
        {"cluster": cluster, "uid": uid, "parent_uid": parent, "seen_at": now}
        for uid, parent in links.items()
    ]
    await upsert_rows(conn, workload_links, _JOB_KEY, rows)


async def runs_of(conn: AsyncConnection, cluster: str, uids: Sequence[str]) -> dict[str, str]:
    """uid -> the run it belongs to, for those of `uids` that are links (followed to the top)."""
    tops: dict[str, str] = {}
    frontier = {uid: uid for uid in dict.fromkeys(uids)}  # linked uid -> the uid asked about
    links = workload_links.c
    query = sa.select(links.uid, links.parent_uid).where(links.cluster == cluster)
    for _ in range(LINK_DEPTH):
        if not frontier:
            break
        rows = await rows_in(conn, query, links.uid, frontier)
        parents = {row["uid"]: row["parent_uid"] for row in rows}
        # A cycle (hand-written owner references) ends with the depth.
        frontier = {parent: frontier[child] for child, parent in parents.items()}
        tops.update({asked: parent for parent, asked in frontier.items()})
    return tops


async def adopt_pods(conn: AsyncConnection, cluster: str, moves: Mapping[str, str]) -> None:
    """Pods stored under a link's uid (seen before the link) move to its run."""
    for child, run in moves.items():
        await conn.execute(
            sa.update(pods).where(pods.c.cluster == cluster, pods.c.job_uid == child).values(job_uid=run)
        )


async def open_jobs(
    conn: AsyncConnection, cluster: str, namespaces: Sequence[str], kind: str | None
) -> list[JobRecord]:
    """Jobs not yet in a terminal state (in `namespaces`, all when empty): what a relist reconciles."""
    terminal = [s.value for s in JobStatus if s.is_terminal]
    query = sa.select(jobs).where(jobs.c.cluster == cluster, jobs.c.status.not_in(terminal))
    if namespaces:
        query = query.where(jobs.c.namespace.in_(list(namespaces)))
    if kind is not None:
        query = query.where(jobs.c.kind == kind)
    return [codec.job_from_row(row) for row in (await conn.execute(query)).mappings()]


@dataclass(frozen=True, slots=True)
class TerminalMark:
    """One job's end to record (see mark_terminal); the ingestion pipeline writes them in batches."""

    uid: str
    at: datetime
    state: SummaryState
    usage_due_at: datetime | None


async def mark_terminals(conn: AsyncConnection, cluster: str, marks: Sequence[TerminalMark]) -> int:
    """mark_terminal for many jobs; returns how many ended for the first time.

    Only jobs whose end is not yet recorded are written, and the write locks them: a replica
    replaying the same end concurrently waits, then finds nothing to do. On Postgres that is one
    statement (UPDATE … WHERE not recorded … RETURNING, re-checked after a lock wait); on SQLite,
    whose one writer serialises everything, a SELECT of the unrecorded jobs and an executemany.
    """
    by_uid = {m.uid: m for m in marks}
    if not by_uid:
        return 0
    if conn.dialect.name == "postgresql":
        uids = list(by_uid)
        ats, states, dues = (
            list(column) for column in zip(*(_mark_values(by_uid[u]) for u in uids), strict=True)
        )
        result = await conn.execute(
            _MARK_TERMINALS_PG,
            {"uids": uids, "ats": ats, "states": states, "dues": dues, "cluster": cluster},
        )
        return len(result.fetchall())
    return await _SUMMARY.record_ends(
        conn, cluster, {uid: _mark_values(mark) for uid, mark in by_uid.items()}
    )


def _mark_values(mark: TerminalMark) -> End:
    due = mark.usage_due_at if mark.state is SummaryState.AWAITING_USAGE else None
    return mark.at, mark.state.value, due


# One statement for the whole batch whatever its size, and the same text every time (prepared once
# per connection): an executemany of single-row UPDATEs is a round trip per job on asyncpg.
_MARK_TERMINALS_PG = sa.text(
    "UPDATE jobs SET terminal_recorded_at = m.at, summary_state = m.state, usage_due_at = m.due"
    " FROM unnest(CAST(:uids AS TEXT[]), CAST(:ats AS TIMESTAMPTZ[]), CAST(:states AS TEXT[]),"
    " CAST(:dues AS TIMESTAMPTZ[])) AS m(uid, at, state, due)"
    " WHERE jobs.cluster = :cluster AND jobs.uid = m.uid AND jobs.terminal_recorded_at IS NULL"
    " RETURNING jobs.uid"
)


async def mark_terminal(
    conn: AsyncConnection,
    cluster: str,
    uid: str,
    at: datetime,
    state: SummaryState,
    usage_due_at: datetime | None,
) -> bool:
    result = await conn.execute(
        sa.update(jobs)
        .where(jobs.c.cluster == cluster, jobs.c.uid == uid, jobs.c.terminal_recorded_at.is_(None))
        .values(terminal_recorded_at=at, summary_state=state.value, usage_due_at=usage_due_at)
    )
    return result.rowcount == 1


@dataclass(frozen=True, slots=True)
class UsageClaim:
    """Jobs leased for one usage round, under `token` (checked by every write that settles one of
    them) and the claimer's leadership `term` (None without election)."""

    token: str
    term: int | None
    jobs: tuple[JobRecord, ...] = ()


class ClaimLost(FencedOut):
    """The usage claim of a job (or the summary claim of a workflow) was taken over by another
    claim (its lease ran out, or a new leader took the claims of a term that ended): this
    claimer's writes are not stored."""


async def claim_usage_due(conn: AsyncConnection, lease: Lease) -> list[JobRecord]:
    """Takes `lease` of the due jobs (due again after it; SummaryColumns.lease_due). A cluster's
    leader claims only its cluster's jobs: it measures them with its cluster's Prometheus."""
    claim = _SUMMARY.lease_due(_MEASURABLE, lease)
    result = await conn.execute(claim.values(usage_attempts=jobs.c.usage_attempts + 1))
    claimed = [codec.job_from_row(row) for row in result.mappings()]
    claimed.sort(key=lambda j: (codec.job_sort_at(j), j.cluster, j.uid))
    return claimed


async def reschedule_usage(
    conn: AsyncConnection, cluster: str, uid: str, due_at: datetime, token: str | None = None
) -> bool:
    """Sets when the job is next due; with `token`, only while that claim holds it (which it then
    gives up, so that no new leader takes the job before `due_at`)."""
    result = await conn.execute(
        sa.update(jobs)
        .where(*_SUMMARY.held(cluster, uid, token), jobs.c.summary_state.in_(_MEASURABLE))
        .values(usage_due_at=due_at, usage_claim_token=None, usage_claim_term=None)
    )
    return result.rowcount == 1


async def release_usage(
    conn: AsyncConnection, cluster: str, uids: Sequence[str], due_at: datetime, token: str
) -> int:
    """Ends `token`'s usage claim on those of the jobs it still holds, due again at `due_at`;
    returns how many it released (the others were settled, or taken by another claim)."""
    released = 0
    for chunk in chunks(list(dict.fromkeys(uids))):
        result = await conn.execute(
            _SUMMARY.release(cluster, chunk, token, due_at).where(jobs.c.summary_state.in_(_MEASURABLE))
        )
        released += result.rowcount
    return released


async def set_summary_state(
    conn: AsyncConnection,
    cluster: str,
    uid: str,
    state: SummaryState,
    usage_due_at: datetime | None = None,
    token: str | None = None,
) -> None:
    """Sets where the job stands; `usage_due_at` is kept only for states that are measured again.

    With `token`, only while that usage claim holds the job: else ClaimLost. The claim ends here.
    """
    due = usage_due_at if state.value in _MEASURABLE else None
    result = await conn.execute(
        sa.update(jobs)
        .where(*_SUMMARY.held(cluster, uid, token))
        .values(summary_state=state.value, usage_due_at=due, usage_claim_token=None, usage_claim_term=None)
    )
    if result.rowcount != 1:
        if token is not None:
            raise ClaimLost(f"job {cluster}/{uid}: its usage claim was taken over")
        raise RecordNotFound(f"job {cluster}/{uid} is not stored")


async def summary_states(conn: AsyncConnection, cluster: str, uids: Sequence[str]) -> dict[str, SummaryState]:
    query = sa.select(jobs.c.uid, jobs.c.summary_state).where(jobs.c.cluster == cluster)
    rows = await rows_in(conn, query, jobs.c.uid, uids)
    return {row["uid"]: SummaryState(row["summary_state"]) for row in rows}


async def recommendations_of_jobs(
    conn: AsyncConnection, cluster: str, uids: Sequence[str]
) -> dict[str, list[Recommendation]]:
    """The stored advice of each of these jobs, in its order (jobs without advice are absent)."""
    r = recommendations.c
    query = sa.select(recommendations).where(r.cluster == cluster).order_by(r.job_uid, r.position)
    return await grouped_in(conn, query, r.job_uid, sorted(set(uids)), codec.recommendation_from_row)


def usage_copies(figures: Usage, advice: Sequence[Recommendation] | None = None) -> dict[str, Any]:
    """The usage figures a job's row keeps copies of, written with the usage: a weekly trend and
    digest sum them from the covering (team, finished_at) index (tables.DIGEST_JOB_COLUMNS,
    trend_queries.py, digest_queries.py) instead of probing `usage` per job; the job list shows the
    GPU model from the row. With the job's recommendations (`advice`), their largest waste too
    (top_waste_copy)."""
    copies: dict[str, Any] = {
        "gpu_minutes_held": figures.gpu_minutes,
        "gpu_minutes_used": figures.used_gpu_minutes,
        "gpu_minutes_idle": figures.idle_gpu_minutes,
        "memory_peak_bytes": figures.memory_peak_bytes,
        "gpu_model": figures.gpu_model,
    }
    if advice is not None:
        copies.update(top_waste_copy(advice))
    return copies


def top_waste_copy(advice: Sequence[Recommendation]) -> dict[str, Any]:
    """The copy a job's row keeps of its recommendations' largest waste (None: it has none), so a
    digest ranks a week's jobs by waste from the index and reads only the winners' advice."""
    return {"top_waste_gpu_minutes": max((r.waste_gpu_minutes for r in advice), default=None)}


async def save_usage(
    conn: AsyncConnection,
    cluster: str,
    uid: str,
    figures: Usage,
    advice: Sequence[Recommendation] | None = None,
) -> None:
    """The job's usage, and with `advice` its recommendations replaced by those, with the copies the
    job's row keeps of both in one update of that row (None: its advice is left as it is)."""
    await upsert_rows(conn, usage, ("cluster", "job_uid"), [codec.usage_to_row(cluster, uid, figures)])
    if advice is not None:
        await _replace_recommendations(conn, cluster, uid, advice)
    await conn.execute(
        sa.update(jobs)
        .where(jobs.c.cluster == cluster, jobs.c.uid == uid)
        .values(**usage_copies(figures, advice))
    )


async def get_usage(conn: AsyncConnection, cluster: str, uid: str) -> Usage | None:
    result = await conn.execute(sa.select(usage).where(usage.c.cluster == cluster, usage.c.job_uid == uid))
    row = result.mappings().first()
    return None if row is None else codec.usage_from_row(row)


def measured_runs(
    cluster: str, namespace: str, family: str, before: datetime, *usage_columns: sa.ColumnElement[Any]
) -> sa.Select[Any]:
    """The jobs of a family in a namespace that finished before `before` and were measured (with
    `usage_columns` of their usage), newest first."""
    return (
        sa.select(jobs, *usage_columns)
        .join(usage, sa.and_(usage.c.cluster == jobs.c.cluster, usage.c.job_uid == jobs.c.uid))
        .where(
            jobs.c.cluster == cluster,
            jobs.c.namespace == namespace,
            jobs.c.family == family,
            jobs.c.finished_at < before,
        )
        .order_by(jobs.c.finished_at.desc(), jobs.c.uid.desc())
    )


async def family_history(
    conn: AsyncConnection, cluster: str, namespace: str, family: str, before: datetime, limit: int
) -> list[tuple[JobRecord, Usage]]:
    """The newest finished, measured runs of a family in a namespace that ended before `before`."""
    usage_columns = [c.label(f"usage_{c.name}") for c in usage.c]
    query = measured_runs(cluster, namespace, family, before, *usage_columns).limit(limit)
    runs = []
    for row in (await conn.execute(query)).mappings():
        usage_row = {c.name: row[f"usage_{c.name}"] for c in usage.c}
        runs.append((codec.job_from_row(row), codec.usage_from_row(usage_row)))
    return runs


async def save_recommendations(
    conn: AsyncConnection, cluster: str, uid: str, recs: Sequence[Recommendation]
) -> None:
    """The job's advice replaced by `recs`, and the copy its row keeps of their largest waste."""
    await _replace_recommendations(conn, cluster, uid, recs)
    await conn.execute(
        sa.update(jobs).where(jobs.c.cluster == cluster, jobs.c.uid == uid).values(**top_waste_copy(recs))
    )


async def _replace_recommendations(
    conn: AsyncConnection, cluster: str, uid: str, recs: Sequence[Recommendation]
) -> None:
    await conn.execute(
        sa.delete(recommendations).where(
            recommendations.c.cluster == cluster, recommendations.c.job_uid == uid
        )
    )
    if recs:
        rows = [codec.recommendation_to_row(cluster, uid, i, rec) for i, rec in enumerate(recs)]
        await conn.execute(sa.insert(recommendations), rows)


async def recommendations_of(conn: AsyncConnection, cluster: str, uid: str) -> list[Recommendation]:
    result = await conn.execute(
        sa.select(recommendations)
        .where(recommendations.c.cluster == cluster, recommendations.c.job_uid == uid)
        .order_by(recommendations.c.position)
    )
    return [codec.recommendation_from_row(row) for row in result.mappings()]
