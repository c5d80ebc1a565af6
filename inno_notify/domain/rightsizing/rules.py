"""The right-sizing rules: one pure function per rule, registered in ``RULES``.

Each rule looks at one resource, answers one ``Recommendation`` or None, and never guesses: a
figure that was not measured (or measured on too few samples) means no advice. Decreases are
reported only when material and never go below the observed peak × headroom; increases follow
every OOM kill. docs/rightsizing.md gives each rule's formula and where it comes from.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from operator import attrgetter

from inno_notify.domain.model import (
    GpuUsage,
    JobStatus,
    PodUsage,
    Recommendation,
    RecommendationKind,
    Severity,
    Unit,
    Usage,
)
from inno_notify.domain.rightsizing.family import FamilyFigure, FamilyRun, family_p95
from inno_notify.domain.rightsizing.inputs import (
    MIG_PREFIX,
    OOM_KILLED,
    WHOLE_GPU,
    MeasuredPod,
    RuleInput,
    gpu_resource,
    measured_gpus,
    measured_pods,
    oom_kills,
)
from inno_notify.domain.rightsizing.mig import (
    MIG_PROFILES,
    MigProfile,
    mig_family,
    smallest_fitting,
)
from inno_notify.domain.rightsizing.quantities import (
    GIB,
    and_list,
    cores,
    count,
    duration,
    exact,
    gib,
    percent,
    quantity_bytes,
    round_cores_up,
    round_memory_up,
    scaled,
    severity_for,
)

Rule = Callable[[RuleInput], Recommendation | None]

# The GPU operator's name for time-sliced GPUs when it renames them (renameByDefault).
SHARED_GPU = "nvidia.com/gpu.shared"


def _limits(key: str) -> str:
    return f'resources.limits["{key}"]'


def _runs_note(figure: FamilyFigure | None) -> str:
    return f", based on your last {figure.runs} runs" if figure is not None else ""


def _runs(figure: FamilyFigure | None) -> int:
    """Runs behind a suggestion: the family's, or this one alone."""
    return figure.runs if figure is not None else 1


def _per_pod(pods: Sequence[MeasuredPod]) -> str:
    return f" per pod ({len(pods)} pods)" if len(pods) > 1 else ""


def _pods_evidence(
    pods: Sequence[MeasuredPod], span: float, family: FamilyFigure | None, **figures: float | int
) -> dict[str, float | int | str]:
    """The evidence of a per-pod request rule (memory, cpu): samples, span, pods, the figure, runs."""
    return {
        "samples": min(p.usage.samples for p in pods),
        "span_minutes": round(span, 1),
        "pods": len(pods),
        **figures,
        "runs": _runs(family),
    }


def gpu_severity(inp: RuleInput, waste: float) -> Severity | None:
    p = inp.policy
    return severity_for(waste, p.min_waste_gpu_minutes, p.warning_gpu_minutes, p.critical_gpu_minutes)


def idle_gpus(inp: RuleInput) -> Recommendation | None:
    """``gpu_count`` / ``idle_gpu``: k of N GPUs of every pod idle → request N − k; all idle → 0."""
    policy = inp.policy
    resource = gpu_resource(inp.job.requested)
    if resource is None or not resource[1].is_integer():
        return None
    key, amount = resource
    per_pod = int(amount)
    by_pod = measured_gpus(inp, per_pod)
    if by_pod is None:
        return None

    def is_idle(gpu: GpuUsage) -> bool:
        return gpu.util_mean_percent is not None and gpu.util_mean_percent < policy.idle_gpu_util_percent

    busy_now = max(sum(1 for g in gpus if not is_idle(g)) for gpus in by_pod.values())
    family = family_p95(inp.family, lambda r: r.gpus_busy, policy.family_min_runs)
    target = max(busy_now, math.ceil(family.value)) if family is not None else busy_now
    if target >= per_pod:
        return None
    idle = [g for gpus in by_pod.values() for g in gpus if is_idle(g)]
    waste = sum(g.held_minutes or 0.0 for g in idle)
    severity = gpu_severity(inp, waste)
    if severity is None:
        return None
    span = max(g.held_minutes or 0.0 for gpus in by_pod.values() for g in gpus)
    worst = max(g.util_mean_percent or 0.0 for g in idle)
    util_text = f"mean util {percent(worst)}" if worst == 0 else f"mean util at most {percent(worst)}"
    total = per_pod * len(by_pod)
    if len(by_pod) == 1:
        names = [g.gpu for g in idle]
        plural = "GPUs" if len(names) > 1 else "GPU"
        where = f"on all {per_pod} GPUs" if target == 0 else f"on {plural} {and_list(names)}"
    else:
        where = f"on {len(idle)} of {total} GPUs in {len(by_pod)} pods"
    change = f"set {_limits(key)}: {per_pod} → {target}{_runs_note(family)}"
    evidence: dict[str, float | int | str] = {
        "samples": min(g.samples for gpus in by_pod.values() for g in gpus),
        "span_minutes": round(span, 1),
        "pods": len(by_pod),
        "idle_gpus": len(idle),
        "gpus": total,
        "util_mean_max_percent": round(worst, 2),
        "runs": _runs(family),
    }
    seen = f"({util_text} {where} over {duration(span)})"
    if target == 0:
        # No GPU used at all: the whole request is waste, whatever its amount.
        kind, severity = RecommendationKind.IDLE_GPU, Severity.CRITICAL
        message = f"The job never used its GPUs {seen}: {change}, or run it without a GPU."
    else:
        kind = RecommendationKind.GPU_COUNT
        message = f"{per_pod - busy_now} of {per_pod} GPUs stayed idle {seen}: {change}."
    return Recommendation(
        kind=kind,
        severity=severity,
        current=per_pod,
        suggested=target,
        unit=Unit.GPUS,
        message=message,
        waste_gpu_minutes=round(waste, 2),
        field_path=_limits(key),
        evidence=evidence,
    )


def gpu_memory(inp: RuleInput) -> Recommendation | None:
    """``gpu_memory``: one lightly used GPU per pod whose memory peak fits a smaller MIG slice
    (or, on a GPU without MIG, a time-sliced share)."""
    policy = inp.policy
    resource = gpu_resource(inp.job.requested)
    if resource is None or resource[1] != 1:
        return None
    key = resource[0]
    by_pod = measured_gpus(inp, 1)
    if by_pod is None:
        return None
    gpus = [gpus[0] for gpus in by_pod.values()]
    peaks = [g.fb_used_peak_bytes for g in gpus]
    utils = [g.util_mean_percent for g in gpus]
    if any(p is None for p in peaks) or any(u is None for u in utils):
        return None
    peak = max(p for p in peaks if p is not None)
    util = max(u for u in utils if u is not None)
    # All idle belongs to idle_gpu (give the GPU back), busy GPUs need their compute.
    if util < policy.idle_gpu_util_percent or util >= policy.low_util_percent:
        return None
    family = family_p95(inp.family, lambda r: r.gpu_memory_peak_bytes, policy.family_min_runs)
    basis = max(Fraction(peak), exact(family.value)) if family is not None else Fraction(peak)
    needed = math.ceil(basis * exact(policy.headroom))
    span = max(g.held_minutes or 0.0 for g in gpus)
    evidence: dict[str, float | int | str] = {
        "samples": min(g.samples for g in gpus),
        "span_minutes": round(span, 1),
        "pods": len(gpus),
        "gpu_memory_peak_bytes": peak,
        "util_mean_max_percent": round(util, 2),
        "runs": _runs(family),
    }
    # A MIG instance's total is the slice's, not the GPU's: it cannot tell A100 sizes apart.
    models = {mig_family(g.model, g.fb_total_bytes if key == WHOLE_GPU else None) for g in gpus}
    table = next(iter(models)) if len(models) == 1 else None
    seen = f"mean util {percent(util)}, GPU-memory peak {gib(peak)} over {duration(span)}"
    if table is not None:
        if key == WHOLE_GPU:
            current = MIG_PROFILES[table][-1]
        else:
            parsed = MigProfile.parse(key.removeprefix(MIG_PREFIX))
            if parsed is None:
                return None
            current = parsed
        candidate = smallest_fitting(table, needed)
        if candidate is None or candidate.slices >= current.slices:
            return None
        waste = sum((g.held_minutes or 0.0) * (1 - candidate.slices / current.slices) for g in gpus)
        severity = gpu_severity(inp, waste)
        if severity is None:
            return None
        new_key = f"{MIG_PREFIX}{candidate.name}"
        what = "a whole GPU" if key == WHOLE_GPU else f"a {current.name} slice"
        return Recommendation(
            kind=RecommendationKind.GPU_MEMORY,
            severity=severity,
            current=current.name,
            suggested=candidate.name,
            unit=Unit.MIG_PROFILE,
            message=(
                f"The job used {what} lightly ({seen}): a {candidate.name} MIG slice fits "
                f"{gib(needed)}; replace {_limits(key)}: 1 by {_limits(new_key)}: 1{_runs_note(family)}."
            ),
            waste_gpu_minutes=round(waste, 2),
            field_path=_limits(key),
            evidence={**evidence, "slices_freed": current.slices - candidate.slices},
        )
    if key != WHOLE_GPU or len(models) != 1:
        return None
    totals = {g.fb_total_bytes for g in gpus}
    total = next(iter(totals)) if len(totals) == 1 else None
    if total is None or needed > exact(policy.time_slicing_max_memory_fraction) * total:
        return None
    waste = sum((g.held_minutes or 0.0) * (1 - (g.util_mean_percent or 0.0) / 100) for g in gpus)
    severity = gpu_severity(inp, waste)
    if severity is None:
        return None
    return Recommendation(
        kind=RecommendationKind.GPU_MEMORY,
        severity=severity,
        current="whole GPU",
        suggested="time-slicing",
        unit=Unit.MIG_PROFILE,
        message=(
            f"The job used its GPU lightly ({seen}) and needs {gib(needed)} of {gib(total)}: "
            f"share a time-sliced GPU{_runs_note(family)}: replace {_limits(key)}: 1 by "
            f"{_limits(SHARED_GPU)}: 1 where the cluster offers shared GPUs."
        ),
        waste_gpu_minutes=round(waste, 2),
        field_path=_limits(key),
        evidence=evidence,
    )


@dataclass(frozen=True, slots=True)
class _Measured:
    """A per-pod request (memory, cpu) and what its pods used of it: where the two request rules
    start from. `figure` names the usage figure (memory_peak_bytes, cpu_cores_p95), `of` reads it."""

    key: str
    figure: str
    of: Callable[[PodUsage | Usage], float | None]
    field: str
    current: float
    pods: Sequence[MeasuredPod]
    peak: float
    family: FamilyFigure | None

    @property
    def path(self) -> str:
        return f'resources.{self.field}["{self.key}"]'

    @property
    def span(self) -> float:
        return max(p.held_minutes for p in self.pods)

    @property
    def basis(self) -> Fraction:
        """What a suggestion scales: the peak, or the family's p95 where higher."""
        if self.family is None:
            return exact(self.peak)
        return max(exact(self.peak), exact(self.family.value))


def _measured(
    inp: RuleInput,
    key: str,
    figure: str,
    requested: tuple[float | None, float | None],
) -> _Measured | None:
    """The request (`requested`: the request, else the limit) with the `figure` its pods, the job
    and its family reached; None where it is not set or not measured well enough to advise on.

    A pod's, the job's and a family run's figure have the one name: `figure` reads all three."""
    of: Callable[[PodUsage | Usage | FamilyRun], float | None] = attrgetter(figure)
    if inp.usage.reason_for(figure) is not None:
        return None
    field, current = "requests", requested[0]
    if current is None:
        field, current = "limits", requested[1]
    if current is None or current <= 0:
        return None
    pods = measured_pods(inp, of)
    if pods is None:
        return None
    # measured_pods kept only pods with the figure measured.
    peak = max(v for p in pods if (v := of(p.usage)) is not None)
    job_peak = of(inp.usage)
    if job_peak is not None:
        peak = max(peak, job_peak)
    family = family_p95(inp.family, of, inp.policy.family_min_runs)
    return _Measured(key, figure, of, field, current, pods, peak, family)


def _decrease(
    inp: RuleInput,
    m: _Measured,
    kind: RecommendationKind,
    unit: Unit,
    suggested: float,
    min_change: Fraction,
    severities: tuple[float, float, float],
    message: str,
) -> Recommendation | None:
    """The advice to lower `m`'s request to `suggested`: only when the request is the policy's
    factor times that and `min_change` more, and the waste (held above each pod's figure, in
    GiB-hours for bytes, core-hours for cores) reaches a severity."""
    if exact(m.current) < exact(inp.policy.over_request_factor) * exact(suggested):
        return None
    if exact(m.current) - exact(suggested) < min_change:
        return None
    per_unit = GIB if unit is Unit.BYTES else 1
    waste = sum(max(0, m.current - (m.of(p.usage) or 0)) / per_unit * p.held_minutes / 60 for p in m.pods)
    severity = severity_for(waste, *severities)
    if severity is None:
        return None
    return Recommendation(
        kind=kind,
        severity=severity,
        current=m.current,
        suggested=suggested,
        unit=unit,
        message=message,
        waste_gib_hours=round(waste, 2) if unit is Unit.BYTES else 0.0,
        waste_core_hours=round(waste, 2) if unit is Unit.CORES else 0.0,
        field_path=m.path,
        evidence=_pods_evidence(m.pods, m.span, m.family, **{m.figure: m.peak}),
    )


def memory(inp: RuleInput) -> Recommendation | None:
    """``memory``: request ≥ 2 × (peak × headroom, rounded up) and ≥ 8 GiB unused → decrease."""
    policy = inp.policy
    if oom_kills(inp.pods) or inp.job.exit_reason == OOM_KILLED:
        return None
    requested = inp.job.requested
    m = _measured(inp, "memory", "memory_peak_bytes", (requested.memory_bytes, requested.memory_limit_bytes))
    if m is None:
        return None
    suggested = round_memory_up(m.basis * exact(policy.headroom))
    ooms = [r.oom_limit_bytes for r in inp.family if r.oom_limit_bytes is not None]
    if ooms:
        # Never advise a request the family has already been OOM-killed at.
        suggested = max(suggested, round_memory_up(scaled(max(ooms), policy.oom_limit_factor)))
    current = int(m.current)
    return _decrease(
        inp,
        m,
        RecommendationKind.MEMORY,
        Unit.BYTES,
        suggested,
        exact(policy.min_memory_waste_gib) * GIB,
        (policy.min_waste_gib_hours, policy.warning_gib_hours, policy.critical_gib_hours),
        f"Peak memory {gib(m.peak)} of {gib(current)} requested{_per_pod(m.pods)} over {duration(m.span)}: "
        f"set {m.path}: {quantity_bytes(current)} → {quantity_bytes(suggested)}{_runs_note(m.family)}.",
    )


def cpu(inp: RuleInput) -> Recommendation | None:
    """``cpu``: request ≥ 2 × (p95 cores × headroom, rounded up) and ≥ 2 cores unused → decrease."""
    policy = inp.policy
    requested = inp.job.requested
    m = _measured(inp, "cpu", "cpu_cores_p95", (requested.cpu_cores, requested.cpu_limit_cores))
    if m is None:
        return None
    suggested = round_cores_up(m.basis * exact(policy.headroom))
    return _decrease(
        inp,
        m,
        RecommendationKind.CPU,
        Unit.CORES,
        suggested,
        exact(policy.min_cpu_waste_cores),
        (policy.min_waste_core_hours, policy.warning_core_hours, policy.critical_core_hours),
        f"CPU p95 {cores(m.peak)} of {count(m.current)} cores requested{_per_pod(m.pods)} over "
        f"{duration(m.span)}: set {m.path}: {count(m.current)} → {cores(suggested)}{_runs_note(m.family)}.",
    )


def memory_increase(inp: RuleInput) -> Recommendation | None:
    """``memory_increase``: an OOM kill → max(limit × 1.5, peak × 1.25), never below a past OOM."""
    policy = inp.policy
    kills = oom_kills(inp.pods)
    if not kills and inp.job.exit_reason != OOM_KILLED:
        return None
    requested = inp.job.requested
    limits = [k.limit_bytes for k in kills if k.limit_bytes is not None]
    limit = max(limits) if limits else (requested.memory_limit_bytes or None)
    killed_uids = {k.pod.uid for k in kills}
    peaks = [
        u.memory_peak_bytes
        for u in inp.usage.pods
        if u.memory_peak_bytes is not None and (not killed_uids or u.pod_uid in killed_uids)
    ]
    peak = max(peaks) if peaks else inp.usage.memory_peak_bytes
    candidates: list[Fraction] = []
    if limit is not None:
        candidates.append(scaled(limit, policy.oom_limit_factor))
    if peak is not None:
        candidates.append(scaled(peak, policy.oom_peak_factor))
    past = [r.oom_limit_bytes for r in inp.family if r.oom_limit_bytes is not None]
    if past:
        candidates.append(scaled(max(past), policy.oom_limit_factor))
    family = family_p95(inp.family, lambda r: r.memory_peak_bytes, policy.family_min_runs)
    if family is not None:
        candidates.append(scaled(family.value, policy.headroom))
    if limit is None and peak is None:
        # Without a limit or a peak there is nothing to scale; a past run's OOM alone says
        # nothing about this one.
        return None
    suggested = round_memory_up(max(candidates))
    if limit is not None and suggested <= limit:
        suggested = round_memory_up(limit + 1)
    path = _limits("memory")
    names = sorted({f'"{k.container.name}"' for k in kills})
    who = f"Container {and_list(names)}" if names else "The job"
    at = f"at its {quantity_bytes(limit)} memory limit" if limit is not None else "with no memory limit"
    peak_text = f" (peak {gib(peak)})" if peak is not None else ""
    before = f"{quantity_bytes(limit)} → " if limit is not None else ""
    samples = [u.samples for u in inp.usage.pods if not killed_uids or u.pod_uid in killed_uids]
    return Recommendation(
        kind=RecommendationKind.MEMORY_INCREASE,
        severity=Severity.CRITICAL if inp.job.status == JobStatus.FAILED else Severity.WARNING,
        current=limit,
        suggested=suggested,
        unit=Unit.BYTES,
        message=(
            f"{who} was OOMKilled {at}{peak_text}: "
            f"set {path}: {before}{quantity_bytes(suggested)}{_runs_note(family)}."
        ),
        field_path=path,
        evidence={
            "oom_kills": max(1, len(kills)),
            "pods": len({k.pod.uid for k in kills}) or 1,
            "samples": min(samples) if samples else 0,
            "runs": _runs(family),
            **({"memory_peak_bytes": peak} if peak is not None else {}),
        },
    )


RULES: tuple[tuple[str, Rule], ...] = (
    ("idle_gpu", idle_gpus),
    ("gpu_memory", gpu_memory),
    ("memory", memory),
    ("memory_increase", memory_increase),
    ("cpu", cpu),
)
"""Every rule, by name, in evaluation order. Adding a rule means adding it here."""
