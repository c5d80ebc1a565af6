"""KubeRay: RayJob (`ray.io/v1`) is the run; its RayCluster and its submitter Job are `Link`s.

A RayJob creates a RayCluster `<rayjob>-<5 random>` it controls, whose head and worker pods the
RayCluster controls; the job is submitted from a batch Job (named like the RayJob, controlled by
it). The run ends with `status.jobDeploymentStatus` Complete|Failed|ValidationFailed; it succeeded
when Ray's own `jobStatus` is SUCCEEDED. A retry (`backoffLimit`) builds a NEW RayCluster: the
attempts are `status.succeeded + status.failed`. Ray's pods never succeed: they run until the
RayCluster is deleted (`shutdownAfterJobFinishes`), so their GPU time after the end is real and
counted. A RayCluster nobody controls (a standing cluster) is not a run and not recorded.
"""

from __future__ import annotations

from ..model import JobRecord, JobStatus, ReplicaSpec, WorkloadKind
from ..parsing.config import ParseConfig
from ..parsing.fields import JsonObject, SetAside, indexed_text, integer, key, mapping, objects, timestamp
from ..parsing.ownership import SUBMITTER, owned_by
from .runs import Outcome, count, replica, run_record
from .spec import Link

__all__ = ["parse_raycluster", "parse_rayjob"]

_ENDED = frozenset({"Complete", "Failed", "ValidationFailed"})
_RUNNING = frozenset({"Running", "Initializing", "Retrying", "Waiting"})


def _outcome(spec: JsonObject, status: JsonObject) -> Outcome:
    deployment = indexed_text(status, "jobDeploymentStatus")
    if deployment in _ENDED:
        succeeded = deployment == "Complete" and indexed_text(status, "jobStatus") == "SUCCEEDED"
        state = JobStatus.SUCCEEDED if succeeded else JobStatus.FAILED
        reason = indexed_text(status, "reason") or (None if succeeded else deployment)
        return Outcome(state, reason, timestamp(status, "endTime"))
    if deployment == "Suspended" or spec.get("suspend") is True:
        return Outcome(JobStatus.SUSPENDED, deployment)
    if deployment in _RUNNING:
        return Outcome(JobStatus.RUNNING)
    return Outcome(JobStatus.PENDING)


def parse_rayjob(obj: JsonObject, cfg: ParseConfig, notes: list[SetAside]) -> JobRecord:
    spec, status = mapping(obj, "spec"), mapping(obj, "status")
    cluster_spec = mapping(spec, "rayClusterSpec")
    head = mapping(mapping(cluster_spec, "headGroupSpec"), "template")
    replicas: list[ReplicaSpec] = [replica("head", 1, mapping(head, "spec"), cfg)]
    templates: list[JsonObject] = [head]
    for group in objects(cluster_spec, "workerGroupSpecs"):
        template = mapping(group, "template")
        templates.append(template)
        name = indexed_text(group, "groupName") or "worker"
        replicas.append(replica(name, integer(group, "replicas", 0), mapping(template, "spec"), cfg))
    submitter = mapping(spec, "submitterPodTemplate")
    if submitter:
        replicas.append(replica(SUBMITTER, 1, mapping(submitter, "spec"), cfg))
    return run_record(
        obj,
        WorkloadKind.RAY_JOB,
        cfg,
        notes,
        outcome=_outcome(spec, status),
        replicas=replicas,
        templates=templates,
        started_at=timestamp(status, "startTime"),
        attempts=count(status, "succeeded") + count(status, "failed"),
    )


def parse_raycluster(obj: JsonObject, cfg: ParseConfig, notes: list[SetAside]) -> Link | None:
    """A RayCluster a watched RayJob controls is that run's; any other is none of ours."""
    metadata = mapping(obj, "metadata")
    parent = owned_by(metadata, cfg.owner_kinds)
    uid = key(metadata, "uid")
    return None if parent is None or uid is None else Link(uid, parent)
