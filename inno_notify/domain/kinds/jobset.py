"""JobSet (`jobset.x-k8s.io/v1alpha2`), also what Kubeflow Trainer v2 runs a TrainJob as.

A JobSet runs `spec.replicatedJobs[]` ({name, replicas, template: a Job spec}) as batch Jobs it
controls (`Link`s: their pods are the JobSet's, domain.kinds.batch). It ends with `terminalState`
Completed|Failed or the `Completed`/`Failed` condition (there are no start or completion times:
the condition's time ends it, the pods' start begins it). A `failurePolicy` restart recreates every
child Job under the same name and bumps `status.restarts`: one run, one more attempt.
"""

from __future__ import annotations

from ..model import JobRecord, JobStatus, ReplicaSpec, WorkloadKind
from ..parsing.config import ParseConfig
from ..parsing.fields import (
    JsonObject,
    SetAside,
    condition,
    indexed_text,
    integer,
    mapping,
    objects,
    timestamp,
)
from .runs import Outcome, count, replica, run_record

__all__ = ["parse_jobset"]


def _outcome(spec: JsonObject, status: JsonObject) -> Outcome:
    terminal = indexed_text(status, "terminalState")
    for kind, state in (("Failed", JobStatus.FAILED), ("Completed", JobStatus.SUCCEEDED)):
        found = condition(status, kind)
        if found is not None or terminal == kind:
            ended = timestamp(found, "lastTransitionTime") if found is not None else None
            return Outcome(state, indexed_text(found, "reason") if found is not None else None, ended)
    suspended = condition(status, "Suspended")
    if suspended is not None or spec.get("suspend") is True:
        return Outcome(JobStatus.SUSPENDED, indexed_text(suspended, "reason") if suspended else None)
    active = sum(count(entry, "active") for entry in objects(status, "replicatedJobsStatus"))
    return Outcome(JobStatus.RUNNING if active > 0 else JobStatus.PENDING)


def parse_jobset(obj: JsonObject, cfg: ParseConfig, notes: list[SetAside]) -> JobRecord:
    spec, status = mapping(obj, "spec"), mapping(obj, "status")
    replicas: list[ReplicaSpec] = []
    templates: list[JsonObject] = []
    for replicated in objects(spec, "replicatedJobs"):
        job_spec = mapping(mapping(replicated, "template"), "spec")
        pod_template = mapping(job_spec, "template")
        templates.append(pod_template)
        jobs = integer(replicated, "replicas", 0)
        parallelism = integer(job_spec, "parallelism", 0)
        pods = (1 if jobs is None else jobs) * (1 if parallelism is None else parallelism)
        replicas.append(
            replica(indexed_text(replicated, "name") or "job", pods, mapping(pod_template, "spec"), cfg)
        )
    return run_record(
        obj,
        WorkloadKind.JOB_SET,
        cfg,
        notes,
        outcome=_outcome(spec, status),
        replicas=replicas,
        templates=templates,
        attempts=count(status, "restarts") + 1,
    )
