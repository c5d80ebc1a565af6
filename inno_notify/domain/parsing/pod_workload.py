"""A workload that is one pod (a workspace, a bare GPU pod): its record read from the pod's.

What makes the pod that workload (a workspace selector, no controller) and what each kind adds
(a workspace's user, a bare pod's family and exit) is the kind's own (workspace.py, bare_pod.py).
"""

from __future__ import annotations

from ..model import JobRecord, JobStatus, PodRecord, WorkloadKind
from .annotations import OwnerIntent
from .config import ParseConfig
from .fields import JsonObject, mapping
from .resources import requested_for_pod

__all__ = ["pod_status", "pod_workload_record"]

_PHASES = {
    "Pending": JobStatus.PENDING,
    "Running": JobStatus.RUNNING,
    "Succeeded": JobStatus.SUCCEEDED,
    "Failed": JobStatus.FAILED,
}


def pod_status(pod: PodRecord) -> JobStatus:
    """The status of a workload that is one pod, from the pod's phase; a phase the API does not
    promise (Unknown) reads as running once the pod started, else pending."""
    return _PHASES.get(pod.phase, JobStatus.RUNNING if pod.started_at else JobStatus.PENDING)


def pod_workload_record(
    obj: JsonObject,
    pod: PodRecord,
    cfg: ParseConfig,
    kind: WorkloadKind,
    status: JobStatus,
    intent: OwnerIntent,
    labels: dict[str, str],
) -> JobRecord:
    """The record of pod `obj` (`pod` parsed) as a workload of `kind` in `status`: it asked for
    what its one pod asked for, and a pod that ended finished when it did (or was deleted)."""
    return JobRecord(
        cluster=cfg.cluster,
        uid=pod.uid,
        namespace=pod.namespace,
        name=pod.name,
        kind=kind,
        status=status,
        reason=pod.reason,
        owner=intent.owner,
        team=intent.team,
        notify=intent.notify,
        channels=intent.channels,
        group_key=intent.group_key,
        created_at=pod.created_at,
        started_at=pod.started_at,
        finished_at=(pod.finished_at or pod.deleted_at) if status.is_terminal else None,
        first_scheduled_at=pod.scheduled_at,
        requested=requested_for_pod(mapping(obj, "spec"), cfg, parallelism=1, completions=1),
        labels=labels,
        resource_version=pod.resource_version,
    )
