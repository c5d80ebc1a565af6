"""The digest as one statement, compared with its sections read one by one, on both dialects.

The one statement (digest_queries.load_digest) ranks the week's jobs by the copy of their largest
advised waste that the job's row keeps, and reads the trend, the adoption, the nudges and the Kueue
quota as parts of one UNION ALL. Here the same digests are built the way they were before: the
week's figures, then the top waste found by reading every job's recommendations (in Python), the
nudge ledger, the adoption sums, the trend and the quota each by its own store call. Over a seeded
random fortnight of two teams in Berlin (the week of the October DST change among them), both must
give the same digest for every team, week, zone and cluster filter.
"""

from __future__ import annotations

import math
import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from inno_notify.adapters.db import Store
from inno_notify.adapters.db.digest_queries import load_digest, nudged_pods, team_week
from inno_notify.domain.adoption import Adoption, AdoptionPerson, Outcome
from inno_notify.domain.digest import TOP_WASTE, Digest, WasteRow, build_digest, digest_to_dict
from inno_notify.domain.kueue_queues import ClusterQueueQuota, LocalQueueRef
from inno_notify.domain.model import (
    JobRecord,
    JobStatus,
    Recommendation,
    RecommendationKind,
    Requested,
    Severity,
    Team,
    Unit,
    Usage,
)
from inno_notify.domain.trends import TrendGroup, trend_weeks
from inno_notify.domain.weeks import day_bounds, previous_week, week_bounds
from tests import stored

from .test_live_queries import planned

GIB = 1024**3
WEEKS = ("2026-W42", "2026-W43", "2026-W44")
FIRST = datetime(2026, 10, 10, tzinfo=UTC)
SPAN = timedelta(days=24)
OWNERS = ("alice@example.com", "bob@example.com", "carol@example.com", None)
# Few distinct wastes, so that jobs tie at the fifth place.
WASTES = (0.0, 10.0, 30.0, 60.0, 60.0, 90.0, 120.0)


def _job(rnd: random.Random, n: int) -> JobRecord:
    team = rnd.choice(("face", "speech"))
    finished = FIRST + SPAN * rnd.random()
    created = finished - timedelta(hours=rnd.uniform(1, 30))
    queue = rnd.choice((None, rnd.uniform(-5, 900)))
    return JobRecord(
        cluster=rnd.choice(("default", "default", "east")),
        uid=f"j{n:03d}",
        namespace=f"{team}-research",
        name=f"train-{n:03d}",
        status=rnd.choice((JobStatus.SUCCEEDED, JobStatus.SUCCEEDED, JobStatus.FAILED)),
        owner=rnd.choice(OWNERS),
        team=team,
        created_at=created,
        started_at=created + timedelta(minutes=5),
        finished_at=finished,
        first_scheduled_at=None if queue is None else created + timedelta(seconds=queue),
        exit_reason=rnd.choice((None, "OOMKilled")),
        requested=Requested(gpus=rnd.choice((0.0, 1.0, 2.0, 4.0)), memory_bytes=rnd.choice((None, 32 * GIB))),
    )


def _usage(rnd: random.Random) -> Usage:
    held = rnd.uniform(10, 600)
    used = rnd.choice((None, held * rnd.random()))  # None: MIG, no utilization metric
    return Usage(
        gpu_minutes=held,
        used_gpu_minutes=used,
        idle_gpu_minutes=None if used is None else rnd.choice((0.0, held - used)),
        memory_peak_bytes=rnd.choice((None, 8 * GIB)),
    )


def _advice(rnd: random.Random) -> list[Recommendation]:
    return [
        Recommendation(
            rnd.choice((RecommendationKind.IDLE_GPU, RecommendationKind.GPU_COUNT)),
            Severity.WARNING,
            4,
            2,
            Unit.GPUS,
            f"advice {i}",
            waste_gpu_minutes=rnd.choice(WASTES),
        )
        for i in range(rnd.randint(0, 3))
    ]


def _adoption(job: JobRecord, rnd: random.Random) -> Adoption:
    assert job.finished_at is not None
    return Adoption(
        job.cluster,
        job.uid,
        job.namespace,
        job.name,
        "train",
        job.owner,
        job.team,
        job.finished_at,
        None,
        None,
        rnd.choice(list(Outcome)),
        (),
        rnd.choice((None, 2.0)),
        rnd.choice((None, 16.0)),
        job.finished_at,
    )


@pytest.fixture
async def fortnights(store: Store) -> Store:
    rnd = random.Random(32)
    jobs = [_job(rnd, n) for n in range(160)]
    await stored.upsert_jobs(store, jobs)
    for n, job in enumerate(jobs):
        advice = _advice(rnd)
        if rnd.random() < 0.1:
            continue  # never measured
        if n % 2:
            # The usage round's writer: usage and advice with the row's copies in one update.
            await store.jobs.complete_summary(job.cluster, job.uid, _usage(rnd), advice, [])
        else:
            await stored.save_usage(store, job.cluster, job.uid, _usage(rnd))
            if advice:
                await stored.save_recommendations(store, job.cluster, job.uid, advice)
        if rnd.random() < 0.5:
            await store.adoption.record(_adoption(job, rnd))
    await store.directory.replace_teams(
        [
            Team("face", namespaces=("face-research", "face-dev")),
            Team("speech", namespaces=("speech-research",)),
        ]
    )
    at = FIRST + SPAN
    await store.queues.replace_cluster_queues("default", [ClusterQueueQuota("cq-face", 6.0)], at)
    await store.queues.replace_cluster_queues("east", [ClusterQueueQuota("cq-face", 2.0)], at)
    for cluster in ("default", "east"):
        await store.queues.replace_local_queues(
            cluster, [LocalQueueRef("face-research", "lq", "cq-face")], at
        )
    start = week_bounds("2026-W43", "UTC")[0]
    await store.live.enqueue_nudges(
        [
            planned(f"p{i}", start + timedelta(hours=7 * i), start + timedelta(hours=7 * i + 20), team=team)
            for i, team in enumerate(("face", "face", "speech", "face"))
        ]
    )
    return store


async def _top_waste(
    store: Store, team: str, start: datetime, end: datetime, cluster: str | None
) -> list[WasteRow]:
    """Each of the week's GPU jobs' largest recommendation, read job by job, ranked with every job
    tied at the last place kept: what the statement probing every job's advice returned."""
    best: list[WasteRow] = []
    for job in await stored.all_jobs(store):
        if job.team != team or (cluster is not None and job.cluster != cluster) or not job.requested.gpus:
            continue
        if job.finished_at is None or not start <= job.finished_at < end:
            continue
        advice = [
            (-r.waste_gpu_minutes, position, r)
            for position, r in enumerate(await stored.recommendations_of(store, job.cluster, job.uid))
            if r.waste_gpu_minutes > 0
        ]
        if advice:
            r = min(advice, key=lambda a: a[:2])[2]
            best.append(
                WasteRow(
                    job.cluster,
                    job.uid,
                    job.namespace,
                    job.name,
                    job.owner,
                    r.waste_gpu_minutes,
                    r.kind.value,
                    r.severity.value,
                    r.message,
                )
            )
    return [w for w in best if sum(o.waste_gpu_minutes > w.waste_gpu_minutes for o in best) < TOP_WASTE]


async def _section_by_section(store: Store, team: str, week: str, tz: str, cluster: str | None) -> Digest:
    start, end = week_bounds(week, tz)
    previous_start = week_bounds(previous_week(week), tz)[0]
    rows = await team_week(store.engine, cluster, team, start, end, day_bounds(week, tz), previous_start)
    if rows.totals.jobs:
        rows = replace(rows, top_waste=tuple(await _top_waste(store, team, start, end, cluster)))
    groups = await store.adoption.groups(team=team, since=start, until=end, cluster=cluster)
    rows = replace(
        rows,
        nudged=await nudged_pods(store.engine, cluster, team, start, end),
        adoption=tuple(AdoptionPerson(g.owner, g.tally) for g in groups),
    )
    [trend] = await store.trends.weekly(TrendGroup.TEAM, trend_weeks(week), tz, team=team, cluster=cluster)
    return build_digest(team, week, tz, rows, rows.previous, quota_gpus=trend.quota_gpus, trend=trend.points)


def _rounded(value: Any) -> Any:
    """Floats to 12 significant digits: a sum's last bits depend on the order the database adds in."""
    if isinstance(value, float):
        return float(f"{value:.12g}") if math.isfinite(value) else value
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_rounded(v) for v in value]
    return value


@pytest.mark.parametrize("tz", ["Europe/Berlin", "UTC"])
async def test_one_statement_gives_the_digest_the_sections_gave(fortnights: Store, tz: str) -> None:
    compared = 0
    for team in ("face", "speech", "nobody"):
        for week in WEEKS:
            for cluster in (None, "default", "east"):
                one = await load_digest(fortnights.engine, team, week, tz, cluster=cluster)
                sections = await _section_by_section(fortnights, team, week, tz, cluster)
                assert _rounded(digest_to_dict(one)) == _rounded(digest_to_dict(sections)), (
                    team,
                    week,
                    cluster,
                )
                compared += bool(one.top_waste) and bool(one.adoption.runs)
    # The data exercises the sections compared, not only empty weeks.
    assert compared >= 6
