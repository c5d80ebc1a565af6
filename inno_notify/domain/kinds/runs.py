"""What every multi-pod run has in common, whatever operator runs it: the record built from its top
object, its replica roles and its owner's words.

The owner writes annotations or labels on the top object (the PyTorchJob, MPIJob, JobSet, RayJob),
else on its pod templates (CONTRACT.md §3); none of these CRDs records who submitted it. The
record's `requested` is the largest GPU pod's request with `parallelism` the run's pod count, so
that figures per pod (digest, right-sizing) keep their meaning; `replicas` has every role.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from ..model import JobRecord, JobStatus, ReplicaSpec, Requested, WorkloadKind
from ..parsing.config import ParseConfig
from ..parsing.fields import (
    JsonObject,
    SetAside,
    condition,
    indexed_text,
    integer,
    mapping,
    required_identity,
    timestamp,
)
from ..parsing.job import workload_record
from ..parsing.resources import requested_for_pod
from ..parsing.storable import INDEXED_MAX_BYTES, storable

__all__ = ["Outcome", "conditions_outcome", "count", "replica", "run_record"]

# A run's replica count is the user's number: bounded like any 32-bit column, and a run of more roles
# than this is not a training run we can show.
MAX_ROLES = 64


class Outcome:
    """A run's state from its own status: (status, reason, finished_at)."""

    __slots__ = ("finished_at", "reason", "status")

    def __init__(
        self, status: JobStatus, reason: str | None = None, finished_at: datetime | None = None
    ) -> None:
        self.status = status
        self.reason = reason
        self.finished_at = finished_at


def conditions_outcome(status: JsonObject, running: Sequence[str] = ("Running", "Restarting")) -> Outcome:
    """The Kubeflow common conditions (PyTorchJob, MPIJob): `Failed` or `Succeeded` true ends the run
    at that condition's time (`completionTime` is not set on every failure path); `Suspended`,
    then `Running`/`Restarting`, else pending."""
    for kind, state in (("Failed", JobStatus.FAILED), ("Succeeded", JobStatus.SUCCEEDED)):
        found = condition(status, kind)
        if found is not None:
            ended = timestamp(found, "lastTransitionTime")
            if state is JobStatus.SUCCEEDED:
                ended = timestamp(status, "completionTime") or ended
            return Outcome(state, indexed_text(found, "reason"), ended)
    suspended = condition(status, "Suspended")
    if suspended is not None:
        return Outcome(JobStatus.SUSPENDED, indexed_text(suspended, "reason"))
    if any(condition(status, name) is not None for name in running):
        return Outcome(JobStatus.RUNNING)
    return Outcome(JobStatus.PENDING)


def replica(role: object, replicas: int | None, pod_spec: JsonObject, cfg: ParseConfig) -> ReplicaSpec:
    """One role: its name (storable), pod count (1 when unset, as the operators default it) and what
    each pod asks for."""
    name = storable(str(role), INDEXED_MAX_BYTES).strip() or "replica"
    count = 1 if replicas is None else max(0, replicas)
    return ReplicaSpec(role=name, replicas=count, requested=requested_for_pod(pod_spec, cfg))


def _largest(replicas: Sequence[ReplicaSpec]) -> Requested:
    if not replicas:
        return Requested()
    largest = max(replicas, key=lambda r: (r.requested.gpus, r.replicas))
    pods = sum(r.replicas for r in replicas)
    return replace(largest.requested, parallelism=max(1, pods), completions=None)


def run_record(
    obj: JsonObject,
    kind: WorkloadKind,
    cfg: ParseConfig,
    notes: list[SetAside],
    *,
    outcome: Outcome,
    replicas: Sequence[ReplicaSpec],
    templates: Sequence[JsonObject],
    started_at: datetime | None = None,
    attempts: int = 1,
) -> JobRecord:
    """The run's record from its top object. `templates` are its pod templates (owner's words are
    read from the top object first, then from them in order)."""
    metadata = mapping(obj, "metadata")
    return workload_record(
        metadata,
        required_identity(metadata, kind.value),
        kind,
        cfg,
        notes,
        templates,
        status=outcome.status,
        reason=outcome.reason,
        started_at=started_at,
        finished_at=outcome.finished_at,
        requested=_largest(replicas),
        attempts=max(1, attempts),
        replicas=tuple(replicas[:MAX_ROLES]),
    )


def count(obj: JsonObject, field: str) -> int:
    """A non-negative status counter, 0 when absent."""
    return integer(obj, field, 0) or 0
