"""A core/v1 Pod object (as JSON) turned into a :class:`PodRecord`.

Pods carry the facts the Job hides: where and when each attempt ran, how each container ended
(``state.terminated`` and, after a restart, ``lastState.terminated``), and why a pod was taken away
(``status.reason`` Evicted, or a ``DisruptionTarget`` condition). The times here are the ones
CONTRACT.md §4 bills GPU-minutes on: ``PodScheduled`` to the last app container's ``finishedAt``, or
``metadata.deletionTimestamp`` when the pod went before its containers reported.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..model import ContainerRecord, PodRecord, TerminatedState
from .config import ParseConfig
from .fields import JsonObject, ParseError, condition, integer, mapping, objects, string_map, text, timestamp
from .resources import container_resources, gpu_equivalents, is_sidecar, pod_effective

__all__ = [
    "COMPLETION_INDEX_KEY",
    "CONTROLLER_UID_LABELS",
    "disruption_reason",
    "job_uid_of_pod",
    "parse_pod",
    "parse_terminated",
]

CONTROLLER_UID_LABELS = ("batch.kubernetes.io/controller-uid", "controller-uid")
COMPLETION_INDEX_KEY = "batch.kubernetes.io/job-completion-index"

# DisruptionTarget reasons (k8s 1.26+) in the two words summaries use; others are kept as written.
_DISRUPTION_WORDS = {
    "PreemptionByScheduler": "Preempted",
    "PreemptionByKubeScheduler": "Preempted",
    "EvictionByEvictionAPI": "Evicted",
    "TerminationByKubelet": "Evicted",
    "Preempting": "Preempted",
}


def job_uid_of_pod(metadata: JsonObject) -> str | None:
    """The uid of the Job that owns the pod: the controller-uid label, else a Job owner reference."""
    labels = string_map(metadata, "labels")
    for key in CONTROLLER_UID_LABELS:
        if labels.get(key):
            return labels[key]
    for ref in objects(metadata, "ownerReferences"):
        if ref.get("kind") == "Job" and str(ref.get("apiVersion", "batch/v1")).startswith("batch/"):
            return text(ref, "uid")
    return None


def disruption_reason(status: JsonObject) -> str | None:
    """Why the pod was taken away: ``status.reason`` (Evicted, ...) else a true DisruptionTarget's reason."""
    reason = text(status, "reason")
    if reason is None:
        target = condition(status, "DisruptionTarget")
        reason = text(target, "reason") if target is not None else None
    return _DISRUPTION_WORDS.get(reason, reason) if reason is not None else None


def parse_terminated(state: JsonObject) -> TerminatedState | None:
    terminated = mapping(state, "terminated")
    if not terminated:
        return None
    exit_code = integer(terminated, "exitCode")
    if exit_code is None:
        raise ParseError("state.terminated without exitCode")
    return TerminatedState(
        exit_code=exit_code,
        reason=text(terminated, "reason"),
        signal=integer(terminated, "signal"),
        message=text(terminated, "message"),
        started_at=timestamp(terminated, "startedAt"),
        finished_at=timestamp(terminated, "finishedAt"),
    )


def _container(spec: JsonObject, status: JsonObject | None, init: bool) -> ContainerRecord:
    requests, limits = container_resources(spec)
    status = status or {}
    state = mapping(status, "state")
    terminated = parse_terminated(state)
    started_at = timestamp(mapping(state, "running"), "startedAt") or (
        terminated.started_at if terminated else None
    )
    return ContainerRecord(
        name=text(spec, "name") or "",
        init=init,
        sidecar=init and is_sidecar(spec),
        requests=requests,
        limits=limits,
        started_at=started_at,
        terminated=terminated,
        last_terminated=parse_terminated(mapping(status, "lastState")),
        restart_count=integer(status, "restartCount") or 0,
    )


def _statuses(status: JsonObject, key: str) -> Mapping[str, JsonObject]:
    return {str(s.get("name")): s for s in objects(status, key)}


def parse_pod(obj: JsonObject, cfg: ParseConfig) -> PodRecord:
    metadata = mapping(obj, "metadata")
    spec = mapping(obj, "spec")
    status = mapping(obj, "status")
    uid = text(metadata, "uid")
    namespace = text(metadata, "namespace")
    name = text(metadata, "name")
    if uid is None or namespace is None or name is None:
        raise ParseError("Pod without metadata.uid, namespace or name")

    init_statuses = _statuses(status, "initContainerStatuses")
    app_statuses = _statuses(status, "containerStatuses")
    init = [
        _container(c, init_statuses.get(str(c.get("name"))), True) for c in objects(spec, "initContainers")
    ]
    app = [_container(c, app_statuses.get(str(c.get("name"))), False) for c in objects(spec, "containers")]

    deleted_at = timestamp(metadata, "deletionTimestamp")
    phase = text(status, "phase") or "Pending"
    finished_at = None
    # A terminated container restarts unless the pod is done, never restarts, or is being deleted
    # (a CrashLoopBackOff pod has every container terminated and is still running).
    done = phase in ("Succeeded", "Failed") or spec.get("restartPolicy") == "Never" or deleted_at is not None
    if done and app and all(c.terminated is not None for c in app):
        ends = [c.terminated.finished_at for c in app if c.terminated and c.terminated.finished_at]
        finished_at = max(ends) if ends else None

    scheduled = condition(status, "PodScheduled")
    index_text = string_map(metadata, "annotations").get(COMPLETION_INDEX_KEY) or string_map(
        metadata, "labels"
    ).get(COMPLETION_INDEX_KEY)
    _, limits = pod_effective(spec)
    return PodRecord(
        cluster=cfg.cluster,
        uid=uid,
        namespace=namespace,
        name=name,
        job_uid=job_uid_of_pod(metadata),
        phase=phase,
        created_at=timestamp(metadata, "creationTimestamp"),
        node=text(spec, "nodeName"),
        reason=disruption_reason(status),
        scheduled_at=timestamp(scheduled, "lastTransitionTime") if scheduled is not None else None,
        started_at=timestamp(status, "startTime"),
        finished_at=finished_at,
        deleted_at=deleted_at,
        gpu_equivalents=gpu_equivalents(limits, cfg),
        containers=(*init, *app),
        completion_index=int(index_text) if index_text and index_text.isdigit() else None,
        resource_version=text(metadata, "resourceVersion"),
    )
