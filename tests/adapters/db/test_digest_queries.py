"""The digest's SQL aggregation on both dialects, over a hand-built week in Berlin whose Sunday is
25 hours long (summer time ends 25 October 2026), with jobs placed on both sides of each edge."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import event, inspect
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncConnection

from inno_notify.adapters.db import Store
from inno_notify.adapters.db.digest_queries import load_digest, team_totals, team_week
from inno_notify.adapters.db.tables import DIGEST_JOB_COLUMNS
from inno_notify.domain.model import (
    JobRecord,
    JobStatus,
    Recommendation,
    RecommendationKind,
    Requested,
    Severity,
    Unit,
    Usage,
)
from inno_notify.domain.weeks import day_bounds, week_bounds
from tests import stored

GIB = 1024**3
TZ = "Europe/Berlin"
# Monday 19 October 00:00 CEST = 18 Oct 22:00 UTC, to Monday 26 Oct 00:00 CET = 25 Oct 23:00 UTC.
WEEK = "2026-W43"


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


def job(
    uid: str,
    finished: datetime,
    *,
    owner: str | None,
    gpus: float,
    team: str = "face",
    status: JobStatus = JobStatus.SUCCEEDED,
    exit_reason: str | None = None,
    memory: int | None = None,
    queue: float | None = None,
) -> JobRecord:
    created = finished - timedelta(hours=3)
    return JobRecord(
        cluster="default",
        uid=uid,
        namespace="face-research",
        name=f"train-{uid}",
        status=status,
        owner=owner,
        team=team,
        created_at=created,
        started_at=created + timedelta(minutes=15),
        finished_at=finished,
        first_scheduled_at=None if queue is None else created + timedelta(seconds=queue),
        exit_reason=exit_reason,
        requested=Requested(gpus=gpus, memory_bytes=memory),
    )


def rec(kind: RecommendationKind, waste: float, message: str) -> Recommendation:
    return Recommendation(kind, Severity.WARNING, 4, 2, Unit.GPUS, message, waste_gpu_minutes=waste)


JOBS: list[tuple[JobRecord, Usage | None, list[Recommendation]]] = [
    # Monday (day 0): 4 GPUs for an hour each, half used, one GPU idle.
    (
        job("j1", utc(2026, 10, 19, 10), owner="alice@example.com", gpus=4, memory=64 * GIB, queue=60),
        Usage(gpu_minutes=240, used_gpu_minutes=120, idle_gpu_minutes=60, memory_peak_bytes=16 * GIB),
        [
            rec(RecommendationKind.GPU_COUNT, 30, "request 2 GPUs"),
            rec(RecommendationKind.IDLE_GPU, 60, "1 of 4 GPUs stayed idle"),
        ],
    ),
    # 22:30 UTC on Sunday 25 October is 23:30 CET, after the clock change: still this week, day 6.
    (
        job(
            "j2",
            utc(2026, 10, 25, 22, 30),
            owner="alice@example.com",
            gpus=1,
            status=JobStatus.FAILED,
            exit_reason="OOMKilled",
            memory=32 * GIB,
            queue=600,
        ),
        Usage(gpu_minutes=120, used_gpu_minutes=30, idle_gpu_minutes=0, memory_peak_bytes=32 * GIB),
        [rec(RecommendationKind.MEMORY_INCREASE, 0, "request more memory")],
    ),
    # 23:00 UTC on 25 October is Monday 00:00 CET: the next week.
    (
        job("j3", utc(2026, 10, 25, 23), owner="bob@example.com", gpus=1, queue=5),
        Usage(gpu_minutes=999, used_gpu_minutes=999, idle_gpu_minutes=0),
        [],
    ),
    # 21:59 UTC on 18 October is Sunday 23:59 CEST: the previous week.
    (
        job("j4", utc(2026, 10, 18, 21, 59), owner="bob@example.com", gpus=2, queue=5),
        Usage(gpu_minutes=300, used_gpu_minutes=150, idle_gpu_minutes=90),
        [rec(RecommendationKind.IDLE_GPU, 500, "previous week's waste")],
    ),
    # 22:30 UTC on Saturday 24 October is already Sunday 00:30 CEST: day 6, not day 5.
    (
        job("j5", utc(2026, 10, 24, 22, 30), owner="bob@example.com", gpus=2, queue=120),
        Usage(gpu_minutes=120, used_gpu_minutes=100, idle_gpu_minutes=0, memory_peak_bytes=8 * GIB),
        [rec(RecommendationKind.CPU, 10, "request 4 cores")],
    ),
    # Never measured, never scheduled (no queue wait).
    (job("j6", utc(2026, 10, 21, 12), owner="carol@example.com", gpus=1), None, []),
    # A CPU-only job and another team's job: not in the digest.
    (
        job("j7", utc(2026, 10, 20, 12), owner="alice@example.com", gpus=0, queue=1),
        Usage(gpu_minutes=0, used_gpu_minutes=0),
        [],
    ),
    (
        job("j8", utc(2026, 10, 20, 12), owner="alice@example.com", gpus=1, team="vision", queue=1),
        Usage(gpu_minutes=600, used_gpu_minutes=600, idle_gpu_minutes=0),
        [rec(RecommendationKind.IDLE_GPU, 900, "other team")],
    ),
    # No owner, MIG (no utilization metric: used and idle unknown); scheduled a second before its
    # creation time (clock skew): a queue wait of 0, not negative. Tuesday.
    (
        job("j9", utc(2026, 10, 20, 12), owner=None, gpus=1, status=JobStatus.FAILED, queue=-1),
        Usage(gpu_minutes=60),
        [],
    ),
]


@pytest.fixture
async def filled(store: Store) -> Store:
    await stored.upsert_jobs(store, [j for j, _, _ in JOBS])
    for j, u, recs in JOBS:
        if u is not None:
            await stored.save_usage(store, j.cluster, j.uid, u)
        if recs:
            await stored.save_recommendations(store, j.cluster, j.uid, recs)
    return store


async def test_team_totals(filled: Store) -> None:
    start, end = week_bounds(WEEK, TZ)
    t = await team_totals(filled.engine, "default", "face", start, end)
    assert (t.jobs, t.jobs_unmeasured, t.succeeded, t.failed, t.oom) == (5, 1, 3, 2, 1)
    assert t.gpu_minutes == pytest.approx(240 + 120 + 120 + 60)
    assert t.used_gpu_minutes == pytest.approx(120 + 30 + 100)
    assert t.used_basis_gpu_minutes == pytest.approx(240 + 120 + 120)
    assert t.idle_gpu_minutes == pytest.approx(60)
    # j1: 1 h held at 64 GiB requested / 16 GiB peak; j2: 2 h at 32 / 32; j5 has no memory request.
    assert t.memory_requested_gib_hours == pytest.approx(64 + 64)
    assert t.memory_peak_gib_hours == pytest.approx(16 + 64)


async def test_previous_week_and_cluster_filter(filled: Store) -> None:
    start, end = week_bounds("2026-W42", TZ)
    t = await team_totals(filled.engine, None, "face", start, end)
    assert (t.jobs, t.gpu_minutes, t.used_gpu_minutes, t.idle_gpu_minutes) == (1, 300, 150, 90)
    other = await team_totals(filled.engine, "elsewhere", "face", *week_bounds(WEEK, TZ))
    assert other.jobs == 0 and other.gpu_minutes is None


async def test_team_week_rows(filled: Store) -> None:
    start, end = week_bounds(WEEK, TZ)
    rows = await team_week(filled.engine, "default", "face", start, end, day_bounds(WEEK, TZ))
    people = {p.owner: p for p in rows.people}
    assert set(people) == {"alice@example.com", "bob@example.com", "carol@example.com", None}
    alice = people["alice@example.com"]
    assert (alice.jobs, alice.gpu_minutes, alice.used_gpu_minutes, alice.idle_gpu_minutes) == (
        2,
        360,
        150,
        60,
    )
    carol = people["carol@example.com"]
    assert (carol.jobs, carol.gpu_minutes, carol.used_gpu_minutes) == (1, None, None)
    nobody = people[None]
    assert (nobody.gpu_minutes, nobody.used_gpu_minutes, nobody.used_basis_gpu_minutes) == (60, None, None)

    daily = {(d.owner, d.day): (d.gpu_minutes, d.used_gpu_minutes) for d in rows.daily}
    assert daily == {
        ("alice@example.com", 0): (240, 120),
        ("alice@example.com", 6): (120, 30),
        ("bob@example.com", 6): (120, 100),
        (None, 1): (60, None),
    }

    assert [(w.uid, w.waste_gpu_minutes, w.message) for w in rows.top_waste] == [
        ("j1", 60, "1 of 4 GPUs stayed idle"),
        ("j5", 10, "request 4 cores"),
    ]

    # Queue waits 0 (clamped), 60, 120, 600 s: p50 90, p95 120 + 0.85 × 480.
    if rows.queue_seconds_sorted is not None:
        assert rows.queue_seconds_sorted == (0, 60, 120, 600)
    else:
        assert (rows.queue_p50_seconds, rows.queue_p95_seconds) == pytest.approx((90, 528))


async def test_the_whole_digest(filled: Store) -> None:
    d = await filled.digest.team_digest("face", WEEK, TZ, cluster="default", quota_gpus=4)
    assert d.week_hours == 169
    assert d.gpu_hours == pytest.approx(9)
    assert d.efficiency == pytest.approx(250 / 480)
    assert (d.queue_p50_seconds, d.queue_p95_seconds) == pytest.approx((90, 528))
    assert d.change_gpu_hours.previous == pytest.approx(5) and d.change_gpu_hours.percent == pytest.approx(80)
    assert d.quota_share == pytest.approx(9 / (4 * 169))
    assert [s.owner for s in d.daily][:2] == ["alice@example.com", "bob@example.com"]
    assert d.daily[0].held == (4, 0, 0, 0, 0, 0, 2)


async def test_a_week_without_gpu_jobs(filled: Store) -> None:
    d = await filled.digest.team_digest("face", "2026-W45", TZ)
    assert d.no_gpu_jobs and d.people == () and d.gpu_hours is None
    assert d.change_gpu_hours.previous == pytest.approx(999 / 60)  # j3 finished in W44


async def test_ties_at_the_last_place_of_the_top_waste_are_broken_by_name(store: Store) -> None:
    # Wastes 100, 90, 80, 70, then three jobs tied at 60 inserted in reverse name order: the
    # database hands over every job tied at the fifth place, and the digest keeps the first by name.
    wastes = {"t1": 100, "t2": 90, "t3": 80, "t4": 70, "t7": 60, "t6": 60, "t5": 60}
    finished = utc(2026, 10, 21, 12)
    await stored.upsert_jobs(store, [job(uid, finished, owner="dora@example.com", gpus=1) for uid in wastes])
    for uid, waste in wastes.items():
        await stored.save_recommendations(
            store, "default", uid, [rec(RecommendationKind.IDLE_GPU, waste, uid)]
        )

    start, end = week_bounds(WEEK, TZ)
    rows = await team_week(store.engine, None, "face", start, end, day_bounds(WEEK, TZ))
    digest = await store.digest.team_digest("face", WEEK, TZ)

    assert sorted(w.uid for w in rows.top_waste) == sorted(wastes)
    assert [w.uid for w in digest.top_waste] == ["t1", "t2", "t3", "t4", "t5"]


def _include_columns(connection: Connection) -> list[str] | None:
    for index in inspect(connection).get_indexes("jobs"):
        if index["name"] == "ix_jobs_team_finished_at":
            assert index["column_names"] == ["team", "finished_at"]
            include: list[str] = index.get("dialect_options", {}).get("postgresql_include", [])
            return include
    return None


async def test_the_digest_index_covers_every_jobs_column_the_digest_reads(
    filled: Store, db_dialect: str
) -> None:
    # Alembic's autogenerate does not compare INCLUDE columns, so migration and model are compared
    # here; and the plan shows that the statement reads no jobs column the index lacks.
    async with filled.engine.connect() as conn:
        include = await conn.run_sync(_include_columns)
    if db_dialect == "sqlite":
        assert include == []
        return
    assert include == DIGEST_JOB_COLUMNS

    async with filled.engine.connect() as conn:
        # What autovacuum does: the visibility map that lets an index-only scan skip the table.
        await conn.execution_options(isolation_level="AUTOCOMMIT")
        await conn.exec_driver_sql("VACUUM ANALYZE jobs")
    async with filled.engine.connect() as conn:
        # On a table this small the planner would rather read it whole; rule that out.
        await conn.exec_driver_sql("SET enable_seqscan = off")
        await conn.exec_driver_sql("SET enable_bitmapscan = off")
        async with sent_statements(conn) as captured:
            await load_digest(conn, "face", WEEK, TZ)
        # The whole digest is one statement, and it reads jobs through the index alone (the
        # fortnight's totals, the week's rows for the other parts, and the trend's earlier weeks).
        ((statement, parameters),) = captured
        driver: Any = (await conn.get_raw_connection()).driver_connection
        plan = "\n".join(row[0] for row in await driver.fetch("EXPLAIN " + statement, *parameters))
    assert plan.count("Index Only Scan using ix_jobs_team_finished_at on jobs") == 3, plan
    assert "Seq Scan on jobs" not in plan


@asynccontextmanager
async def sent_statements(conn: AsyncConnection) -> AsyncIterator[list[tuple[str, Sequence[Any]]]]:
    """The statements sent on `conn` meanwhile, with their parameters, on either dialect (Postgres'
    hottest reads go to the driver itself, past SQLAlchemy's events: sql.fetch)."""
    sent: list[tuple[str, Sequence[Any]]] = []
    if conn.dialect.name != "postgresql":

        def capture(_: Any, __: Any, statement: str, parameters: Any, ___: Any, ____: bool) -> None:
            sent.append((statement, parameters))

        event.listen(conn.sync_engine, "before_cursor_execute", capture)
        try:
            yield sent
        finally:
            event.remove(conn.sync_engine, "before_cursor_execute", capture)
        return
    driver = (await conn.get_raw_connection()).driver_connection
    assert driver is not None

    def logged(query: Any) -> None:
        sent.append((query.query, query.args))

    driver.add_query_logger(logged)
    try:
        yield sent
        # Not a wait on time: asyncpg hands each logged query to its loggers with loop.call_soon, so one
        # turn of the loop runs every one already scheduled (FIFO) before the statements are counted.
        await asyncio.sleep(0)
    finally:
        driver.remove_query_logger(logged)


@pytest.mark.parametrize("week", [WEEK, "2026-W45"])
async def test_a_digest_is_one_statement(filled: Store, week: str) -> None:
    async with filled.engine.connect() as conn, sent_statements(conn) as sent:
        await load_digest(conn, "face", week, TZ)
    # (SQLite's transaction begins with a statement of its own.)
    assert len([query for query, _ in sent if not query.startswith("BEGIN")]) == 1, sent
