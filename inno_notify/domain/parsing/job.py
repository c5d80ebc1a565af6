"""A batch/v1 Job object (as JSON) turned into a :class:`JobRecord`.

The status decision follows the Job controller's conditions. Since Kubernetes 1.31 the controller
first adds ``FailureTarget`` / ``SuccessCriteriaMet`` (the outcome is decided) and only adds
``Failed`` / ``Complete`` once every pod has terminated, so the first pair already decides the status,
while ``finished_at`` prefers the final condition's time (the pods' GPUs are held until then).
``completionTime`` is set only on success; failures take the ``Failed`` condition's time.
``status.startTime`` is reset on every Kueue resume: :func:`.merge.merge_job` keeps the first one.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from ..links import mlflow_links
from ..model import JobRecord, JobStatus, KueueInfo, ReplicaSpec, Requested, WorkloadKind
from .annotations import FAMILY_KEY, indexed_lookup, read_words
from .config import ParseConfig
from .family import job_family
from .fields import (
    JsonObject,
    SetAside,
    condition,
    indexed_text,
    integer,
    mapping,
    required_identity,
    timestamp,
)
from .resources import requested_for_pod

__all__ = ["KUEUE_QUEUE_LABEL", "job_status", "parse_job", "workload_record"]

KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


def _outcome(
    final: JsonObject | None, decided: JsonObject | None
) -> tuple[str | None, datetime | None] | None:
    """(reason, time) of a decided outcome: the final condition's if present, else the early one's."""
    present = [c for c in (final, decided) if c is not None]
    if not present:
        return None
    reason = next((r for c in present if (r := indexed_text(c, "reason")) is not None), None)
    finished = next((t for c in present if (t := timestamp(c, "lastTransitionTime")) is not None), None)
    return reason, finished


def job_status(spec: JsonObject, status: JsonObject) -> tuple[JobStatus, str | None, datetime | None]:
    """(status, reason, finished_at) from a Job's spec and status."""
    failure = _outcome(condition(status, "Failed"), condition(status, "FailureTarget"))
    if failure is not None:
        return JobStatus.FAILED, failure[0], failure[1]
    success = _outcome(condition(status, "Complete"), condition(status, "SuccessCriteriaMet"))
    if success is not None:
        return JobStatus.SUCCEEDED, success[0], timestamp(status, "completionTime") or success[1]
    suspended = condition(status, "Suspended")
    if suspended is not None or spec.get("suspend") is True:
        return JobStatus.SUSPENDED, indexed_text(suspended, "reason") if suspended else None, None
    if (integer(status, "active", 0) or 0) > 0:
        return JobStatus.RUNNING, None, None
    return JobStatus.PENDING, None, None


def _default(value: int | None, default: int) -> int:
    # parallelism 0 is meaningful (the pre-suspend way to pause a job), so `or` will not do.
    return default if value is None else value


def parse_job(obj: JsonObject, cfg: ParseConfig, notes: list[SetAside] | None = None) -> JobRecord:
    """The job's record; values refused but not fatal (an owner that is not one address) go to ``notes``."""
    metadata = mapping(obj, "metadata")
    spec = mapping(obj, "spec")
    status = mapping(obj, "status")
    template = mapping(spec, "template")

    identity = required_identity(metadata, "Job", generate_name=True)
    job_status_, reason, finished_at = job_status(spec, status)
    return workload_record(
        metadata,
        identity,
        WorkloadKind.JOB,
        cfg,
        notes,
        (template,),
        status=job_status_,
        reason=reason,
        started_at=timestamp(status, "startTime"),
        finished_at=finished_at,
        requested=requested_for_pod(
            mapping(template, "spec"),
            cfg,
            parallelism=_default(integer(spec, "parallelism", 0), 1),
            completions=integer(spec, "completions", 0),
        ),
    )


def workload_record(
    metadata: JsonObject,
    identity: tuple[str, str, str],
    kind: WorkloadKind,
    cfg: ParseConfig,
    notes: list[SetAside] | None,
    templates: Sequence[JsonObject],
    *,
    status: JobStatus,
    reason: str | None,
    started_at: datetime | None,
    finished_at: datetime | None,
    requested: Requested,
    attempts: int = 1,
    replicas: tuple[ReplicaSpec, ...] = (),
) -> JobRecord:
    """A workload's record from its top object's metadata (uid, namespace, name: `identity`) and its
    pod templates: the owner's words are read from the top object first, then from the templates
    in order. Every kind's record is made here (a Job's, a training run's)."""
    uid, namespace, name = identity
    words = read_words(metadata, namespace, cfg, notes, templates)
    intent, layers = words.intent, words.layers
    queue = indexed_lookup((words.labels, words.annotations), (KUEUE_QUEUE_LABEL,))
    return JobRecord(
        cluster=cfg.cluster,
        uid=uid,
        namespace=namespace,
        name=name,
        kind=kind,
        status=status,
        reason=reason,
        owner=intent.owner,
        team=intent.team,
        notify=intent.notify,
        channels=intent.channels,
        group_key=intent.group_key,
        family=job_family(
            indexed_text(metadata, "name"),
            indexed_text(metadata, "generateName"),
            indexed_lookup(layers, (FAMILY_KEY,)),
        ),
        created_at=timestamp(metadata, "creationTimestamp"),
        started_at=started_at,
        finished_at=finished_at,
        requested=requested,
        kueue=KueueInfo(local_queue=queue) if queue else None,
        labels=words.labels,
        resource_version=indexed_text(metadata, "resourceVersion"),
        links=mlflow_links(layers, cfg.mlflow_url),
        attempts=attempts,
        replicas=replicas,
    )
