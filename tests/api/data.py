"""A small, hand-checkable population of jobs, usage, recommendations and notifications."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from inno_notify.adapters.db import Store
from inno_notify.domain.model import (
    JobRecord,
    JobStatus,
    MissingFigure,
    MissingReason,
    Recommendation,
    RecommendationKind,
    ReplicaSpec,
    ReplicaUsage,
    Requested,
    Severity,
    Unit,
    Usage,
    WorkloadKind,
)
from tests import stored
from tests.adapters.db.records import T0, job

GIB = 1024**3
HOUR = timedelta(hours=1)


def usage_of(gpu: float | None, used: float | None, idle: float | None, peak: int | None) -> Usage:
    missing = (
        ()
        if gpu is not None
        else (
            MissingFigure("gpu_minutes", MissingReason.PROMETHEUS_UNAVAILABLE),
            MissingFigure("gpu_model", MissingReason.PROMETHEUS_UNAVAILABLE),
        )
    )
    return Usage(
        gpu_model=None if gpu is None else GPU_MODEL,
        gpu_minutes=gpu,
        used_gpu_minutes=used,
        idle_gpu_minutes=idle,
        gpus_idle=None if gpu is None else 1,
        memory_peak_bytes=peak,
        missing=missing,
    )


GPU_MODEL = "NVIDIA A100-SXM4-80GB"
# What right-sizing computed the advice from (the job page and the Job resource show it).
EVIDENCE: dict[str, float | int | str] = {
    "samples": 240,
    "span_minutes": 60.0,
    "pods": 1,
    "idle_gpus": 2,
    "gpus": 4,
    "util_mean_max_percent": 0.4,
    "runs": 1,
    "window_start": "2026-11-30T10:00:00+00:00",
    "window_end": "2026-11-30T11:00:00+00:00",
}


def rec(
    kind: RecommendationKind, waste: float, gib_hours: float = 0.0, message: str = "advice"
) -> Recommendation:
    return Recommendation(
        kind=kind,
        severity=Severity.WARNING,
        current=4,
        suggested=2,
        unit=Unit.GPUS,
        message=message,
        waste_gpu_minutes=waste,
        waste_gib_hours=gib_hours,
        evidence=EVIDENCE,
    )


def jobs() -> list[JobRecord]:
    """Six jobs in two teams and three namespaces; `a`…`e` finished an hour apart, `r` runs."""

    def one(uid: str, hours: int, **changes: object) -> JobRecord:
        finished = T0 + hours * HOUR
        fields: dict[str, object] = {
            "name": f"train-{uid}",
            "family": f"fam-{uid}",
            "status": JobStatus.SUCCEEDED,
            "created_at": finished - 2 * HOUR,
            "started_at": finished - HOUR,
            "first_scheduled_at": finished - HOUR - timedelta(minutes=2),
            "finished_at": finished,
            "requested": Requested(gpus=2.0, cpu_cores=8.0, memory_bytes=16 * GIB, parallelism=2),
        }
        return job(uid, **{**fields, **changes})

    return [
        one("a", 1, team="face", owner="alice@example.com", namespace="face-research"),
        one("b", 2, team="face", owner="bob@example.com", namespace="face-research", status=JobStatus.FAILED),
        one("c", 3, team="face", owner="alice@example.com", namespace="face-infer"),
        # A distributed training run: a Master and two Workers, restarted once.
        one(
            "d",
            4,
            team="speech",
            owner="carol@example.com",
            namespace="speech",
            kind=WorkloadKind.PYTORCH_JOB,
            attempts=2,
            replicas=(
                ReplicaSpec("Master", 1, Requested(gpus=2.0, parallelism=1)),
                ReplicaSpec("Worker", 2, Requested(gpus=2.0, parallelism=1)),
            ),
        ),
        one("e", 5, team=None, owner=None, namespace="speech"),
        replace(
            one(
                "r", 6, team="speech", owner="carol@example.com", namespace="speech", status=JobStatus.RUNNING
            ),
            finished_at=None,
            started_at=T0 + 5 * HOUR,
            created_at=T0 + 5 * HOUR,
        ),
    ]


USAGE = {
    "a": usage_of(120.0, 60.0, 30.0, 4 * GIB),
    "b": usage_of(60.0, 15.0, 45.0, None),
    "c": usage_of(None, None, None, 8 * GIB),
    "d": replace(
        usage_of(240.0, 200.0, 0.0, 10 * GIB),
        replicas=(
            ReplicaUsage("Master", 1, 2.0, 80.0, 70.0, 0, 0.0, 10 * GIB),
            ReplicaUsage("Worker", 3, 6.0, 160.0, 130.0, 0, 0.0, 8 * GIB),
        ),
    ),
}
RECOMMENDATIONS = {
    "a": [
        rec(RecommendationKind.GPU_COUNT, 30.0, message="a: gpus"),
        rec(RecommendationKind.MEMORY, 0.0, 5.0),
    ],
    "b": [rec(RecommendationKind.IDLE_GPU, 45.0, message="b: idle")],
    "d": [rec(RecommendationKind.CPU, 0.0, 0.0, message="d: cpu")],
}


async def populate(store: Store) -> list[JobRecord]:
    records = jobs()
    await stored.upsert_jobs(store, records)
    for uid, figures in USAGE.items():
        await stored.save_usage(store, "default", uid, figures)
    for uid, recs in RECOMMENDATIONS.items():
        await stored.save_recommendations(store, "default", uid, recs)
    return records
