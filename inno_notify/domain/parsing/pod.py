"""A core/v1 Pod object (as JSON) turned into a :class:`PodRecord`.

Pods carry the facts the Job hides: where and when each attempt ran, how each container ended
(``state.terminated`` and, after a restart, ``lastState.terminated``), and why a pod was taken away
(``status.reason`` Evicted, or a ``DisruptionTarget`` condition). The times here are the ones
CONTRACT.md §4 bills GPU-minutes on: ``PodScheduled`` to the last app container's ``finishedAt``, or
``metadata.deletionTimestamp`` when the pod went before its containers reported.

The completion index is an annotation (or label) anyone creating a pod can write: only ASCII digits
within a 32-bit column are an index; anything else ("²", which ``str.isdigit`` accepts and ``int``
refuses, or a 5,000-digit number) reads as no index and is noted.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ..model import ContainerRecord, PodRecord, TerminatedState
from .config import ParseConfig
from .fields import (
    MISSING_FIELD,
    OUT_OF_RANGE,
    JsonObject,
    ParseError,
    SetAside,
    condition,
    indexed_text,
    integer,
    key,
    labelled_uid,
    mapping,
    objects,
    required_identity,
    text,
    timestamp,
)
from .ownership import owned_by, pod_role
from .resources import container_resources, gpu_equivalents, is_sidecar, pod_effective_of
from .storable import INT32_MAX

__all__ = [
    "COMPLETION_INDEX_KEY",
    "CONTROLLER_UID_LABELS",
    "completion_index",
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
_INDEX = re.compile(r"[0-9]{1,10}")


def job_uid_of_pod(metadata: JsonObject, owner_kinds: frozenset[str] = frozenset()) -> str | None:
    """The uid of the object that runs the pod: the Job's controller-uid label, else a Job owner
    reference, else a controller of a watched workload kind (a PyTorchJob, an MPIJob, a RayCluster;
    :func:`.ownership.owned_by`)."""
    labels = mapping(metadata, "labels")
    for label in CONTROLLER_UID_LABELS:
        uid = labelled_uid(labels, label)
        if uid is not None:
            return uid
    for ref in objects(metadata, "ownerReferences"):
        api_version = ref.get("apiVersion", "batch/v1")
        if ref.get("kind") == "Job" and isinstance(api_version, str) and api_version.startswith("batch/"):
            return key(ref, "uid")
    return owned_by(metadata, owner_kinds) if owner_kinds else None


def disruption_reason(status: JsonObject) -> str | None:
    """Why the pod was taken away: ``status.reason`` (Evicted, ...) else a true DisruptionTarget's reason."""
    reason = indexed_text(status, "reason")
    if reason is None:
        target = condition(status, "DisruptionTarget")
        reason = indexed_text(target, "reason") if target is not None else None
    return _DISRUPTION_WORDS.get(reason, reason) if reason is not None else None


def parse_terminated(state: JsonObject) -> TerminatedState | None:
    terminated = mapping(state, "terminated")
    if not terminated:
        return None
    exit_code = integer(terminated, "exitCode")
    if exit_code is None:
        raise ParseError("state.terminated without exitCode", MISSING_FIELD)
    return TerminatedState(
        exit_code=exit_code,
        # The reason becomes the job's exit reason, which the team digest's index carries.
        reason=indexed_text(terminated, "reason"),
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
        name=indexed_text(spec, "name") or "",
        init=init,
        sidecar=init and is_sidecar(spec),
        requests=requests,
        limits=limits,
        started_at=started_at,
        terminated=terminated,
        last_terminated=parse_terminated(mapping(status, "lastState")),
        restart_count=integer(status, "restartCount", 0) or 0,
    )


def _statuses(status: JsonObject, field: str) -> Mapping[str, JsonObject]:
    return {s["name"]: s for s in objects(status, field) if isinstance(s.get("name"), str)}


def _status_of(statuses: Mapping[str, JsonObject], container: JsonObject) -> JsonObject | None:
    name = container.get("name")
    return statuses.get(name) if isinstance(name, str) else None


def completion_index(metadata: JsonObject, notes: list[SetAside] | None = None) -> int | None:
    """The pod's completion index (Indexed jobs), or None; a value that is not one is noted."""
    written = mapping(metadata, "annotations").get(COMPLETION_INDEX_KEY) or mapping(metadata, "labels").get(
        COMPLETION_INDEX_KEY
    )
    if not written:
        return None
    if isinstance(written, str) and _INDEX.fullmatch(written) and int(written) <= INT32_MAX:
        return int(written)
    if notes is not None:
        notes.append(SetAside("completion_index", OUT_OF_RANGE))
    return None


def parse_pod(obj: JsonObject, cfg: ParseConfig, notes: list[SetAside] | None = None) -> PodRecord:
    """The pod's record; values refused but not fatal (a bad completion index) go to ``notes``."""
    metadata = mapping(obj, "metadata")
    spec = mapping(obj, "spec")
    status = mapping(obj, "status")
    uid, namespace, name = required_identity(metadata, "Pod")

    init_statuses = _statuses(status, "initContainerStatuses")
    app_statuses = _statuses(status, "containerStatuses")
    init = [_container(c, _status_of(init_statuses, c), True) for c in objects(spec, "initContainers")]
    app = [_container(c, _status_of(app_statuses, c), False) for c in objects(spec, "containers")]

    deleted_at = timestamp(metadata, "deletionTimestamp")
    phase = indexed_text(status, "phase") or "Pending"
    finished_at = None
    # A terminated container restarts unless the pod is done, never restarts, or is being deleted
    # (a CrashLoopBackOff pod has every container terminated and is still running).
    done = phase in ("Succeeded", "Failed") or spec.get("restartPolicy") == "Never" or deleted_at is not None
    if done and app and all(c.terminated is not None for c in app):
        ends = [c.terminated.finished_at for c in app if c.terminated and c.terminated.finished_at]
        finished_at = max(ends) if ends else None

    scheduled = condition(status, "PodScheduled")
    _, limits = pod_effective_of(
        spec,
        [(c.requests, c.limits) for c in app],
        [(c.sidecar, (c.requests, c.limits)) for c in init],
    )
    return PodRecord(
        cluster=cfg.cluster,
        uid=uid,
        namespace=namespace,
        name=name,
        job_uid=job_uid_of_pod(metadata, cfg.owner_kinds),
        phase=phase,
        created_at=timestamp(metadata, "creationTimestamp"),
        node=indexed_text(spec, "nodeName"),
        reason=disruption_reason(status),
        scheduled_at=timestamp(scheduled, "lastTransitionTime") if scheduled is not None else None,
        started_at=timestamp(status, "startTime"),
        finished_at=finished_at,
        deleted_at=deleted_at,
        gpu_equivalents=gpu_equivalents(limits, cfg),
        containers=(*init, *app),
        completion_index=completion_index(metadata, notes),
        resource_version=indexed_text(metadata, "resourceVersion"),
        role=pod_role(mapping(metadata, "labels")),
    )
