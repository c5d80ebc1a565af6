"""Advice for a multi-pod run, role by role: a PyTorchJob's Workers, an MPIJob's workers, a JobSet's
replicated jobs, a RayJob's worker groups each ask for their own GPUs, so each gets its own advice
("Worker × 3: 2 of 4 GPUs stayed idle …"), and a role whose pods left all their GPUs idle while
their siblings worked is told to run fewer of them. The run-wide rules (memory, CPU, OOM) still judge
the run as a whole; the per-pod GPU rules would mix the roles, so they run per role instead.

Pure: the rules of domain.rightsizing.rules on the role's own pods and GPUs.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from inno_notify.domain.model import (
    GpuUsage,
    Recommendation,
    RecommendationKind,
    ReplicaSpec,
    Unit,
)
from inno_notify.domain.rightsizing.inputs import RuleInput, gpu_resource, measured_gpus
from inno_notify.domain.rightsizing.quantities import duration, percent
from inno_notify.domain.rightsizing.rules import RULES, gpu_severity

__all__ = ["PER_ROLE_RULES", "role_advice"]

# The rules that judge a pod's GPUs: run on each role's pods instead of the whole run's.
PER_ROLE_RULES = frozenset({"idle_gpu", "gpu_memory"})


def role_advice(inp: RuleInput) -> Iterator[Recommendation]:
    """Advice per GPU role of the run in `inp` (its `job.replicas`)."""
    for spec in inp.job.replicas:
        if spec.requested.gpus <= 0:
            continue
        pods = tuple(p for p in inp.pods if p.role == spec.role)
        if not pods:
            continue
        uids = {p.uid for p in pods}
        role = replace(
            inp,
            job=replace(inp.job, requested=replace(spec.requested, parallelism=spec.replicas), replicas=()),
            usage=replace(inp.usage, gpus=tuple(g for g in inp.usage.gpus if g.pod_uid in uids)),
            pods=pods,
            # A family's earlier runs are judged as whole runs: a role's advice rests on this run.
            family=inp.family[:1],
        )
        fewer = idle_replicas(role, spec)
        if fewer is not None:
            yield fewer
            continue
        for name, rule in RULES:
            if name in PER_ROLE_RULES and (rec := rule(role)) is not None:
                yield replace(rec, message=f"{spec.role} × {len(pods)}: {rec.message}")


def idle_replicas(inp: RuleInput, spec: ReplicaSpec) -> Recommendation | None:
    """Some pods of a role never used any of their GPUs while the others did: run that many fewer.
    (A role whose every pod idled is the idle-GPU rule's case: no GPU at all.)"""
    resource = gpu_resource(inp.job.requested)
    if resource is None or not resource[1].is_integer():
        return None
    per_pod = int(resource[1])
    by_pod = measured_gpus(inp, per_pod)
    if by_pod is None:
        return None
    threshold = inp.policy.idle_gpu_util_percent

    def idle(gpus: list[GpuUsage]) -> bool:
        return all(g.util_mean_percent is not None and g.util_mean_percent < threshold for g in gpus)

    idle_pods = [gpus for gpus in by_pod.values() if idle(gpus)]
    if not idle_pods or len(idle_pods) == len(by_pod):
        return None
    rows = [g for gpus in idle_pods for g in gpus]
    waste = sum(g.held_minutes or 0.0 for g in rows)
    severity = gpu_severity(inp, waste)
    if severity is None:
        return None
    keep = len(by_pod) - len(idle_pods)
    worst = max(g.util_mean_percent or 0.0 for g in rows)
    span = max(g.held_minutes or 0.0 for g in rows)
    return Recommendation(
        kind=RecommendationKind.IDLE_GPU,
        severity=severity,
        current=per_pod * len(by_pod),
        suggested=per_pod * keep,
        unit=Unit.GPUS,
        message=(
            f"{spec.role} × {len(by_pod)}: {len(idle_pods)} of {len(by_pod)} pods never used their "
            f"{per_pod} GPU{'s' if per_pod > 1 else ''} (mean util at most {percent(worst)} over "
            f"{duration(span)}): run {keep} {spec.role} instead of {len(by_pod)}, "
            f"{per_pod * len(idle_pods)} GPUs freed."
        ),
        waste_gpu_minutes=round(waste, 2),
        field_path=f"replicas of {spec.role}",
        evidence={
            "role": spec.role,
            "pods": len(by_pod),
            "idle_pods": len(idle_pods),
            "gpus_per_pod": per_pod,
            "util_mean_max_percent": round(worst, 2),
            "span_minutes": round(span, 1),
        },
    )
