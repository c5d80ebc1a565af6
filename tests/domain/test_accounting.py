"""Accounting on hand-computed cases: every expected figure below is worked out in the comment beside it."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from inno_notify.domain.accounting import compute_usage, held_interval, requested_vs_used
from inno_notify.domain.model import (
    GPU_SOURCE_AGENT,
    GPU_SOURCE_DCGM,
    ContainerRecord,
    GpuUsage,
    JobRecord,
    JobStatus,
    MissingReason,
    PodRecord,
    PodUsage,
    ReplicaSpec,
    Requested,
    TerminatedState,
)

T0 = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
NOW = T0 + timedelta(hours=5)
GIB = 1024**3


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def job(finished: float | None = 120, **kw: object) -> JobRecord:
    return JobRecord(
        cluster="c",
        uid="job-1",
        namespace="ns",
        name="train",
        status=JobStatus.SUCCEEDED,
        finished_at=None if finished is None else at(finished),
        **kw,  # type: ignore[arg-type]
    )


def pod(
    uid: str,
    start: float | None,
    end: float | None,
    gpus: float = 1.0,
    deleted: float | None = None,
) -> PodRecord:
    containers: tuple[ContainerRecord, ...] = ()
    if end is not None:
        containers = (
            ContainerRecord(name="main", terminated=TerminatedState(exit_code=0, finished_at=at(end))),
        )
    return PodRecord(
        cluster="c",
        uid=uid,
        namespace="ns",
        name=f"train-{uid}",
        job_uid="job-1",
        phase="Succeeded",
        created_at=T0,
        scheduled_at=None if start is None else at(start),
        deleted_at=None if deleted is None else at(deleted),
        gpu_equivalents=gpus,
        containers=containers,
    )


def gpu(
    pod_uid: str,
    index: int,
    util: float | None,
    fb_gib: float | None = 10,
    *,
    mig_profile: str | None = None,
    shared: bool = False,
    sharing: str | None = None,
    source: str = GPU_SOURCE_DCGM,
) -> GpuUsage:
    return GpuUsage(
        pod_uid=pod_uid,
        pod_name=f"train-{pod_uid}",
        gpu=f"node-a/{index}",
        uuid=f"GPU-{index}",
        util_mean_percent=util,
        util_max_percent=util,
        fb_used_peak_bytes=None if fb_gib is None else int(fb_gib * GIB),
        samples=0 if util is None else 100,
        mig_profile=mig_profile,
        shared=shared,
        sharing=sharing,
        source=source,
    )


def usage(
    uid: str, memory_gib: float | None, cpu_mean: float | None = 1.0, p95: float | None = 2.0
) -> PodUsage:
    return PodUsage(
        pod_uid=uid,
        pod_name=f"train-{uid}",
        memory_peak_bytes=None if memory_gib is None else int(memory_gib * GIB),
        cpu_cores_mean=cpu_mean,
        cpu_cores_p95=p95,
        samples=0 if memory_gib is None else 100,
    )


# (case, pods, gpu rows, pod usage, expected figures)
CASES = [
    (
        # 4 GPUs for 60 min: 240 GPU-min; used 60*(80+60+2+0)/100 = 85.2; GPUs at 2 % and 0 % idle,
        # each 60 GPU-min; mean 85.2/240 = 35.5 %.
        "four_gpus_two_idle",
        [pod("a", 0, 60, gpus=4)],
        [gpu("a", 0, 80, 30), gpu("a", 1, 60, 20), gpu("a", 2, 2, 1), gpu("a", 3, 0, 0.5)],
        [usage("a", 40)],
        dict(
            gpu_minutes=240.0,
            used_gpu_minutes=85.2,
            gpus_idle=2,
            idle_gpu_minutes=120.0,
            gpu_util_mean_percent=35.5,
            gpu_memory_peak_bytes=30 * GIB,
            memory_peak_bytes=40 * GIB,
        ),
    ),
    (
        # A failed try (10 min at 90 %) and its retry (50 min at 40 %), one GPU each, different GPUs:
        # 60 GPU-min; used 9 + 20 = 29; mean 29/60.
        "retries_count",
        [pod("a", 0, 10), pod("b", 12, 62)],
        [gpu("a", 0, 90), gpu("b", 1, 40)],
        [usage("a", 5, cpu_mean=1.0), usage("b", 7, cpu_mean=4.0)],
        dict(
            gpu_minutes=60.0,
            used_gpu_minutes=29.0,
            gpus_idle=0,
            gpu_util_mean_percent=29 / 60 * 100,
            memory_peak_bytes=7 * GIB,
            # time-weighted over 10 and 50 minutes: (10*1 + 50*4)/60 = 3.5
            cpu_cores_mean=3.5,
        ),
    ),
    (
        # The same GPU in a 30-min try at 2 % and a 30-min retry at 10 %: its mean is 6 %, not idle.
        "same_gpu_across_retries",
        [pod("a", 0, 30), pod("b", 30, 60)],
        [gpu("a", 0, 2), gpu("b", 0, 10)],
        [usage("a", 1), usage("b", 1)],
        dict(gpu_minutes=60.0, used_gpu_minutes=0.6 + 3.0, gpus_idle=0, idle_gpu_minutes=0.0),
    ),
    (
        # Deleted at minute 30 before any container finished: held 30 min, not until the job's end (120).
        "deleted_before_finish",
        [pod("a", 0, None, gpus=2, deleted=30)],
        [gpu("a", 0, 50), gpu("a", 1, 50)],
        [usage("a", 3)],
        dict(gpu_minutes=60.0, used_gpu_minutes=30.0),
    ),
    (
        # Half a GPU (time-sliced replica or MIG share) for 120 min at 50 %: 60 GPU-min, 30 used.
        "fractional_gpu_equivalents",
        [pod("a", 0, 120, gpus=0.5)],
        [gpu("a", 0, 50)],
        [usage("a", 3)],
        dict(gpu_minutes=60.0, used_gpu_minutes=30.0, gpu_util_mean_percent=50.0, gpus_idle=0),
    ),
    (
        # Two pods in parallel, 2 GPUs each, 30 min: 120 GPU-min; peak memory is the larger pod peak,
        # p95 the busiest pod's.
        "parallel_pods",
        [pod("a", 0, 30, gpus=2), pod("b", 0, 30, gpus=2)],
        [gpu("a", 0, 100), gpu("a", 1, 100), gpu("b", 2, 50), gpu("b", 3, 0, 40)],
        [usage("a", 10, p95=3.0), usage("b", 12, p95=1.5)],
        # used = 2*30*(100+100)/2/100 + 2*30*(50+0)/2/100 = 60 + 15 = 75; idle: GPU 3, its half of
        # pod b's 2*30 GPU-min = 30
        dict(
            gpu_minutes=120.0,
            used_gpu_minutes=75.0,
            gpus_idle=1,
            idle_gpu_minutes=30.0,
            memory_peak_bytes=12 * GIB,
            gpu_memory_peak_bytes=40 * GIB,
            cpu_cores_p95=3.0,
        ),
    ),
    (
        # A pod that was never scheduled held nothing and has no usage to ask for.
        "unscheduled_pod_ignored",
        [pod("a", 0, 60), pod("b", None, None)],
        [gpu("a", 0, 20)],
        [usage("a", 2)],
        dict(gpu_minutes=60.0, used_gpu_minutes=12.0, memory_peak_bytes=2 * GIB),
    ),
]


@pytest.mark.parametrize(("name", "pods", "gpus", "pod_usage", "expected"), CASES, ids=[c[0] for c in CASES])
def test_figures(
    name: str,
    pods: list[PodRecord],
    gpus: list[GpuUsage],
    pod_usage: list[PodUsage],
    expected: dict[str, float],
) -> None:
    result = compute_usage(job(), pods, gpus, pod_usage, idle_util_percent=5, now=NOW)
    for figure, value in expected.items():
        assert getattr(result, figure) == pytest.approx(value), figure
        assert result.reason_for(figure) is None
    assert result.collected_at == NOW


# (case, pods, gpu rows, pod usage, figure, reason)
MISSING = [
    # 7 s between scheduling and the end: no scrape can have landed.
    (
        "shorter_than_scrape",
        [pod("a", 0, 7 / 60)],
        [],
        [],
        "used_gpu_minutes",
        MissingReason.SHORTER_THAN_SCRAPE,
    ),
    (
        "shorter_than_scrape_memory",
        [pod("a", 0, 7 / 60)],
        [],
        [],
        "memory_peak_bytes",
        MissingReason.SHORTER_THAN_SCRAPE,
    ),
    (
        "long_job_without_series",
        [pod("a", 0, 60)],
        [],
        [usage("a", 1)],
        "used_gpu_minutes",
        MissingReason.NO_SAMPLES,
    ),
    (
        "mig_without_util",
        [pod("a", 0, 60, gpus=3 / 7)],
        [gpu("a", 0, None, mig_profile="3g.40gb")],
        [usage("a", 1)],
        "gpus_idle",
        MissingReason.MIG_NO_UTIL,
    ),
    (
        "time_sliced_util",
        [pod("a", 0, 60)],
        [gpu("a", 0, 70, shared=True)],
        [usage("a", 1)],
        "used_gpu_minutes",
        MissingReason.SHARED_GPU,
    ),
    (
        "time_sliced_memory",
        [pod("a", 0, 60)],
        [gpu("a", 0, 70, shared=True)],
        [usage("a", 1)],
        "gpu_memory_peak_bytes",
        MissingReason.SHARED_GPU,
    ),
    (
        "no_gpu_requested",
        [pod("a", 0, 60, gpus=0)],
        [],
        [usage("a", 1)],
        "gpus_idle",
        MissingReason.NOT_REQUESTED,
    ),
    (
        "one_retry_unmeasured_memory",
        [pod("a", 0, 60), pod("b", 60, 120)],
        [gpu("a", 0, 50), gpu("b", 0, 50)],
        [usage("a", 4)],
        "memory_peak_bytes",
        MissingReason.NO_SAMPLES,
    ),
    (
        "cpu_counter_missing",
        [pod("a", 0, 60)],
        [gpu("a", 0, 50)],
        [usage("a", 4, cpu_mean=None)],
        "cpu_cores_mean",
        MissingReason.NO_SAMPLES,
    ),
]


@pytest.mark.parametrize(
    ("name", "pods", "gpus", "pod_usage", "figure", "reason"), MISSING, ids=[c[0] for c in MISSING]
)
def test_missing_figures_are_null_with_reason(
    name: str,
    pods: list[PodRecord],
    gpus: list[GpuUsage],
    pod_usage: list[PodUsage],
    figure: str,
    reason: MissingReason,
) -> None:
    result = compute_usage(job(), pods, gpus, pod_usage, idle_util_percent=5, now=NOW)
    assert getattr(result, figure) is None
    assert result.reason_for(figure) is reason
    # GPU-minutes come from timestamps, so they are always stated.
    assert result.gpu_minutes is not None


def test_mig_without_util_still_states_gpu_memory() -> None:
    rows = [gpu("a", 0, None, fb_gib=12, mig_profile="3g.40gb")]
    result = compute_usage(job(), [pod("a", 0, 70, gpus=3 / 7)], rows, [usage("a", 1)], 5, NOW)
    assert result.gpu_memory_peak_bytes == 12 * GIB
    assert result.gpu_minutes == pytest.approx(30.0)  # 3/7 GPU for 70 min


def test_prometheus_unavailable_marks_every_measured_figure() -> None:
    result = compute_usage(
        job(), [pod("a", 0, 60, gpus=2)], [], [], 5, NOW, missing_reason=MissingReason.PROMETHEUS_UNAVAILABLE
    )
    assert result.gpu_minutes == pytest.approx(120.0)
    measured = [
        "used_gpu_minutes",
        "gpus_idle",
        "gpu_util_mean_percent",
        "gpu_memory_peak_bytes",
        "memory_peak_bytes",
    ]
    for figure in measured:
        assert getattr(result, figure) is None
        assert result.reason_for(figure) is MissingReason.PROMETHEUS_UNAVAILABLE


@pytest.mark.parametrize(
    ("scheduled", "container_end", "deleted", "job_end", "expected_minutes"),
    [
        (0, 45, None, 120, 45),  # the last container's finishedAt
        (0, None, 30, 120, 30),  # deleted before it finished
        (0, None, None, 90, 90),  # nothing on the pod: the job's end
        (0, None, None, None, 300),  # still nothing: now (T0 + 5 h)
    ],
)
def test_held_interval(
    scheduled: float,
    container_end: float | None,
    deleted: float | None,
    job_end: float | None,
    expected_minutes: float,
) -> None:
    held = held_interval(pod("a", scheduled, container_end, deleted=deleted), job(job_end), NOW)
    assert held is not None
    assert held.minutes == pytest.approx(expected_minutes)


def test_requested_vs_used() -> None:
    result = compute_usage(job(), [pod("a", 0, 60)], [gpu("a", 0, 50)], [usage("a", 8, p95=2.0)], 5, NOW)
    ratio = requested_vs_used(Requested(gpus=1, cpu_cores=8, memory_bytes=32 * GIB), result)
    assert ratio.cpu_ratio == pytest.approx(0.25)
    assert ratio.memory_ratio == pytest.approx(0.25)
    no_request = requested_vs_used(Requested(gpus=1), result)
    assert no_request.cpu_ratio is None and no_request.memory_ratio is None


def agent_gpu(pod_uid: str, index: int, util: float | None, fb_gib: float | None = 10) -> GpuUsage:
    """A time-sliced GPU measured per process by the node agent: the figures are the pod's own share."""
    return gpu(pod_uid, index, util, fb_gib, shared=True, source=GPU_SOURCE_AGENT, sharing="agent_processes")


@pytest.mark.parametrize(
    ("equivalents", "share", "used", "util_mean", "idle"),
    [
        # Counted as a whole GPU (time-slicing with replicas of nvidia.com/gpu): 60 min x 20 % = 12.
        (1.0, 20.0, 12.0, 20.0, 0),
        # Counted as a quarter (nvidia.com/gpu.shared: 0.25): 15 GPU-min held, 60 x 20 % = 12 used.
        (0.25, 20.0, 12.0, 80.0, 0),
        # More than its quarter of the GPU: used is capped at what it is counted for (15).
        (0.25, 40.0, 15.0, 100.0, 0),
        # 1 % of the whole GPU is 4 % of its quarter: below the 5 % idle threshold.
        (0.25, 1.0, 0.6, 4.0, 1),
    ],
)
def test_time_sliced_gpu_measured_per_process(
    equivalents: float, share: float, used: float, util_mean: float, idle: int
) -> None:
    result = compute_usage(
        job(),
        [pod("a", 0, 60, gpus=equivalents)],
        [agent_gpu("a", 0, share, fb_gib=3)],
        [usage("a", 1)],
        idle_util_percent=5,
        now=NOW,
    )
    assert result.gpu_minutes == pytest.approx(60 * equivalents)
    assert result.used_gpu_minutes == pytest.approx(used)
    assert result.gpu_util_mean_percent == pytest.approx(util_mean)
    assert result.gpus_idle == idle
    assert result.gpu_memory_peak_bytes == 3 * GIB  # its own processes' peak, not the whole GPU's
    assert result.reason_for("used_gpu_minutes") is None


def test_one_gpu_shared_without_per_process_figures_states_nothing_for_the_job() -> None:
    result = compute_usage(
        job(),
        [pod("a", 0, 60, gpus=2)],
        [agent_gpu("a", 0, 30), gpu("a", 1, 90, shared=True, sharing="resource")],
        [usage("a", 1)],
        idle_util_percent=5,
        now=NOW,
    )
    assert result.used_gpu_minutes is None
    assert result.reason_for("used_gpu_minutes") is MissingReason.SHARED_GPU


def _role(p: PodRecord, role: str) -> PodRecord:
    return replace(p, role=role)


def test_a_multi_pod_run_has_its_figures_per_role() -> None:
    """1 master + 3 workers on 4 GPUs each for 60 min; two workers never used their GPUs."""
    run = job(
        finished=60,
        replicas=(ReplicaSpec("Master", 1), ReplicaSpec("Worker", 3)),
    )
    pods = [_role(pod("m", 0, 60, gpus=4), "Master")] + [
        _role(pod(f"w{i}", 0, 60, gpus=4), "Worker") for i in range(3)
    ]
    utils = {"m": 80.0, "w0": 80.0, "w1": 0.0, "w2": 1.0}
    rows = [gpu(uid, 10 * k + i, util) for k, (uid, util) in enumerate(utils.items()) for i in range(4)]
    figures = compute_usage(run, pods, rows, [usage(uid, 10) for uid in utils], 5.0, NOW)

    assert figures.gpu_minutes == 16 * 60
    master, workers = figures.replicas
    assert (master.role, master.pods, master.gpus_requested, master.gpu_minutes) == ("Master", 1, 4.0, 240.0)
    assert (workers.role, workers.pods, workers.gpus_requested, workers.gpu_minutes) == (
        "Worker",
        3,
        12.0,
        720.0,
    )
    assert (master.gpus_idle, workers.gpus_idle) == (0, 8)
    assert workers.idle_gpu_minutes == 8 * 60
    assert workers.used_gpu_minutes == pytest.approx(4 * 60 * 0.8 + 4 * 60 * 0.01)
    # The roles add up to the run.
    assert sum(r.gpu_minutes or 0 for r in figures.replicas) == figures.gpu_minutes
    assert sum(r.gpus_idle or 0 for r in figures.replicas) == figures.gpus_idle
    assert figures.held_after_end is None


def test_pods_that_keep_their_gpus_after_the_run_are_counted_and_named() -> None:
    run = job(finished=60, replicas=(ReplicaSpec("Launcher", 1), ReplicaSpec("Worker", 2)))
    launcher = _role(pod("l", 0, 60, gpus=0), "Launcher")
    # MPI workers run sshd and never end: still running when measured 40 min after the run.
    workers = [replace(_role(pod(f"w{i}", 0, None, gpus=4), "Worker"), phase="Running") for i in range(2)]
    figures = compute_usage(run, [launcher, *workers], [], [], 5.0, at(100))
    after = figures.held_after_end
    assert after is not None
    assert (after.pods, after.gpus, after.minutes, after.gpu_minutes) == (2, 8.0, 40.0, 320.0)
    assert figures.gpu_minutes == 2 * 4 * 100


def test_a_job_has_no_roles_and_stops_at_its_end() -> None:
    figures = compute_usage(job(finished=60), [pod("a", 0, None, gpus=1)], [], [], 5.0, at(100))
    assert figures.replicas == ()
    assert figures.held_after_end is None
    assert figures.gpu_minutes == 60
