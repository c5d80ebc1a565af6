"""A job run with everything its page shows, stored as the service stores it: a 4-GPU training job
killed for memory after 3 h, two of its GPUs idle, with Kueue facts, a retry, advice with its
evidence and the usage series the chart is drawn from. Shared by the page tests and the script
that takes the screenshots in docs/pages.md."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from inno_notify.adapters.db import Store
from inno_notify.domain.model import (
    ContainerRecord,
    JobRecord,
    JobStatus,
    KueueInfo,
    MissingFigure,
    MissingReason,
    PodRecord,
    Recommendation,
    RecommendationKind,
    Requested,
    SeriesLine,
    SeriesPod,
    Severity,
    TerminatedState,
    Unit,
    Usage,
    UsageSeries,
)
from tests import stored

T0 = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
GIB = 1024**3
UID = "0b7c5a8e-1111-4c4c-9a9a-2f2f2f2f2f2f"
STEP = 120
POINTS = 96  # 3 h 12 min


def job(**changes: object) -> JobRecord:
    base = JobRecord(
        cluster="default",
        uid=UID,
        namespace="face-research",
        name="train-resnet-7",
        status=JobStatus.FAILED,
        reason="BackoffLimitExceeded",
        owner="alice@example.com",
        team="face",
        created_at=T0,
        first_scheduled_at=T0 + timedelta(minutes=2),
        started_at=T0 + timedelta(minutes=2),
        finished_at=T0 + timedelta(hours=3, minutes=14),
        exit_code=137,
        exit_reason="OOMKilled",
        requested=Requested(gpus=4.0, cpu_cores=16.0, memory_bytes=64 * GIB, extended={"nvidia.com/gpu": 4}),
        kueue=KueueInfo(
            local_queue="face-queue",
            cluster_queue="gpu-a100",
            workload_name="job-train-resnet-7-3f2a1",
            quota_reserved_at=T0 + timedelta(minutes=1),
            admitted_at=T0 + timedelta(minutes=1, seconds=2),
            evictions=1,
            preemptions=1,
            last_eviction_reason="Preempted",
        ),
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def pods(
    message: str = "CUDA out of memory? No: the kernel killed the trainer at 64 GiB.",
) -> list[PodRecord]:
    def pod(n: int, start: datetime, end: datetime, code: int, reason: str, text: str | None) -> PodRecord:
        return PodRecord(
            cluster="default",
            uid=f"pod-{n}",
            namespace="face-research",
            name=f"train-resnet-7-{n}x2kq",
            job_uid=UID,
            phase="Failed",
            created_at=start - timedelta(seconds=30),
            node=f"gpu-node-{n}",
            scheduled_at=start,
            started_at=start,
            finished_at=end,
            gpu_equivalents=4.0,
            containers=(
                ContainerRecord(
                    name="trainer",
                    terminated=TerminatedState(code, reason, message=text, started_at=start, finished_at=end),
                ),
            ),
        )

    return [
        pod(0, T0 + timedelta(minutes=2), T0 + timedelta(minutes=8), 1, "Error", "a retry's own failure"),
        pod(1, T0 + timedelta(minutes=9), T0 + timedelta(hours=3, minutes=14), 137, "OOMKilled", message),
    ]


def usage() -> Usage:
    return Usage(
        gpu_minutes=768.0,
        used_gpu_minutes=353.3,
        gpus_idle=2,
        idle_gpu_minutes=384.0,
        gpu_util_mean_percent=46.0,
        gpu_memory_peak_bytes=31 * GIB,
        memory_peak_bytes=int(63.9 * GIB),
        cpu_cores_p95=3.2,
        # Measured twice (a retry): the mean over both pods' time could not be stated.
        missing=(MissingFigure("cpu_cores_mean", MissingReason.NO_SAMPLES, "train-resnet-7-0x2kq"),),
        collected_at=T0 + timedelta(hours=3, minutes=16),
    )


def recommendations() -> list[Recommendation]:
    finished = job().finished_at
    assert finished is not None
    window = {"window_start": (T0 + timedelta(minutes=2)).isoformat(), "window_end": finished.isoformat()}
    return [
        Recommendation(
            kind=RecommendationKind.GPU_COUNT,
            severity=Severity.WARNING,
            current=4,
            suggested=2,
            unit=Unit.GPUS,
            message="2 of 4 GPUs stayed idle (mean util 0 % on GPUs gpu-node-1/2 and gpu-node-1/3 "
            'over 3 h 5 min): set resources.limits["nvidia.com/gpu"]: 4 → 2.',
            waste_gpu_minutes=384.0,
            field_path='resources.limits["nvidia.com/gpu"]',
            evidence={
                "samples": 740,
                "span_minutes": 185.0,
                "pods": 1,
                "idle_gpus": 2,
                "gpus": 4,
                "util_mean_max_percent": 0.0,
                "runs": 1,
                **window,
            },
        ),
        Recommendation(
            kind=RecommendationKind.MEMORY_INCREASE,
            severity=Severity.CRITICAL,
            current=64 * GIB,
            suggested=80 * GIB,
            unit=Unit.BYTES,
            message="Killed for memory at 63.9 GiB: request 80 GiB.",
            waste_gib_hours=0.0,
            field_path='resources.limits["memory"]',
            evidence={
                "oom_kills": 1,
                "pods": 1,
                "samples": 740,
                "runs": 1,
                "memory_peak_bytes": int(63.9 * GIB),
                **window,
            },
        ),
    ]


def series() -> UsageSeries:
    def wave(phase: float) -> tuple[float | None, ...]:
        return tuple(None if i < 4 else round(72 + 18 * math.sin(i / 6 + phase), 1) for i in range(POINTS))

    idle = tuple(None if i < 4 else 0.0 for i in range(POINTS))
    return UsageSeries(
        step_seconds=STEP,
        start=T0 + timedelta(minutes=2, seconds=STEP),
        gpu_util=(
            SeriesLine("gpu-node-1/0", "train-resnet-7-1x2kq", wave(0)),
            SeriesLine("gpu-node-1/1", "train-resnet-7-1x2kq", wave(1.3)),
            SeriesLine("gpu-node-1/2", "train-resnet-7-1x2kq", idle),
            SeriesLine("gpu-node-1/3", "train-resnet-7-1x2kq", idle),
        ),
        gpu_memory=tuple(
            SeriesLine(
                f"gpu-node-1/{g}",
                "train-resnet-7-1x2kq",
                tuple(None if i < 4 else (31.0 - 8 * g) * GIB if g < 2 else 0.4 * GIB for i in range(POINTS)),
            )
            for g in range(4)
        ),
        memory=(
            SeriesLine(
                "train-resnet-7-1x2kq",
                "train-resnet-7-1x2kq",
                tuple(None if i < 4 else min(63.9, 20 + i * 0.46) * GIB for i in range(POINTS)),
            ),
        ),
        pods=tuple(SeriesPod(p.name, p.node) for p in pods()),
    )


async def store_job(store: Store, record: JobRecord | None = None, *, with_series: bool = True) -> JobRecord:
    record = record or job()
    await stored.upsert_jobs(store, [record])
    await stored.upsert_pods(
        store, [replace(p, job_uid=record.uid, uid=f"{record.uid}-{p.uid}") for p in pods()]
    )
    await store.jobs.complete_summary(
        record.cluster,
        record.uid,
        usage(),
        recommendations(),
        [],
        usage_series=series() if with_series else None,
    )
    return record
