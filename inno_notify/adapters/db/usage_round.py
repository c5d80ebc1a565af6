"""The reads and the write of a whole usage round, for all its jobs at once (issue 32).

A round settles up to hundreds of jobs. Each needs its pods, its family's earlier measured runs
(right-sizing), the family's previous run with its advice (adoption), and then its usage, series,
advice, adoption, summary state and notifications stored. Asked job by job that is a dozen round
trips each; here it is a fixed number of statements per round, whatever its size:

- `runs_before`: for every ask (a namespace, a family, a time, a limit) the newest measured runs of
  that family that finished before that time, ranked in the database (one window query per chunk
  of asks, the same on both dialects); the asks travel as a VALUES list;
- `write_summaries`: the summaries of many jobs in the caller's transaction, one statement per
  table (an UPDATE … RETURNING checks every claim at once).

Like the other query modules these run on a connection the caller owns (job_repository.py opens
the transactions).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from inno_notify.adapters.db import adoption as adoption_queries
from inno_notify.adapters.db import codec, outbox, series
from inno_notify.adapters.db import jobs as job_queries
from inno_notify.adapters.db.jobs import (
    ClaimLost,
    RecordNotFound,
    SummaryState,
    recommendations_of_jobs,
    usage_copies,
)
from inno_notify.adapters.db.sql import IN_CHUNK, chunks, dialect_insert, upsert_rows
from inno_notify.adapters.db.tables import (
    UTCDateTime,
    advice_adoption,
    jobs,
    recommendations,
    usage,
    usage_series,
)
from inno_notify.domain.adoption import Adoption
from inno_notify.domain.model import JobRecord, Notification, PodRecord, Recommendation, Usage, UsageSeries

# States whose usage is measured again (jobs.py keeps their due time).
_MEASURED_AGAIN = (SummaryState.AWAITING_USAGE, SummaryState.REMEASURE)
# Six bound values per ask: well under both dialects' limits (sql.IN_CHUNK says which).
_ASKS_PER_QUERY = IN_CHUNK


@dataclass(frozen=True, slots=True)
class RunsAsked:
    """The newest `limit` measured runs of `family` in `namespace` that finished before `before`,
    other than `exclude_uid` (newest first, as jobs.family_history orders them)."""

    namespace: str
    family: str
    before: datetime
    limit: int
    exclude_uid: str = ""
    # Read the runs' pods too (right-sizing's history), or their advice (adoption's previous run).
    with_pods: bool = False
    with_advice: bool = False


@dataclass(frozen=True, slots=True)
class RoundReads:
    """What a usage round reads before it computes anything, for all its jobs."""

    # Pods by job uid: of the round's jobs and of the runs found by asks `with_pods`.
    pods: dict[str, list[PodRecord]]
    states: dict[str, SummaryState]
    # Each ask's runs, in the order of the asks.
    runs: list[list[tuple[JobRecord, Usage]]]
    # Advice by job uid, of the runs found by asks `with_advice`.
    advice: dict[str, list[Recommendation]]


async def read_round(
    conn: AsyncConnection, cluster: str, uids: Sequence[str], asks: Sequence[RunsAsked]
) -> RoundReads:
    """The summary states and pods of the round's jobs (`uids`) and what `asks` ask, in a fixed
    number of statements (one per chunk of each)."""
    states = await job_queries.summary_states(conn, cluster, uids)
    runs = await runs_before(conn, cluster, asks) if asks else []
    with_pods = [run.uid for ask, found in zip(asks, runs, strict=True) if ask.with_pods for run, _ in found]
    pods = await job_queries.pods_of_jobs(conn, cluster, [*uids, *with_pods])
    with_advice = [
        run.uid for ask, found in zip(asks, runs, strict=True) if ask.with_advice for run, _ in found
    ]
    advice = await recommendations_of_jobs(conn, cluster, with_advice) if with_advice else {}
    return RoundReads(pods, states, runs, advice)


async def runs_before(
    conn: AsyncConnection, cluster: str, asks: Sequence[RunsAsked]
) -> list[list[tuple[JobRecord, Usage]]]:
    """Each ask's runs with their usage, in the order of `asks`."""
    found: list[list[tuple[JobRecord, Usage]]] = [[] for _ in asks]
    decoded: dict[str, tuple[JobRecord, Usage]] = {}
    usage_columns = [c.label(f"usage_{c.name}") for c in usage.c]
    for start in range(0, len(asks), _ASKS_PER_QUERY):
        part = asks[start : start + _ASKS_PER_QUERY]
        wanted = (
            sa.values(
                sa.column("ask", sa.Integer()),
                sa.column("namespace", sa.String()),
                sa.column("family", sa.String()),
                sa.column("before", UTCDateTime()),
                sa.column("wanted", sa.Integer()),
                sa.column("exclude_uid", sa.String()),
                name="asked",
            )
            .data(
                [
                    (start + i, a.namespace, a.family, a.before, a.limit, a.exclude_uid)
                    for i, a in enumerate(part)
                ]
            )
            .cte("asked")
        )
        rank = (
            sa.func.row_number()
            .over(partition_by=wanted.c.ask, order_by=(jobs.c.finished_at.desc(), jobs.c.uid.desc()))
            .label("run_rank")
        )
        ranked = (
            sa.select(
                wanted.c.ask.label("run_ask"), wanted.c.wanted.label("run_wanted"), jobs, *usage_columns, rank
            )
            .select_from(wanted)
            .join(
                jobs,
                sa.and_(
                    jobs.c.cluster == cluster,
                    jobs.c.namespace == wanted.c.namespace,
                    jobs.c.family == wanted.c.family,
                    jobs.c.finished_at < wanted.c.before,
                    jobs.c.uid != wanted.c.exclude_uid,
                ),
            )
            .join(usage, sa.and_(usage.c.cluster == jobs.c.cluster, usage.c.job_uid == jobs.c.uid))
            .subquery()
        )
        query = sa.select(ranked).where(ranked.c.run_rank <= ranked.c.run_wanted)
        rows = sorted((await conn.execute(query)).mappings(), key=lambda r: (r["run_ask"], r["run_rank"]))
        for row in rows:
            # The runs of a family come back once per job of it that asks: each is decoded once.
            if row["uid"] not in decoded:
                usage_row = {c.name: row[f"usage_{c.name}"] for c in usage.c}
                decoded[row["uid"]] = (codec.job_from_row(row), codec.usage_from_row(usage_row))
            found[row["run_ask"]].append(decoded[row["uid"]])
    return found


@dataclass(frozen=True, slots=True)
class JobSummary:
    """What settles one job of a usage round (job_repository.complete_summary's arguments)."""

    uid: str
    usage: Usage
    recommendations: Sequence[Recommendation]
    notifications: Sequence[Notification]
    state: SummaryState = SummaryState.SUMMARIZED
    remeasure_at: datetime | None = None
    usage_series: UsageSeries | None = None
    adoption: Adoption | None = None
    # The summary's chart, drawn from `usage_series` (service.job_charts), stored with it.
    chart: bytes | None = None


async def write_summaries(
    conn: AsyncConnection, cluster: str, summaries: Sequence[JobSummary], token: str | None
) -> dict[str, int]:
    """Stores each summary as complete_summary does, all in the caller's transaction; returns how
    many of each job's notifications were new. With `token`, raises ClaimLost (nothing is stored)
    unless that claim holds every one of the jobs; the claims end here."""
    by_uid = {s.uid: s for s in summaries}
    if len(by_uid) != len(summaries):
        raise ValueError("one summary per job")
    if not summaries:
        return {}
    # The claims first: a claim taken over (or ended by a try that committed unseen) stores nothing.
    await _settle_claims(conn, cluster, summaries, token)
    await upsert_rows(
        conn, usage, ("cluster", "job_uid"), [codec.usage_to_row(cluster, s.uid, s.usage) for s in summaries]
    )
    # The job's copies of its usage figures and advice (jobs.usage_copies), one statement for the batch.
    copies = [
        {"b_uid": s.uid, **{f"b_{k}": v for k, v in usage_copies(s.usage, s.recommendations).items()}}
        for s in summaries
    ]
    names = usage_copies(summaries[0].usage, summaries[0].recommendations)
    await conn.execute(
        sa.update(jobs)
        .where(jobs.c.cluster == cluster, jobs.c.uid == sa.bindparam("b_uid"))
        .values({name: sa.bindparam(f"b_{name}") for name in names}),
        copies,
    )
    series_rows = [
        series.series_to_row(cluster, s.uid, s.usage_series, s.chart)
        for s in summaries
        if s.usage_series is not None
    ]
    await upsert_rows(conn, usage_series, ("cluster", "job_uid"), series_rows)
    adoptions = [adoption_queries.to_row(s.adoption) for s in summaries if s.adoption is not None]
    if adoptions:
        stmt = dialect_insert(conn, advice_adoption).on_conflict_do_nothing(
            index_elements=["cluster", "job_uid"]
        )
        await conn.execute(stmt, adoptions)
    await _replace_recommendations(conn, cluster, summaries)
    return await _enqueue(conn, summaries)


async def _settle_claims(
    conn: AsyncConnection, cluster: str, summaries: Sequence[JobSummary], token: str | None
) -> None:
    """jobs.set_summary_state for every job: one UPDATE … RETURNING per (state, due time)."""
    groups: dict[tuple[SummaryState, datetime | None], list[str]] = {}
    for s in summaries:
        due = s.remeasure_at if s.state in _MEASURED_AGAIN else None
        groups.setdefault((s.state, due), []).append(s.uid)
    settled: set[str] = set()
    for (state, due), uids in groups.items():
        for chunk in chunks(uids):
            conditions = [jobs.c.cluster == cluster, jobs.c.uid.in_(list(chunk))]
            if token is not None:
                conditions.append(jobs.c.usage_claim_token == token)
            result = await conn.execute(
                sa.update(jobs)
                .where(*conditions)
                .values(
                    summary_state=state.value, usage_due_at=due, usage_claim_token=None, usage_claim_term=None
                )
                .returning(jobs.c.uid)
            )
            settled.update(result.scalars())
    lost = sorted(s.uid for s in summaries if s.uid not in settled)
    if lost:
        if token is not None:
            raise ClaimLost(f"jobs {cluster}/{', '.join(lost)}: their usage claim was taken over")
        raise RecordNotFound(f"jobs {cluster}/{', '.join(lost)} are not stored")


async def _replace_recommendations(
    conn: AsyncConnection, cluster: str, summaries: Sequence[JobSummary]
) -> None:
    """jobs.save_recommendations for every job: one DELETE per chunk, one INSERT."""
    for chunk in chunks([s.uid for s in summaries]):
        await conn.execute(
            sa.delete(recommendations).where(
                recommendations.c.cluster == cluster, recommendations.c.job_uid.in_(list(chunk))
            )
        )
    rows = [
        codec.recommendation_to_row(cluster, s.uid, i, rec)
        for s in summaries
        for i, rec in enumerate(s.recommendations)
    ]
    if rows:
        await conn.execute(sa.insert(recommendations), rows)


async def _enqueue(conn: AsyncConnection, summaries: Sequence[JobSummary]) -> dict[str, int]:
    """Enqueues every job's notifications at once (outbox.enqueue) and counts each job's new ones:
    the rows whose dedup key was not in the outbox before (a summary written again after a crash
    adds none)."""
    keys = [n.dedup_key for s in summaries for n in s.notifications]
    existing: set[str] = set()
    for chunk in chunks(sorted(set(keys))):
        existing.update(await outbox.statuses(conn, chunk))
    await outbox.enqueue(conn, [n for s in summaries for n in s.notifications])
    return {s.uid: len({n.dedup_key for n in s.notifications} - existing) for s in summaries}
