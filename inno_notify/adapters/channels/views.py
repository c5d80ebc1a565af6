"""The view model of a job summary: every figure already spelt for humans, nothing left to compute.

Templates are user-overridable, so they must not need arithmetic or knowledge of the domain
classes: they get plain strings ("3 h 12 min", "42.5 GiB of 64 GiB", "110 / 240 GPU-min") and the
raw identifiers needed for links. A figure that was not measured is "n/a (reason)", never 0.
The strings are NOT escaped here; the channel's template environment escapes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from inno_notify.adapters.channels import figures
from inno_notify.domain.accounting import gpu_model_counts
from inno_notify.domain.model import (
    GPU_SOURCE_AGENT,
    JobRecord,
    JobStatus,
    Link,
    MissingReason,
    Recommendation,
    ReplicaUsage,
    Usage,
    UsageSeries,
    WorkloadKind,
)

TOP_RECOMMENDATIONS = 3
# Kinds a title does not name: a Job (the common case) and a pod.
_PLAIN_KINDS = frozenset({WorkloadKind.JOB, WorkloadKind.POD, WorkloadKind.WORKSPACE})


@dataclass(frozen=True, slots=True)
class RecommendationView:
    severity: str
    message: str
    field_path: str | None


@dataclass(frozen=True, slots=True)
class SummaryView:
    """One finished job as a message shows it."""

    cluster: str
    namespace: str
    name: str
    uid: str
    status: str
    # "failed (BackoffLimitExceeded)" or just "succeeded".
    status_text: str
    failed: bool
    exit_text: str
    runtime: str
    queue_wait: str
    gpu_minutes: str
    gpu_util: str
    peak_memory: str
    peak_gpu_memory: str
    recommendations: tuple[RecommendationView, ...]
    # Recommendations beyond the top ones, so a template can say "and 2 more".
    more_recommendations: int
    started_at: datetime | None
    finished_at: datetime | None
    # Raw numbers for a group's totals; None where not measured.
    held_gpu_minutes: float | None
    used_gpu_minutes: float | None
    # Links the job's annotations name (an MLflow run), checked web URLs.
    links: tuple[Link, ...] = ()
    # The job's pods and the nodes they ran on (its usage series), for the log and Grafana links.
    pods: tuple[str, ...] = ()
    nodes: tuple[str, ...] = ()
    # The job's family and all its advice as computed, so that a grouped message can state the
    # advice once per family (domain.rightsizing.sweeps).
    family: str | None = None
    advice: tuple[Recommendation, ...] = ()
    # Kueue's preemptions and evictions of the job (_evictions); "" when there were none.
    evictions: str = ""
    # What kind of run it was, as the title names it ("PyTorchJob"); "" for a Job or a pod.
    kind_label: str = ""
    # A multi-pod run's figures per replica role, one line each; its restarts; the GPUs its pods
    # kept after it ended ("" when none).
    replicas: tuple[str, ...] = ()
    attempts: str = ""
    after_end: str = ""
    # The GPUs it ran on ("4 × NVIDIA A100-SXM4-80GB"); "" when it asked for none.
    gpu_model: str = ""

    @property
    def job_ref(self) -> str:
        return f"{self.namespace}/{self.name}"

    @classmethod
    def from_records(
        cls,
        job: JobRecord,
        usage: Usage | None,
        recommendations: Sequence[Recommendation] = (),
        *,
        top: int = TOP_RECOMMENDATIONS,
        series: UsageSeries | None = None,
    ) -> SummaryView:
        ranked = sorted(recommendations, key=_waste_rank, reverse=True)
        pods = series.pods if series is not None else ()
        return cls(
            cluster=job.cluster,
            namespace=job.namespace,
            name=job.name,
            uid=job.uid,
            status=job.status.value,
            status_text=f"{job.status.value} ({job.reason})" if job.reason else job.status.value,
            failed=job.status is JobStatus.FAILED,
            exit_text=_exit_text(job),
            runtime=_seconds(job.runtime_seconds),
            queue_wait=_seconds(job.queue_seconds),
            gpu_minutes=_gpu_minutes(job, usage),
            gpu_util=_gpu_util(job, usage),
            peak_memory=_peak_memory(job, usage),
            peak_gpu_memory=_peak_gpu_memory(job, usage),
            recommendations=tuple(
                RecommendationView(r.severity.value, r.message, r.field_path) for r in ranked[:top]
            ),
            more_recommendations=max(0, len(ranked) - top),
            started_at=job.started_at,
            finished_at=job.finished_at,
            held_gpu_minutes=usage.gpu_minutes if usage else None,
            used_gpu_minutes=usage.used_gpu_minutes if usage else None,
            links=job.links,
            pods=tuple(dict.fromkeys(p.name for p in pods)),
            nodes=tuple(dict.fromkeys(p.node for p in pods if p.node)),
            family=job.family,
            advice=tuple(ranked),
            evictions=_evictions(job),
            kind_label="" if job.kind in _PLAIN_KINDS else job.kind.api_name,
            replicas=tuple(_replica_line(r) for r in usage.replicas) if usage else (),
            attempts=f"{job.attempts} attempts (restarted {job.attempts - 1}×)" if job.attempts > 1 else "",
            after_end=_after_end(usage),
            gpu_model=_gpu_model(job, usage),
        )


def _replica_line(replica: ReplicaUsage) -> str:
    """ "Worker × 3 (12 GPUs): 480 / 720 GPU-min, 8 idle GPUs, peak RAM 10 GiB"."""
    head = f"{replica.role} × {replica.pods}"
    if replica.gpus_requested > 0:
        head += f" ({figures.gpus(replica.gpus_requested)})"
    parts = []
    if replica.gpu_minutes:
        parts.append(figures.used_of_held(replica.used_gpu_minutes, replica.gpu_minutes))
    if replica.gpus_idle:
        parts.append(f"{replica.gpus_idle} idle GPU{'s' if replica.gpus_idle > 1 else ''}")
    if replica.memory_peak_bytes is not None:
        parts.append(f"peak RAM {figures.size(replica.memory_peak_bytes)}")
    return f"{head}: {', '.join(parts)}" if parts else head


def _after_end(usage: Usage | None) -> str:
    after = usage.held_after_end if usage is not None else None
    if after is None:
        return ""
    pods = f"{after.pods} pod{'s' if after.pods > 1 else ''}"
    return (
        f"{pods} held {figures.gpus(after.gpus)} for {figures.duration(after.minutes * 60)} "
        f"after the run ended ({figures.gpu_minutes(after.gpu_minutes)} GPU-min)"
    )


def _evictions(job: JobRecord) -> str:
    """How often Kueue took the job's quota away: "preempted 2× by Kueue, evicted 1× otherwise
    (last: PodsReadyTimeout)"; "" when it never did."""
    k = job.kueue
    if k is None or (k.evictions == 0 and k.preemptions == 0):
        return ""
    others = max(0, k.evictions - k.preemptions)
    if k.preemptions:
        text = f"preempted {k.preemptions}× by Kueue" + (f", evicted {others}× otherwise" if others else "")
    else:
        text = f"evicted {k.evictions}× by Kueue"
    if k.last_eviction_reason:
        text += f" (last: {k.last_eviction_reason})"
    return text


@dataclass(frozen=True, slots=True)
class GroupTotals:
    jobs: int
    succeeded: int
    failed: int
    gpu_minutes: str


def group_totals(views: Sequence[SummaryView]) -> GroupTotals:
    """Totals of a grouped summary; jobs without figures are named, not counted as 0."""
    held = [v.held_gpu_minutes for v in views if v.held_gpu_minutes is not None]
    used = [v.used_gpu_minutes for v in views if v.used_gpu_minutes is not None]
    if not held:
        text = figures.not_available(MissingReason.NOT_COLLECTED if views else None)
    else:
        text = figures.used_of_held(sum(used) if used else None, sum(held))
        unmeasured = len(views) - len(held)
        if unmeasured:
            text += f" ({unmeasured} job{'s' if unmeasured > 1 else ''} not measured)"
        elif len(used) < len(held):
            text += f" (used not measured for {len(held) - len(used)})"
    return GroupTotals(
        jobs=len(views),
        succeeded=sum(1 for v in views if v.status == JobStatus.SUCCEEDED.value),
        failed=sum(1 for v in views if v.failed),
        gpu_minutes=text,
    )


def _waste_rank(rec: Recommendation) -> tuple[float, float, float]:
    return (rec.waste_gpu_minutes, rec.waste_gib_hours, rec.waste_core_hours)


def _reason(usage: Usage | None, figure: str) -> MissingReason | None:
    if usage is None:
        return MissingReason.NOT_COLLECTED
    return usage.reason_for(figure)


def _seconds(value: float | None) -> str:
    return figures.not_available(None) if value is None else figures.duration(value)


def _exit_text(job: JobRecord) -> str:
    if job.exit_code is None:
        return figures.not_available("no terminated container")
    if job.exit_reason:
        return f"{job.exit_code} ({job.exit_reason})"
    return str(job.exit_code)


def _gpu_minutes(job: JobRecord, usage: Usage | None) -> str:
    if job.requested.gpus <= 0 and (usage is None or not usage.gpu_minutes):
        return "no GPU requested"
    if usage is None or usage.gpu_minutes is None:
        return figures.not_available(_reason(usage, "gpu_minutes"))
    return figures.used_of_held(usage.used_gpu_minutes, usage.gpu_minutes, _reason(usage, "used_gpu_minutes"))


def _gpu_util(job: JobRecord, usage: Usage | None) -> str:
    if job.requested.gpus <= 0:
        return "no GPU requested"
    if usage is None or usage.gpu_util_mean_percent is None:
        return figures.not_available(_reason(usage, "gpu_util_mean_percent"))
    text = f"{figures.number(usage.gpu_util_mean_percent)} % mean"
    if usage.gpus_idle:
        text += f", {usage.gpus_idle} idle GPU{'s' if usage.gpus_idle > 1 else ''}"
    return text + _shared_note(usage)


def _gpu_model(job: JobRecord, usage: Usage | None) -> str:
    """ "4 × NVIDIA A100-SXM4-80GB"; on several models the most used first ("2 × … + 1 × …")."""
    if job.requested.gpus <= 0:
        return ""
    counts = gpu_model_counts(usage.gpus) if usage is not None else []
    if not counts:
        return figures.not_available(_reason(usage, "gpu_model"))
    return " + ".join(f"{n} × {model}" for model, n in counts)


def _peak_memory(job: JobRecord, usage: Usage | None) -> str:
    if usage is None or usage.memory_peak_bytes is None:
        return figures.not_available(_reason(usage, "memory_peak_bytes"))
    peak = figures.size(usage.memory_peak_bytes)
    requested = job.requested.memory_bytes
    if requested is None:
        return f"{peak} (no request)"
    return f"{peak} of {figures.size(requested)}"


def _peak_gpu_memory(job: JobRecord, usage: Usage | None) -> str:
    if job.requested.gpus <= 0:
        return "no GPU requested"
    if usage is None or usage.gpu_memory_peak_bytes is None:
        return figures.not_available(_reason(usage, "gpu_memory_peak_bytes"))
    peak = figures.size(usage.gpu_memory_peak_bytes)
    totals = [g.fb_total_bytes for g in usage.gpus if g.fb_total_bytes is not None]
    return (f"{peak} of {figures.size(max(totals))}" if totals else peak) + _shared_note(usage)


def _shared_note(usage: Usage) -> str:
    """Figures of a time-sliced GPU that the node agent measured per process are this job's share of
    it, not the whole GPU's: say so beside them."""
    if any(g.shared and g.source == GPU_SOURCE_AGENT for g in usage.gpus):
        return " (shared GPU: this job's share)"
    return ""
