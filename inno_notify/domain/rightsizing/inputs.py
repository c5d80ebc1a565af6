"""What every rule is given, and the facts several rules derive from it.

The rules must agree on which pods held resources, for how long, and whether their figures are
complete; deriving that once here keeps a rule to its own decision. Every helper answers None
when a figure it needs is missing, so that no rule can advise on a guess.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from inno_notify.domain.model import (
    ContainerRecord,
    GpuUsage,
    JobRecord,
    PodRecord,
    PodUsage,
    Requested,
    Usage,
)
from inno_notify.domain.rightsizing.family import FamilyRun
from inno_notify.domain.rightsizing.policy import RightsizingPolicy

OOM_KILLED = "OOMKilled"
WHOLE_GPU = "nvidia.com/gpu"
MIG_PREFIX = "nvidia.com/mig-"


@dataclass(frozen=True, slots=True)
class RuleInput:
    """One finished job with its measured usage and its family's recent runs (current first)."""

    job: JobRecord
    usage: Usage
    pods: tuple[PodRecord, ...]
    family: tuple[FamilyRun, ...]
    policy: RightsizingPolicy
    now: datetime


@dataclass(frozen=True, slots=True)
class MeasuredPod:
    """A pod that held resources, with its measured figures and how long it held them."""

    usage: PodUsage
    held_minutes: float


@dataclass(frozen=True, slots=True)
class OomKill:
    pod: PodRecord
    container: ContainerRecord
    limit_bytes: int | None


def held_minutes(pod: PodRecord) -> float | None:
    """Scheduled (else started) to finished (else deleted); None when either end is unknown."""
    start = pod.scheduled_at or pod.started_at
    end = pod.finished_at or pod.deleted_at
    if start is None or end is None:
        return None
    return max(0.0, (end - start).total_seconds() / 60)


def _held_pods(pods: Sequence[PodRecord]) -> list[PodRecord]:
    """Pods that were placed on a node; a pod never scheduled held nothing."""
    return [pod for pod in pods if pod.scheduled_at is not None or pod.started_at is not None]


def measured_pods(
    inp: RuleInput, figure: Callable[[PodUsage], float | int | None]
) -> list[MeasuredPod] | None:
    """Every pod that held resources, with ``figure`` measured on enough samples; else None."""
    by_uid = {u.pod_uid: u for u in inp.usage.pods}
    measured: list[MeasuredPod] = []
    for pod in _held_pods(inp.pods):
        minutes = held_minutes(pod)
        usage = by_uid.get(pod.uid)
        if minutes is None or usage is None:
            return None
        if figure(usage) is None or usage.samples < inp.policy.min_samples:
            return None
        measured.append(MeasuredPod(usage=usage, held_minutes=minutes))
    return measured or None


def gpu_resource(requested: Requested) -> tuple[str, float] | None:
    """The GPU resource a pod asks for (whole GPUs first, else a MIG slice) and how many."""
    amount = requested.extended.get(WHOLE_GPU)
    if amount:
        return WHOLE_GPU, float(amount)
    for key, value in sorted(requested.extended.items()):
        if key.startswith(MIG_PREFIX) and value:
            return key, float(value)
    return None


def measured_gpus(inp: RuleInput, per_pod: int) -> dict[str, list[GpuUsage]] | None:
    """The GPUs of every pod that held them, each fully measured and not shared; else None.

    A pod must show exactly ``per_pod`` GPUs: fewer means some were not measured, and a
    shared (time-sliced) GPU's figures belong to several pods at once.
    """
    by_pod: dict[str, list[GpuUsage]] = {}
    for gpu in inp.usage.gpus:
        by_pod.setdefault(gpu.pod_uid, []).append(gpu)
    if not by_pod:
        return None
    if any(pod.uid not in by_pod for pod in _held_pods(inp.pods)):
        return None
    for gpus in by_pod.values():
        if len(gpus) != per_pod:
            return None
        for gpu in gpus:
            if gpu.shared or gpu.util_mean_percent is None or gpu.held_minutes is None:
                return None
            if gpu.samples < inp.policy.min_samples:
                return None
    return by_pod


def _memory_limit(container: ContainerRecord) -> int | None:
    value = container.limits.get("memory")
    return int(value) if value else None


def oom_kills(pods: Sequence[PodRecord]) -> list[OomKill]:
    """Containers whose current or previous termination was an OOM kill."""
    kills: list[OomKill] = []
    for pod in pods:
        for container in pod.containers:
            states = (container.terminated, container.last_terminated)
            if any(state is not None and state.reason == OOM_KILLED for state in states):
                kills.append(OomKill(pod=pod, container=container, limit_bytes=_memory_limit(container)))
    return kills


def gpus_busy(usage: Usage, idle_percent: float) -> int | None:
    """Most GPUs of one pod that were not idle; None when any utilization is missing."""
    if not usage.gpus or any(g.util_mean_percent is None or g.shared for g in usage.gpus):
        return None
    busy: dict[str, int] = {}
    for gpu in usage.gpus:
        util = gpu.util_mean_percent
        busy[gpu.pod_uid] = busy.get(gpu.pod_uid, 0) + (1 if util is not None and util >= idle_percent else 0)
    return max(busy.values())


def current_run(
    job: JobRecord, usage: Usage, pods: Sequence[PodRecord], policy: RightsizingPolicy, now: datetime
) -> FamilyRun:
    """This job as a run of its family, so that it always counts in its family's figures."""
    limits = [kill.limit_bytes for kill in oom_kills(pods) if kill.limit_bytes is not None]
    if not limits and job.exit_reason == OOM_KILLED and job.requested.memory_limit_bytes:
        limits = [job.requested.memory_limit_bytes]
    return FamilyRun(
        job_uid=job.uid,
        finished_at=job.finished_at or now,
        memory_peak_bytes=usage.memory_peak_bytes,
        cpu_cores_p95=usage.cpu_cores_p95,
        gpu_memory_peak_bytes=usage.gpu_memory_peak_bytes,
        gpus_busy=gpus_busy(usage, policy.idle_gpu_util_percent),
        oom_limit_bytes=max(limits) if limits else None,
    )
