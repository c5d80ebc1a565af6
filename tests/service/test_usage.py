"""The usage collector on a real store: one batched measurement per round, figures, advice, give-up."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from inno_notify.adapters.db.repository import Store, SummaryState
from inno_notify.adapters.prometheus.batching import PodWindow
from inno_notify.adapters.prometheus.errors import PrometheusUnavailable
from inno_notify.adapters.prometheus.measure import PodMeasurement
from inno_notify.domain.model import (
    Channel,
    GpuUsage,
    JobRecord,
    MissingReason,
    Notification,
    NotificationKind,
    PodUsage,
    RecommendationKind,
)
from inno_notify.domain.parsing import ParseConfig
from inno_notify.domain.rightsizing import RightsizingPolicy
from inno_notify.domain.series import PodPoints
from inno_notify.service.ingest import IngestOptions, Ingestor
from inno_notify.service.job_charts import ChartDrawer
from inno_notify.service.usage import CollectorOptions, UsageCollector
from tests import stored
from tests.service.test_ingest import Clock, lifecycle

T0 = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
GIB = 1024**3


class FakeSource:
    """Our own UsageSource protocol, answering from per-pod figures; counts the rounds it served."""

    def __init__(self, util_by_gpu: Sequence[float], memory_peak: int, fail: bool = False) -> None:
        self.util_by_gpu = util_by_gpu
        self.memory_peak = memory_peak
        self.fail = fail
        self.calls: list[list[str]] = []
        # Pods whose measurement raises (a bug in a source, an exporter's nonsense): any call with one.
        self.poison: set[str] = set()

    async def measure_pods(self, targets: Sequence[PodWindow]) -> Mapping[str, PodMeasurement]:
        self.calls.append([t.uid for t in targets])
        if self.fail:
            raise PrometheusUnavailable("connection refused")
        if self.poison & {t.uid for t in targets}:
            raise OverflowError("cannot convert float infinity to integer")
        result = {}
        for t in targets:
            minutes = t.held_seconds / 60
            gpus = tuple(
                GpuUsage(
                    pod_uid=t.uid,
                    pod_name=t.pod,
                    gpu=str(i),
                    uuid=f"GPU-{t.uid[:8]}-{i}",
                    model="NVIDIA H100 80GB HBM3",
                    held_minutes=minutes,
                    util_mean_percent=util,
                    util_max_percent=util,
                    fb_used_peak_bytes=10 * GIB,
                    fb_total_bytes=80 * GIB,
                    samples=200,
                )
                for i, util in enumerate(self.util_by_gpu)
            )
            pod = PodUsage(
                pod_uid=t.uid,
                pod_name=t.pod,
                memory_peak_bytes=self.memory_peak,
                cpu_cores_mean=2.0,
                cpu_cores_p95=3.0,
                samples=200,
            )
            # Its usage over time: each GPU at its mean for the pod's first three minutes.
            start = math.ceil(t.held_from.timestamp() / 60) * 60
            points = PodPoints(
                t.uid,
                t.pod,
                60,
                gpu_util={
                    str(i): {start + 60 * k: util for k in range(3)}
                    for i, util in enumerate(self.util_by_gpu)
                },
                memory={start: float(self.memory_peak)},
            )
            result[t.uid] = PodMeasurement(window=t, gpus=gpus, pod=pod, points=points)
        return result


async def plan_one_email(job: JobRecord, now: datetime) -> list[Notification]:
    return [
        Notification(
            dedup_key=f"{job.cluster}/{job.uid}/job_summary/email/{job.owner}",
            kind=NotificationKind.JOB_SUMMARY,
            channel=Channel.EMAIL,
            recipient=job.owner or "",
            due_at=now,
            created_at=now,
            cluster=job.cluster,
            job_uid=job.uid,
        )
    ]


async def ingest(store: Store, names: Sequence[str]) -> list[str]:
    ing = Ingestor(store, ParseConfig(cluster="test"), IngestOptions(), Clock(T0 + timedelta(hours=2)), T0)
    uids = []
    for name in names:
        events = lifecycle(name, gpus=4)
        await ing.apply(events)
        uids.append(events[0][2]["metadata"]["uid"])
    return uids


def collector(store: Store, source: FakeSource, now: datetime) -> UsageCollector:
    return UsageCollector(store, source, RightsizingPolicy(), plan_one_email, CollectorOptions(), Clock(now))


async def test_one_round_measures_every_due_job_at_once(store: Store) -> None:
    uids = await ingest(store, [f"train-{i}" for i in range(3)])
    source = FakeSource(util_by_gpu=[80.0, 75.0, 0.0, 0.0], memory_peak=6 * GIB)
    now = T0 + timedelta(hours=1, minutes=5)
    coll = collector(store, source, now)
    assert await coll.run_once(now) == 3
    assert len(source.calls) == 1 and len(source.calls[0]) == 3  # one batched call, not one per job

    for uid in uids:
        usage = await store.usage.get_usage("test", uid)
        assert usage is not None
        # One pod with 4 GPUs held from scheduling (T0+30 s) to its end (T0+1 h): 59.5 min each.
        assert usage.gpu_minutes == 4 * 59.5
        assert usage.gpus_idle == 2
        assert usage.used_gpu_minutes == pytest.approx((0.80 + 0.75) * 59.5)
        assert usage.memory_peak_bytes == 6 * GIB
        kinds = {r.kind for r in await stored.recommendations_of(store, "test", uid)}
        assert RecommendationKind.GPU_COUNT in kinds or RecommendationKind.IDLE_GPU in kinds
        assert await stored.summary_state(store, "test", uid) is SummaryState.SUMMARIZED
    assert coll.stats.notifications_planned == 3
    assert await coll.run_once(now) == 0  # nothing due any more


async def test_jobs_are_not_measured_before_the_metrics_delay(store: Store) -> None:
    await ingest(store, ["early"])
    source = FakeSource([50.0], GIB)
    end = T0 + timedelta(hours=1, seconds=2)
    assert await collector(store, source, end).run_once(end + timedelta(seconds=30)) == 0
    assert source.calls == []


async def test_outage_is_retried_then_given_up_with_the_reason(store: Store) -> None:
    (uid,) = await ingest(store, ["during-outage"])
    end = T0 + timedelta(hours=1, seconds=2)
    down = FakeSource([50.0], GIB, fail=True)
    first = end + timedelta(minutes=2)
    coll = collector(store, down, first)
    assert await coll.run_once(first) == 0
    assert await stored.summary_state(store, "test", uid) is SummaryState.AWAITING_USAGE
    assert coll.stats.failed_rounds == 1

    # Still down past give_up_after_seconds (1800 s): the summary goes out, figures missing.
    late = end + timedelta(seconds=1801)
    assert await coll.run_once(late) == 1
    usage = await store.usage.get_usage("test", uid)
    assert usage is not None
    assert usage.gpu_util_mean_percent is None and usage.memory_peak_bytes is None
    assert usage.reason_for("memory_peak_bytes") is MissingReason.PROMETHEUS_UNAVAILABLE
    assert usage.gpu_minutes == 4 * 59.5  # held time comes from timestamps, not from Prometheus
    assert await stored.recommendations_of(store, "test", uid) == []
    assert await stored.summary_state(store, "test", uid) is SummaryState.REMEASURE
    assert coll.stats.notifications_planned == 1

    # Prometheus is back: the next re-measure fills the figures in and advises; nothing is re-sent.
    coll.source = FakeSource([80.0, 70.0, 0.0, 0.0], 6 * GIB)
    assert await coll.run_once(late + timedelta(minutes=10)) == 0  # not due yet (every 15 min)
    assert await coll.run_once(late + timedelta(minutes=16)) == 1
    usage = await store.usage.get_usage("test", uid)
    assert usage is not None and usage.gpus_idle == 2 and usage.memory_peak_bytes == 6 * GIB
    assert usage.missing == ()
    assert await stored.recommendations_of(store, "test", uid) != []
    assert await stored.summary_state(store, "test", uid) is SummaryState.SUMMARIZED
    assert coll.stats.notifications_planned == 1


async def test_remeasuring_stops_after_a_day(store: Store) -> None:
    (uid,) = await ingest(store, ["never-back"])
    end = T0 + timedelta(hours=1, seconds=2)
    coll = collector(store, FakeSource([50.0], GIB, fail=True), end)
    assert await coll.run_once(end + timedelta(seconds=1801)) == 1
    assert await stored.summary_state(store, "test", uid) is SummaryState.REMEASURE
    assert await coll.run_once(end + timedelta(days=1, minutes=1)) == 0
    assert await stored.summary_state(store, "test", uid) is SummaryState.SUMMARIZED


async def pod_uid(store: Store, job_uid: str) -> str:
    (pod,) = await stored.pods_of(store, "test", job_uid)
    return pod.uid


async def test_one_poison_job_does_not_hold_up_the_round(store: Store) -> None:
    """The job whose measurement raises is the first of the round; the others are measured in the
    same round, it is summarized with every figure null (measurement_error), and nothing loops."""
    uids = await ingest(store, [f"sweep-{i}" for i in range(7)])
    source = FakeSource(util_by_gpu=[80.0, 75.0, 0.0, 0.0], memory_peak=6 * GIB)
    now = T0 + timedelta(hours=1, minutes=5)
    coll = collector(store, source, now)
    first = await stored.claim_usage_due(
        store, now, 1, lease_seconds=0
    )  # what the round will hand over first
    poison = first[0].uid
    source.poison = {await pod_uid(store, poison)}

    assert await coll.run_once(now) == 7
    good = [uid for uid in uids if uid != poison]
    for uid in good:
        usage = await store.usage.get_usage("test", uid)
        assert usage is not None and usage.gpus_idle == 2 and usage.memory_peak_bytes == 6 * GIB
        assert await stored.summary_state(store, "test", uid) is SummaryState.SUMMARIZED
    measured_ok = {pod for call in source.calls if not source.poison & set(call) for pod in call}
    assert measured_ok == {await pod_uid(store, uid) for uid in good}

    usage = await store.usage.get_usage("test", poison)
    assert usage is not None
    assert (usage.gpu_minutes, usage.gpu_util_mean_percent, usage.memory_peak_bytes) == (None, None, None)
    assert {m.reason for m in usage.missing} == {MissingReason.MEASUREMENT_ERROR}
    assert {m.figure for m in usage.missing} >= {"gpu_minutes", "gpu_util_mean_percent", "memory_peak_bytes"}
    assert await stored.recommendations_of(store, "test", poison) == []
    assert await stored.summary_state(store, "test", poison) is SummaryState.SUMMARIZED
    assert coll.stats.notifications_planned == 7  # its summary goes out, saying why figures are missing
    assert coll.stats.measurement_errors == 1

    # Nothing comes back: not after the lease, not after the re-measure interval.
    calls = len(source.calls)
    for later in (timedelta(minutes=6), timedelta(minutes=20), timedelta(days=2)):
        assert await coll.run_once(now + later) == 0
    assert len(source.calls) == calls


async def test_a_job_whose_figures_cannot_be_computed_is_summarized_without_them(store: Store) -> None:
    """The source answers, but one job's answer is nothing the accounting rules expect."""
    uids = await ingest(store, ["fine", "odd"])
    now = T0 + timedelta(hours=1, minutes=5)

    class OddSource(FakeSource):
        async def measure_pods(self, targets: Sequence[PodWindow]) -> Mapping[str, PodMeasurement]:
            result = dict(await super().measure_pods(targets))
            odd = await pod_uid(store, uids[1])
            bad = replace(result[odd].gpus[0], util_mean_percent="90%")  # type: ignore[arg-type]
            result[odd] = replace(result[odd], gpus=(bad, *result[odd].gpus[1:]))
            return result

    coll = collector(store, OddSource([50.0, 50.0, 50.0, 50.0], 6 * GIB), now)
    assert await coll.run_once(now) == 2
    fine, odd = [await store.usage.get_usage("test", uid) for uid in uids]
    assert fine is not None and fine.missing == ()
    assert odd is not None and {m.reason for m in odd.missing} == {MissingReason.MEASUREMENT_ERROR}
    assert odd.gpu_minutes is None
    assert await stored.summary_state(store, "test", uids[1]) is SummaryState.SUMMARIZED


async def test_a_summary_that_cannot_be_planned_waits_alone(store: Store) -> None:
    """Planning (routing) failing for one job sets that job aside, not the round: it is released
    due after the retry backoff (issue 32), not left to its 300 s lease; failing for job after job
    means something shared is down, and the round fails."""
    uids = await ingest(store, [f"job-{i}" for i in range(4)])
    now = T0 + timedelta(hours=1, minutes=5)
    broken_for: set[str] = {uids[0]}

    async def plan(job: JobRecord, at: datetime) -> list[Notification]:
        if job.uid in broken_for:
            raise LookupError("directory entry unreadable")
        return await plan_one_email(job, at)

    source = FakeSource([50.0], GIB)
    coll = UsageCollector(store, source, RightsizingPolicy(), plan, CollectorOptions(), Clock(now))
    assert await coll.run_once(now) == 3
    assert await stored.summary_state(store, "test", uids[0]) is SummaryState.AWAITING_USAGE
    assert [await stored.summary_state(store, "test", uid) for uid in uids[1:]] == [
        SummaryState.SUMMARIZED
    ] * 3
    assert coll.stats.jobs_released == 1
    # Ended just under five minutes ago: due again after a quarter of that (under 75 s); not at once.
    assert await coll.run_once(now + timedelta(minutes=1)) == 0

    broken_for.clear()
    assert await coll.run_once(now + timedelta(seconds=75)) == 1  # back after the backoff, and fine now
    assert await stored.summary_state(store, "test", uids[0]) is SummaryState.SUMMARIZED


async def test_several_unsettled_jobs_in_a_row_fail_the_round(store: Store) -> None:
    await ingest(store, [f"job-{i}" for i in range(4)])
    now = T0 + timedelta(hours=1, minutes=5)

    async def plan(job: JobRecord, at: datetime) -> list[Notification]:
        raise ConnectionError("database went away")

    coll = UsageCollector(
        store, FakeSource([50.0], GIB), RightsizingPolicy(), plan, CollectorOptions(), Clock(now)
    )
    with pytest.raises(ConnectionError):
        await coll.run_once(now)
    assert coll.stats.jobs_released == 4  # all of the round's claims, not only the three tried


async def test_the_series_is_kept_with_the_usage_and_the_pods_even_when_nothing_was_measured(
    store: Store,
) -> None:
    measured_uid, unmeasured_uid = await ingest(store, ["train-a", "train-b"])
    source = FakeSource(util_by_gpu=[80.0, 0.0], memory_peak=6 * GIB)
    now = T0 + timedelta(hours=1, minutes=5)
    # The first job is measured; the second only after Prometheus stays away past the give-up time.
    coll = collector(store, source, now)
    await store.jobs.reschedule_usage("test", unmeasured_uid, now + timedelta(days=1))
    assert await coll.run_once(now) == 1
    source.fail = True
    later = now + timedelta(days=1)
    assert await collector(store, source, later).run_once(later) == 1

    found = await store.usage.series_of("test", [measured_uid, unmeasured_uid])
    series = found[measured_uid]
    assert series.step_seconds == 60 and series.measured
    assert [(line.label, line.values) for line in series.gpu_util] == [("0", (80.0,) * 3), ("1", (0.0,) * 3)]
    assert [line.values for line in series.memory] == [(6.0 * GIB, None, None)]
    pods = await stored.pods_of(store, "test", measured_uid)
    assert [(p.name, p.node) for p in series.pods] == [(p.name, p.node) for p in pods]
    given_up = found[unmeasured_uid]
    assert not given_up.measured and [p.name for p in given_up.pods] == [
        p.name for p in await stored.pods_of(store, "test", unmeasured_uid)
    ]


async def test_each_recommendation_carries_the_window_its_figures_were_measured_over(store: Store) -> None:
    (uid,) = await ingest(store, ["train-w"])
    source = FakeSource(util_by_gpu=[80.0, 75.0, 0.0, 0.0], memory_peak=6 * GIB)
    now = T0 + timedelta(hours=1, minutes=5)
    assert await collector(store, source, now).run_once(now) == 1
    (pod,) = await stored.pods_of(store, "test", uid)
    recs = await stored.recommendations_of(store, "test", uid)
    assert recs, "two idle GPUs of four: advice expected"
    for rec in recs:
        # The pod's held time (CONTRACT.md §4): scheduled at T0 + 30 s, last container ended at T0 + 1 h.
        assert rec.evidence["window_start"] == (T0 + timedelta(seconds=30)).isoformat()
        assert rec.evidence["window_end"] == (T0 + timedelta(hours=1)).isoformat()
        assert rec.evidence["samples"] == 200
    assert pod.scheduled_at == T0 + timedelta(seconds=30)


async def test_a_measured_jobs_chart_is_drawn_and_stored_with_its_summary(store: Store) -> None:
    uids = await ingest(store, ["train-c1", "train-c2"])
    source = FakeSource(util_by_gpu=[80.0, 0.0], memory_peak=6 * GIB)
    now = T0 + timedelta(hours=1, minutes=5)
    drawer = ChartDrawer(workers=1)
    try:
        coll = UsageCollector(
            store, source, RightsizingPolicy(), plan_one_email, CollectorOptions(), Clock(now), charts=drawer
        )
        assert await coll.run_once(now) == 2
        assert drawer.drawn == 2
    finally:
        drawer.close()
    found = await store.usage.charts_of("test", uids)
    for uid in uids:
        chart = found[uid].chart
        assert chart is not None and chart.startswith(b"\x89PNG\r\n\x1a\n")
    # The page reads the series without the picture.
    assert (await store.usage.series_of("test", uids))[uids[0]] == found[uids[0]].series


async def _family_run(store: Store, name: str, gpus: int, start: datetime) -> str:
    ing = Ingestor(store, ParseConfig(cluster="test"), IngestOptions(), Clock(start + timedelta(hours=2)), T0)
    events = lifecycle(name, gpus=gpus, start=start)
    await ing.apply(events)
    return str(events[0][2]["metadata"]["uid"])


async def test_a_new_run_is_judged_against_its_familys_previous_advice_once(store: Store) -> None:
    source = FakeSource(util_by_gpu=[80.0, 75.0, 0.0, 0.0], memory_peak=6 * GIB)
    first = await _family_run(store, "train-resnet-7f9c2", 4, T0)
    now = T0 + timedelta(hours=1, minutes=5)
    coll = collector(store, source, now)
    assert await coll.run_once(now) == 1
    advice = await stored.recommendations_of(store, "test", first)
    assert (advice[0].kind, advice[0].current, advice[0].suggested) == (RecommendationKind.GPU_COUNT, 4, 2)
    judged_first = await store.adoption.get("test", first)
    assert judged_first is not None and judged_first.outcome.value == "no_prior_advice"

    # The second run asks for the 2 GPUs advised.
    source.util_by_gpu = [80.0, 75.0]
    second = await _family_run(store, "train-resnet-x8k2p", 2, T0 + timedelta(hours=2))
    later = T0 + timedelta(hours=3, minutes=5)
    coll = collector(store, source, later)
    assert await coll.run_once(later) == 1

    adoption = await store.adoption.get("test", second)
    assert adoption is not None
    assert adoption.previous_uid == first
    gpu_check = next(c for c in adoption.checks if c.kind is RecommendationKind.GPU_COUNT)
    assert (gpu_check.current, gpu_check.suggested, gpu_check.new, gpu_check.outcome.value) == (
        4,
        2,
        2.0,
        "followed",
    )
    # 2 GPUs fewer for the second run's 3601 s (started at +1 s, ended at 1 h + 2 s).
    assert adoption.gpu_hours_freed == pytest.approx(2 * 3601 / 3600)
    assert coll.stats.adoptions_judged == 1
    # The run is summarized: no later round judges it again.
    assert await coll.run_once(later + timedelta(hours=1)) == 0
    assert await store.adoption.get("test", second) == adoption


@pytest.mark.parametrize(("max_runs", "expected"), [(30, 25), (21, 20), (5, 4)])
async def test_family_history_honours_family_max_runs(store: Store, max_runs: int, expected: int) -> None:
    """`rightsizing.family_max_runs` counts the run being judged, so the collector reads one fewer
    earlier runs; the store once stopped at 20 whatever the setting."""
    from tests.adapters.db import records

    earlier = [
        records.job(f"run-{i:02d}", cluster="test", finished_at=T0 - timedelta(hours=i + 1))
        for i in range(25)
    ]
    await stored.upsert_jobs(store, earlier)
    for run in earlier:
        await stored.save_usage(store, "test", run.uid, records.usage())
    this = records.job("this", cluster="test", finished_at=T0)
    policy = RightsizingPolicy(family_max_runs=max_runs)
    coll = UsageCollector(store, FakeSource([], 0), policy, plan_one_email, CollectorOptions(), Clock(T0))

    history = await coll._history(this, T0)

    assert [run.uid for run, _, _ in history] == [f"run-{i:02d}" for i in range(expected)]
