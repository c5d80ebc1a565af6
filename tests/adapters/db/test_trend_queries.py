"""Trends and Kueue quotas in the store, on both dialects: week edges in a zone with a DST change,
the usage copies kept by save_usage, relists of queues, and the team → namespace → queue lookup."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from inno_notify.adapters.db import Store
from inno_notify.adapters.db.digest_queries import load_digest
from inno_notify.domain.kueue_queues import ClusterQueueQuota, LocalQueueRef
from inno_notify.domain.model import JobRecord, KueueInfo, Requested, Team, Usage
from inno_notify.domain.trends import TrendGroup
from tests import stored

TZ = "Europe/Berlin"
WEEKS = ("2026-W42", "2026-W43")  # W43 ends Mon 26 Oct 00:00 CET = 25 Oct 23:00 UTC (169 hours)
AT = datetime(2026, 10, 26, tzinfo=UTC)


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


def job(
    uid: str, finished: datetime, *, team: str = "face", gpus: float = 1.0, cluster: str = "default"
) -> JobRecord:
    return JobRecord(
        cluster=cluster,
        uid=uid,
        namespace=f"{team}-research",
        name=uid,
        team=team,
        finished_at=finished,
        created_at=finished - timedelta(hours=2),
        requested=Requested(gpus=gpus),
    )


async def fill(store: Store) -> None:
    jobs = [
        # W42 is [11 Oct 22:00 UTC, 18 Oct 22:00 UTC); W43 is [18 Oct 22:00, 25 Oct 23:00).
        job("before", utc(2026, 10, 11, 21, 59)),  # before the trend: left out
        job("w42-first", utc(2026, 10, 11, 22, 0)),
        job("w42-last", utc(2026, 10, 18, 21, 59)),
        job("w43-first", utc(2026, 10, 18, 22, 0)),
        job("w43-dst-hour", utc(2026, 10, 25, 22, 30)),  # the Sunday's 25th hour is still W43
        job("after", utc(2026, 10, 25, 23, 0)),  # W44: left out
        job("cpu", utc(2026, 10, 20), gpus=0.0),  # no GPU: left out
        job("unmeasured", utc(2026, 10, 20)),
        job("speech", utc(2026, 10, 20), team="speech"),
        job("other-cluster", utc(2026, 10, 20), cluster="east"),
    ]
    await stored.upsert_jobs(store, jobs)
    figures = {
        "before": (999.0, 999.0, 999.0),
        "w42-first": (60.0, 30.0, 0.0),
        "w42-last": (120.0, None, 60.0),
        "w43-first": (240.0, 120.0, 0.0),
        "w43-dst-hour": (60.0, 60.0, 0.0),
        "after": (999.0, 999.0, 999.0),
        "cpu": (999.0, 999.0, 999.0),
        "speech": (30.0, 15.0, 0.0),
        "other-cluster": (600.0, 600.0, 0.0),
    }
    for uid, (held, used, idle) in figures.items():
        cluster = "east" if uid == "other-cluster" else "default"
        await stored.save_usage(
            store, cluster, uid, Usage(gpu_minutes=held, used_gpu_minutes=used, idle_gpu_minutes=idle)
        )


async def test_weekly_sums_per_team(store: Store) -> None:
    await fill(store)
    series = await store.trends.weekly(TrendGroup.TEAM, WEEKS, TZ)
    assert [s.group for s in series] == ["face", "speech"]
    w42, w43 = series[0].points
    assert (w42.jobs, w42.gpu_hours, w42.used_gpu_hours, w42.idle_gpu_hours) == (2, 3.0, 0.5, 1.0)
    # Efficiency over the jobs whose use was measured: 30 of 60 GPU-minutes.
    assert w42.efficiency == 0.5
    # The other cluster's job of the same team counts when no cluster is asked for.
    assert (w43.jobs, w43.jobs_unmeasured, w43.gpu_hours, w43.used_gpu_hours) == (4, 1, 15.0, 13.0)
    assert (w43.start, w43.end) == (utc(2026, 10, 18, 22), utc(2026, 10, 25, 23))
    assert w43.week_hours == 169


async def test_one_team_one_cluster_and_per_cluster(store: Store) -> None:
    await fill(store)
    [face] = await store.trends.weekly(TrendGroup.TEAM, WEEKS, TZ, team="face", cluster="default")
    assert [(p.jobs, p.gpu_hours) for p in face.points] == [(2, 3.0), (3, 5.0)]
    clusters = await store.trends.weekly(TrendGroup.CLUSTER, WEEKS, TZ)
    assert [(s.group, [p.gpu_hours for p in s.points]) for s in clusters] == [
        ("default", [3.0, 5.5]),
        ("east", [0.0, 10.0]),
    ]


async def test_a_later_usage_save_replaces_the_copies(store: Store) -> None:
    await fill(store)
    await stored.save_usage(
        store, "default", "unmeasured", Usage(gpu_minutes=60.0, used_gpu_minutes=0.0, idle_gpu_minutes=60.0)
    )
    await stored.save_usage(store, "default", "w43-first", Usage(gpu_minutes=None, used_gpu_minutes=None))
    [face] = await store.trends.weekly(TrendGroup.TEAM, WEEKS, TZ, team="face", cluster="default")
    w43 = face.points[1]
    assert (w43.jobs, w43.jobs_unmeasured, w43.gpu_hours, w43.used_gpu_hours, w43.idle_gpu_hours) == (
        3,
        1,
        2.0,
        1.0,
        1.0,
    )


async def test_queues_give_a_team_its_quota_share(store: Store) -> None:
    await fill(store)
    await store.directory.replace_teams(
        [
            Team("face", namespaces=("face-research", "face-dev")),
            Team("speech", namespaces=("speech-research",)),
        ]
    )
    queues = store.queues
    await queues.replace_cluster_queues(
        "default", [ClusterQueueQuota("cq-face", 2.0), ClusterQueueQuota("cq-cpu", None)], AT
    )
    await queues.replace_local_queues(
        "default",
        [
            LocalQueueRef("face-research", "lq", "cq-face"),
            LocalQueueRef("face-dev", "lq", "cq-face"),
            LocalQueueRef("speech-research", "lq", "cq-cpu"),
        ],
        AT,
    )
    assert await queues.team_quota("face") == 2.0
    assert await queues.team_quota("speech") is None
    face, speech = await store.trends.weekly(TrendGroup.TEAM, WEEKS, TZ)
    assert (face.quota_gpus, speech.quota_gpus) == (2.0, None)
    assert face.points[1].quota_share == 15.0 / (2.0 * 169)
    [default] = await store.trends.weekly(TrendGroup.CLUSTER, WEEKS, TZ, cluster="default")
    assert default.quota_gpus == 2.0

    # The digest shows the same share for its week, and the trend up to it.
    digest = await load_digest(store.engine, "face", "2026-W43", TZ, cluster="default")
    assert digest.quota_gpus == 2.0 and digest.quota_share == 5.0 / (2.0 * 169)
    assert len(digest.trend) == 12 and digest.trend[-1].gpu_hours == 5.0 and digest.trend[-2].gpu_hours == 3.0


async def test_a_relist_replaces_and_events_upsert_and_delete(store: Store) -> None:
    queues = store.queues
    await queues.replace_cluster_queues(
        "default", [ClusterQueueQuota("a", 1.0), ClusterQueueQuota("b", 2.0)], AT
    )
    await queues.replace_cluster_queues("east", [ClusterQueueQuota("a", 8.0)], AT)
    await queues.replace_cluster_queues("default", [ClusterQueueQuota("b", 3.0)], AT)
    assert await queues.list_cluster_queues("default") == [ClusterQueueQuota("b", 3.0)]
    await queues.save_cluster_queues(
        "default", [ClusterQueueQuota("c", 4.0), ClusterQueueQuota("b", 5.0)], AT
    )
    await queues.delete_cluster_queue("default", "c")
    assert await queues.list_cluster_queues("default") == [ClusterQueueQuota("b", 5.0)]
    assert await queues.list_cluster_queues("east") == [ClusterQueueQuota("a", 8.0)]

    await queues.replace_local_queues(
        "default", [LocalQueueRef("x", "lq", "b"), LocalQueueRef("y", "lq", "b")], AT
    )
    # A relist of one watched namespace leaves the others' queues alone.
    await queues.replace_local_queues("default", [], AT, namespaces=["x"])
    await queues.save_local_queues("default", [LocalQueueRef("z", "lq", None)], AT)
    await queues.delete_local_queue("default", "y", "nope")
    assert await queues.list_local_queues("default") == [
        LocalQueueRef("y", "lq", "b"),
        LocalQueueRef("z", "lq", None),
    ]


async def test_queue_wait_ends_at_kueue_admission(store: Store) -> None:
    created = utc(2026, 10, 20, 10)
    admitted = created + timedelta(minutes=30)
    record = JobRecord(
        cluster="default",
        uid="k",
        namespace="face-research",
        name="k",
        created_at=created,
        first_scheduled_at=admitted + timedelta(minutes=2),
        kueue=KueueInfo(admitted_at=admitted),
    )
    assert record.queue_seconds == 1800.0
    # Preempted and admitted again later: the first wait ended when its first pod was scheduled.
    readmitted = JobRecord(
        **{
            **{
                f: getattr(record, f)
                for f in ("cluster", "uid", "namespace", "name", "created_at", "first_scheduled_at")
            },
            "kueue": KueueInfo(admitted_at=created + timedelta(hours=5)),
        }
    )
    assert readmitted.queue_seconds == 1920.0
    await stored.upsert_jobs(store, [record])
    record_read = await stored.get_job(store, "default", "k")
    assert record_read is not None and record_read.queue_seconds == 1800.0
    page = await store.jobs.find_job_row("face-research", "k")
    assert page.rows[0][13] == admitted  # queued_until, the column the API's queue_seconds reads
