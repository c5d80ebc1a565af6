"""Builds a finished job, its pods and its measured usage from a few figures, for the rule tests."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from inno_notify.domain.model import (
    ContainerRecord,
    GpuUsage,
    JobRecord,
    JobStatus,
    MissingFigure,
    MissingReason,
    PodRecord,
    PodUsage,
    Requested,
    TerminatedState,
    Usage,
)
from inno_notify.domain.rightsizing import FamilyRun

GIB = 1024**3
GB = 10**9
T0 = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
A100_80 = "NVIDIA A100-SXM4-80GB"
A100_40 = "NVIDIA A100-SXM4-40GB"
H200 = "NVIDIA H200"
T4 = "Tesla T4"


def build(
    *,
    pods: int = 1,
    minutes: float = 60.0,
    gpus: int = 0,
    mig: str | None = None,
    util: Sequence[Sequence[float | None]] | Sequence[float | None] = (),
    fb_peak: int | None = None,
    model: str = A100_80,
    fb_total: int | None = 80 * GIB,
    shared: bool = False,
    gpu_pods: int | None = None,
    mem_request: int | None = None,
    mem_limit: int | None = None,
    mem_peak: int | Sequence[int | None] | None = None,
    cpu_request: float | None = None,
    cpu_limit: float | None = None,
    cpu_p95: float | Sequence[float | None] | None = None,
    samples: int = 120,
    oom_limit: int | None = None,
    oom: bool = False,
    oom_restarted: bool = False,
    status: JobStatus = JobStatus.SUCCEEDED,
    missing: Sequence[str] = (),
) -> tuple[JobRecord, Usage, list[PodRecord]]:
    """One finished job of ``pods`` identical pods, each holding its resources ``minutes`` long.

    ``util`` is one list of per-GPU mean utilizations (the same for every pod) or one list per
    pod; ``mem_peak``/``cpu_p95`` one figure for every pod or one per pod; ``gpu_pods`` limits
    how many pods have GPU figures (to model an unmeasured pod).
    """
    end = T0 + timedelta(minutes=minutes)
    extended: dict[str, float] = {}
    if gpus:
        extended["nvidia.com/gpu"] = gpus
    if mig:
        extended[f"nvidia.com/mig-{mig}"] = 1
    job = JobRecord(
        cluster="c",
        uid="job-1",
        namespace="ns",
        name="train-7",
        status=status,
        started_at=T0,
        finished_at=end,
        exit_reason="OOMKilled" if (oom or oom_limit) and not oom_restarted else None,
        requested=Requested(
            gpus=float(gpus or (1 if mig else 0)),
            cpu_cores=cpu_request,
            memory_bytes=mem_request,
            cpu_limit_cores=cpu_limit,
            memory_limit_bytes=oom_limit if oom_limit is not None else mem_limit,
            extended=extended,
            parallelism=pods,
        ),
    )
    nested = bool(util) and isinstance(util[0], Sequence)
    per_pod_util: list[list[float | None]] = (
        [list(u) for u in util] if nested else [list(util)] * pods  # type: ignore[arg-type]
    )
    peaks = list(mem_peak) if isinstance(mem_peak, Sequence) else [mem_peak] * pods
    cpus = list(cpu_p95) if isinstance(cpu_p95, Sequence) else [cpu_p95] * pods
    records: list[PodRecord] = []
    pod_usage: list[PodUsage] = []
    gpu_usage: list[GpuUsage] = []
    for i in range(pods):
        uid, name = f"pod-{i}", f"train-7-{i}"
        limits: dict[str, float] = {}
        if oom_limit is not None:
            limits["memory"] = oom_limit
        elif mem_limit is not None:
            limits["memory"] = mem_limit
        killed = TerminatedState(exit_code=137, reason="OOMKilled", finished_at=end)
        first_oom = (oom or oom_limit is not None) and i == 0
        container = ContainerRecord(
            name="main",
            limits=limits,
            terminated=None if not first_oom or oom_restarted else killed,
            last_terminated=killed if first_oom and oom_restarted else None,
        )
        records.append(
            PodRecord(
                cluster="c",
                uid=uid,
                namespace="ns",
                name=name,
                job_uid="job-1",
                phase="Failed" if first_oom else "Succeeded",
                created_at=T0,
                scheduled_at=T0,
                started_at=T0,
                finished_at=end,
                containers=(container,),
            )
        )
        if peaks[i] is not None or cpus[i] is not None:
            pod_usage.append(
                PodUsage(
                    pod_uid=uid,
                    pod_name=name,
                    memory_peak_bytes=peaks[i],
                    cpu_cores_p95=cpus[i],
                    samples=samples,
                )
            )
        if i < (pods if gpu_pods is None else gpu_pods):
            for index, value in enumerate(per_pod_util[i] if i < len(per_pod_util) else []):
                gpu_usage.append(
                    GpuUsage(
                        pod_uid=uid,
                        pod_name=name,
                        gpu=str(index),
                        model=model,
                        mig_profile=mig,
                        held_minutes=minutes,
                        util_mean_percent=value,
                        fb_used_peak_bytes=fb_peak,
                        fb_total_bytes=fb_total,
                        shared=shared,
                        samples=samples,
                    )
                )
    known_peaks = [p for p in peaks if p is not None]
    known_cpus = [c for c in cpus if c is not None]
    usage = Usage(
        memory_peak_bytes=max(known_peaks) if known_peaks and len(known_peaks) == pods else None,
        cpu_cores_p95=max(known_cpus) if known_cpus and len(known_cpus) == pods else None,
        gpu_memory_peak_bytes=fb_peak,
        gpus=tuple(gpu_usage),
        pods=tuple(pod_usage),
        missing=tuple(MissingFigure(figure=f, reason=MissingReason.NO_SAMPLES) for f in missing),
    )
    return job, usage, records


def run(
    n: int,
    *,
    days_ago: float = 1.0,
    mem_peak: int | None = None,
    cpu_p95: float | None = None,
    fb_peak: int | None = None,
    gpus_busy: int | None = None,
    oom_limit: int | None = None,
) -> FamilyRun:
    """An earlier run of the family, finished ``days_ago`` before T0 + 1 day."""
    return FamilyRun(
        job_uid=f"old-{n}",
        finished_at=T0 - timedelta(days=days_ago) + timedelta(hours=n),
        memory_peak_bytes=mem_peak,
        cpu_cores_p95=cpu_p95,
        gpu_memory_peak_bytes=fb_peak,
        gpus_busy=gpus_busy,
        oom_limit_bytes=oom_limit,
    )
