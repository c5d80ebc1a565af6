"""The job-level usage figures of CONTRACT.md §4, computed from pod records and measured usage.

Pure: the Prometheus adapter measures per GPU and per pod, this module adds them up into what a
researcher reads (GPU-minutes, used GPU-minutes, idle GPUs, peaks) and decides, figure by figure,
whether it can be stated at all. A figure that was not measured is ``None`` with a reason in
``Usage.missing`` — never 0, and never an average over the part that happened to be measured.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from inno_notify.domain.model import (
    GPU_SOURCE_AGENT,
    GpuUsage,
    HeldAfterEnd,
    JobRecord,
    MissingFigure,
    MissingReason,
    PodRecord,
    PodUsage,
    ReplicaUsage,
    Requested,
    Usage,
)

GPU_UTIL_FIGURES = ("used_gpu_minutes", "gpus_idle", "idle_gpu_minutes", "gpu_util_mean_percent")
GPU_MEMORY_FIGURES = ("gpu_memory_peak_bytes",)
POD_FIGURES = ("memory_peak_bytes", "cpu_cores_mean", "cpu_cores_p95")
GPU_MODEL_FIGURE = "gpu_model"


@dataclass(frozen=True, slots=True)
class HeldPod:
    """A pod that held its resources, and for how long."""

    pod: PodRecord
    start: datetime
    end: datetime

    @property
    def seconds(self) -> float:
        return max(0.0, (self.end - self.start).total_seconds())

    @property
    def minutes(self) -> float:
        return self.seconds / 60.0


def held_interval(pod: PodRecord, job: JobRecord, now: datetime) -> HeldPod | None:
    """From PodScheduled to the last container's finishedAt (else deletion, else the job's end, else now).

    ``None`` for a pod that was never scheduled: it held nothing. A multi-pod run's pod that is
    still running is held until now, past its run's end: training operators leave pods running
    after the run (`cleanPodPolicy: None`, Ray's pods), and those GPUs are taken all the same.
    """
    start = pod.scheduled_at or pod.started_at
    if start is None:
        return None
    finishes = [c.terminated.finished_at for c in pod.containers if c.terminated and c.terminated.finished_at]
    fallback = now if job.replicas else (job.finished_at or now)
    end = max(finishes) if finishes else (pod.finished_at or pod.deleted_at or fallback)
    return HeldPod(pod=pod, start=start, end=max(start, end))


# Pods that end within this of their run are part of its end, not held after it.
AFTER_END_GRACE_SECONDS = 60.0


def held_after_end(job: JobRecord, held: Sequence[HeldPod]) -> HeldAfterEnd | None:
    """The GPU pods that kept their GPUs past the run's end (beyond a minute's grace), or None."""
    if job.finished_at is None:
        return None
    ended = job.finished_at
    late = [
        h
        for h in held
        if h.pod.gpu_equivalents > 0 and (h.end - ended).total_seconds() > AFTER_END_GRACE_SECONDS
    ]
    if not late:
        return None
    after = [(h, max(0.0, (h.end - max(ended, h.start)).total_seconds()) / 60.0) for h in late]
    return HeldAfterEnd(
        pods=len(late),
        gpus=sum(h.pod.gpu_equivalents for h in late),
        minutes=max(minutes for _, minutes in after),
        gpu_minutes=sum(h.pod.gpu_equivalents * minutes for h, minutes in after),
    )


def replica_usage(
    job: JobRecord, pods: Sequence[PodRecord], measure: Callable[[Sequence[PodRecord]], Usage]
) -> tuple[ReplicaUsage, ...]:
    """A multi-pod run's figures per role, each `measure`d over the role's pods (compute_usage
    passes itself, so a role is computed like the run); roles in the order the run lists them,
    then any other its pods show."""
    by_role: dict[str, list[PodRecord]] = defaultdict(list)
    for pod in pods:
        by_role[pod.role or "other"].append(pod)
    if len(by_role) < 2 and not job.replicas:
        return ()
    order = [r.role for r in job.replicas] + sorted(set(by_role) - {r.role for r in job.replicas})
    result = []
    for role in order:
        members = by_role.get(role)
        if not members:
            continue
        figures = measure(members)
        result.append(
            ReplicaUsage(
                role=role,
                pods=len(members),
                gpus_requested=sum(p.gpu_equivalents for p in members),
                gpu_minutes=figures.gpu_minutes,
                used_gpu_minutes=figures.used_gpu_minutes,
                gpus_idle=figures.gpus_idle,
                idle_gpu_minutes=figures.idle_gpu_minutes,
                memory_peak_bytes=figures.memory_peak_bytes,
            )
        )
    return tuple(result)


def compute_usage(
    job: JobRecord,
    pods: Sequence[PodRecord],
    gpus: Sequence[GpuUsage],
    pod_usage: Sequence[PodUsage],
    idle_util_percent: float,
    now: datetime,
    missing_reason: MissingReason | None = None,
    *,
    scrape_interval_seconds: float = 15.0,
    by_role: bool = True,
) -> Usage:
    """Job totals per CONTRACT.md §4. ``missing_reason`` (e.g. ``prometheus_unavailable`` after giving
    up) marks every measured figure missing; GPU-minutes come from timestamps and are always stated.
    A multi-pod run also gets its figures per replica role (``by_role``) and the GPUs its pods held
    after it ended."""

    def measure_role(members: Sequence[PodRecord]) -> Usage:
        uids = {p.uid for p in members}
        return compute_usage(
            job,
            members,
            [g for g in gpus if g.pod_uid in uids],
            [u for u in pod_usage if u.pod_uid in uids],
            idle_util_percent,
            now,
            missing_reason,
            scrape_interval_seconds=scrape_interval_seconds,
            by_role=False,
        )

    held = [h for h in (held_interval(p, job, now) for p in pods) if h is not None]
    gpu_held = [h for h in held if h.pod.gpu_equivalents > 0]
    rows_by_pod: dict[str, list[GpuUsage]] = defaultdict(list)
    for row in gpus:
        rows_by_pod[row.pod_uid].append(row)
    usage_by_pod = {u.pod_uid: u for u in pod_usage}
    missing: list[MissingFigure] = []

    def mark(figures: Iterable[str], reason: MissingReason, who: Iterable[str]) -> None:
        detail = ", ".join(sorted(set(who))) or None
        missing.extend(MissingFigure(figure=f, reason=reason, detail=detail) for f in figures)

    gpu_minutes = sum(h.pod.gpu_equivalents * h.minutes for h in gpu_held)
    used = idle_count = idle_minutes = util_mean = fb_peak = None
    gpu_model = None
    if not gpu_held:
        mark((*GPU_UTIL_FIGURES, *GPU_MEMORY_FIGURES, GPU_MODEL_FIGURE), MissingReason.NOT_REQUESTED, ())
    elif missing_reason is not None:
        mark((*GPU_UTIL_FIGURES, *GPU_MEMORY_FIGURES, GPU_MODEL_FIGURE), missing_reason, ())
    else:
        gpu_model = _most_used_model(gpu_held, rows_by_pod)
        if gpu_model is None:
            no_rows = _gpu_reason(gpu_held, rows_by_pod, scrape_interval_seconds, need_util=False)
            if no_rows is not None and no_rows[0] is not MissingReason.SHARED_GPU:
                mark((GPU_MODEL_FIGURE,), *no_rows)
            else:  # series without a modelName label
                mark((GPU_MODEL_FIGURE,), MissingReason.NO_SAMPLES, ())
        util_reason = _gpu_reason(gpu_held, rows_by_pod, scrape_interval_seconds, need_util=True)
        mem_reason = _gpu_reason(gpu_held, rows_by_pod, scrape_interval_seconds, need_util=False)
        if util_reason is not None:
            mark(GPU_UTIL_FIGURES, *util_reason)
        else:
            used, idle_count, idle_minutes = _gpu_util_figures(gpu_held, rows_by_pod, idle_util_percent)
            util_mean = 100.0 * used / gpu_minutes if gpu_minutes > 0 else None
            if util_mean is None:
                mark(("gpu_util_mean_percent",), MissingReason.NO_SAMPLES, ())
        if mem_reason is not None:
            mark(GPU_MEMORY_FIGURES, *mem_reason)
        else:
            fb_peak = max(
                r.fb_used_peak_bytes
                for h in gpu_held
                for r in rows_by_pod[h.pod.uid]
                if r.fb_used_peak_bytes is not None
            )

    memory_peak = cpu_mean = cpu_p95 = None
    if missing_reason is not None:
        mark(POD_FIGURES, missing_reason, ())
    elif held:
        pod_reason = _pod_reason(held, usage_by_pod, scrape_interval_seconds)
        if pod_reason is not None:
            mark(POD_FIGURES, *pod_reason)
        else:
            measured = [(h, usage_by_pod[h.pod.uid]) for h in held]
            memory_peak = max(u.memory_peak_bytes for _, u in measured if u.memory_peak_bytes is not None)
            total_seconds = sum(h.seconds for h, _ in measured)
            cpu_means = [(h.seconds, u.cpu_cores_mean) for h, u in measured]
            if total_seconds > 0 and all(m is not None for _, m in cpu_means):
                cpu_mean = sum(s * (m or 0.0) for s, m in cpu_means) / total_seconds
            # Right-sizing compares with the per-pod request, so the job's p95 is its busiest pod's.
            p95s = [u.cpu_cores_p95 for _, u in measured]
            cpu_p95 = None if any(p is None for p in p95s) else max(p for p in p95s if p is not None)
            if cpu_mean is None:
                mark(("cpu_cores_mean",), MissingReason.NO_SAMPLES, ())
            if cpu_p95 is None:
                mark(("cpu_cores_p95",), MissingReason.NO_SAMPLES, ())
    else:
        mark(POD_FIGURES, MissingReason.NO_SAMPLES, ())

    return Usage(
        gpu_minutes=gpu_minutes,
        used_gpu_minutes=used,
        gpus_idle=idle_count,
        idle_gpu_minutes=idle_minutes,
        gpu_util_mean_percent=util_mean,
        gpu_memory_peak_bytes=fb_peak,
        memory_peak_bytes=memory_peak,
        cpu_cores_mean=cpu_mean,
        cpu_cores_p95=cpu_p95,
        gpu_model=gpu_model,
        gpus=tuple(r for h in gpu_held for r in rows_by_pod[h.pod.uid]),
        pods=tuple(usage_by_pod[h.pod.uid] for h in held if h.pod.uid in usage_by_pod),
        missing=tuple(missing),
        collected_at=now,
        replicas=replica_usage(job, pods, measure_role) if by_role else (),
        held_after_end=held_after_end(job, held) if by_role and job.replicas else None,
    )


def _most_used_model(gpu_held: Sequence[HeldPod], rows_by_pod: dict[str, list[GpuUsage]]) -> str | None:
    """The model of the GPUs that held most of the job's GPU-minutes (a pod's split evenly over its
    GPU rows; ties go to the first name); None where no row names one. Only the GPUs measured count:
    a model is not a sum, so the part not measured cannot make it wrong, only leave it unknown."""
    minutes: dict[str, float] = defaultdict(float)
    for h in gpu_held:
        rows = rows_by_pod.get(h.pod.uid, [])
        for row in rows:
            if row.model:
                minutes[row.model] += h.pod.gpu_equivalents * h.minutes / len(rows)
    return min(minutes, key=lambda m: (-minutes[m], m)) if minutes else None


def gpu_model_counts(gpus: Iterable[GpuUsage]) -> list[tuple[str, int]]:
    """(model, how many GPUs or MIG instances of it) for the job's per-GPU rows, most first: a GPU
    that served several pods (retries, time-slicing) counts once. A MIG instance is named by its
    GPU's model and its profile ("NVIDIA A100 80GB PCIe MIG 3g.40gb")."""
    devices: dict[str, set[str]] = defaultdict(set)
    for row in gpus:
        if row.model:
            name = f"{row.model} MIG {row.mig_profile}" if row.mig_profile else row.model
            devices[name].add(f"{row.uuid or ''}|{row.gpu}")
    return sorted(((m, len(d)) for m, d in devices.items()), key=lambda md: (-md[1], md[0]))


def _no_data_reason(h: HeldPod, scrape_interval_seconds: float) -> MissingReason:
    return (
        MissingReason.SHORTER_THAN_SCRAPE if h.seconds < scrape_interval_seconds else MissingReason.NO_SAMPLES
    )


def _first_reason(checks: Sequence[tuple[MissingReason, str]]) -> tuple[MissingReason, list[str]] | None:
    """The first of the (reason, pod name) found, with every pod it holds for; None if none."""
    if not checks:
        return None
    reason = checks[0][0]
    return reason, [name for r, name in checks if r == reason]


def _gpu_reason(
    gpu_held: Sequence[HeldPod],
    rows_by_pod: dict[str, list[GpuUsage]],
    scrape_interval_seconds: float,
    *,
    need_util: bool,
) -> tuple[MissingReason, list[str]] | None:
    """The first reason that a GPU figure cannot be stated, and the pods it concerns."""
    checks: list[tuple[MissingReason, str]] = []
    for h in gpu_held:
        rows = rows_by_pod.get(h.pod.uid, [])
        if not rows:
            checks.append((_no_data_reason(h, scrape_interval_seconds), h.pod.name))
        elif not all(r.own_share for r in rows):
            checks.append((MissingReason.SHARED_GPU, h.pod.name))
        elif need_util and any(r.util_mean_percent is None for r in rows):
            mig = any(r.mig_profile and r.util_mean_percent is None for r in rows)
            checks.append((MissingReason.MIG_NO_UTIL if mig else MissingReason.NO_SAMPLES, h.pod.name))
        elif not need_util and any(r.fb_used_peak_bytes is None for r in rows):
            checks.append((MissingReason.NO_SAMPLES, h.pod.name))
    return _first_reason(checks)


def _gpu_util_figures(
    gpu_held: Sequence[HeldPod], rows_by_pod: dict[str, list[GpuUsage]], idle_util_percent: float
) -> tuple[float, int, float]:
    """Used GPU-minutes, idle GPUs and idle GPU-minutes; every row has a utilization here."""
    used = 0.0
    # One physical GPU (or MIG instance) may serve several pods of the job (retries): its mean
    # over the job's time on it decides whether it idled.
    weighted: dict[str, list[tuple[float, float, float]]] = defaultdict(
        list
    )  # gpu -> (minutes, util, eq-min)
    for h in gpu_held:
        rows = rows_by_pod[h.pod.uid]
        per_row = h.pod.gpu_equivalents / len(rows)
        utils = [_util_of_allocation(r, per_row) for r in rows]
        used += h.pod.gpu_equivalents * h.minutes * (sum(utils) / len(utils)) / 100.0
        share = h.pod.gpu_equivalents * h.minutes / len(rows)
        for row, util in zip(rows, utils, strict=True):
            # The physical GPU: its UUID with the name (a MIG instance shares its GPU's UUID), so
            # that two pods' "GPU 0" on two nodes stay two GPUs.
            weighted[f"{row.uuid or ''}|{row.gpu}"].append((h.minutes, util, share))
    idle_count = 0
    idle_minutes = 0.0
    for parts in weighted.values():
        minutes = sum(m for m, _, _ in parts)
        mean = (
            sum(m * u for m, u, _ in parts) / minutes
            if minutes > 0
            else sum(u for _, u, _ in parts) / len(parts)
        )
        if mean < idle_util_percent:
            idle_count += 1
            idle_minutes += sum(s for _, _, s in parts)
    return used, idle_count, idle_minutes


def _util_of_allocation(row: GpuUsage, per_row: float) -> float:
    """A row's utilization relative to what the pod was allotted of that GPU.

    A GPU the pod held alone: its utilization. A shared GPU measured per process (the node agent):
    the pod's share of the whole GPU, divided by the fraction of a GPU the pod is counted for (e.g.
    0.25 for ``nvidia.com/gpu.shared: 0.25``), at most 100 %, so that used GPU-minutes never exceed
    the GPU-minutes the pod is counted for.
    """
    util = row.util_mean_percent or 0.0
    if not row.shared or row.source != GPU_SOURCE_AGENT or per_row <= 0 or per_row >= 1:
        return util
    return min(100.0, util / per_row)


def _pod_reason(
    held: Sequence[HeldPod], usage_by_pod: dict[str, PodUsage], scrape_interval_seconds: float
) -> tuple[MissingReason, list[str]] | None:
    checks = [
        (_no_data_reason(h, scrape_interval_seconds), h.pod.name)
        for h in held
        if (u := usage_by_pod.get(h.pod.uid)) is None or u.memory_peak_bytes is None
    ]
    return _first_reason(checks)


@dataclass(frozen=True, slots=True)
class RequestedVsUsed:
    """What one pod asked for against what the busiest pod used (ratios: used / requested)."""

    cpu_requested_cores: float | None
    cpu_used_p95_cores: float | None
    cpu_ratio: float | None
    memory_requested_bytes: int | None
    memory_peak_bytes: int | None
    memory_ratio: float | None


def requested_vs_used(requested: Requested, usage: Usage) -> RequestedVsUsed:
    """CPU p95 and peak memory against the per-pod request (the limit where no request is set)."""
    cpu = requested.cpu_cores if requested.cpu_cores is not None else requested.cpu_limit_cores
    memory = requested.memory_bytes if requested.memory_bytes is not None else requested.memory_limit_bytes
    return RequestedVsUsed(
        cpu_requested_cores=cpu,
        cpu_used_p95_cores=usage.cpu_cores_p95,
        cpu_ratio=_ratio(usage.cpu_cores_p95, cpu),
        memory_requested_bytes=memory,
        memory_peak_bytes=usage.memory_peak_bytes,
        memory_ratio=_ratio(usage.memory_peak_bytes, memory),
    )


def _ratio(used: float | None, requested: float | None) -> float | None:
    if used is None or requested is None or requested <= 0:
        return None
    return used / requested
