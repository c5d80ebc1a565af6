"""Kubeflow's training jobs: PyTorchJob (Training Operator v1, `kubeflow.org/v1`) and MPIJob
(mpi-operator, `kubeflow.org/v2beta1`).

Both keep their roles in a map `spec.<x>ReplicaSpecs` {Master|Worker|Launcher: {replicas,
template}} and share the common conditions (Created, Running, Restarting, Suspended, Succeeded,
Failed; FACTS.md, Training operators). A PyTorchJob's pods are its own (controller owner
reference); an MPIJob's workers are its own and its launcher runs as a batch Job it controls (a
`Link`, domain.kinds.batch). Restarts: a PyTorchJob recreates a pod under the same name (counted
from the pods, domain.parsing.merge); an MPIJob retries its launcher (`replicaStatuses.Launcher`).
"""

from __future__ import annotations

from ..model import JobRecord, ReplicaSpec, WorkloadKind
from ..parsing.config import ParseConfig
from ..parsing.fields import JsonObject, SetAside, integer, mapping, timestamp
from .runs import conditions_outcome, count, replica, run_record

__all__ = ["parse_mpijob", "parse_pytorchjob"]

# Roles in the order summaries list them (the operators' own order), then any other, by name.
_ROLE_ORDER = {"Master": 0, "Launcher": 0, "Worker": 1}


def _roles(spec: JsonObject, field: str, cfg: ParseConfig) -> tuple[list[ReplicaSpec], list[JsonObject]]:
    replicas: list[ReplicaSpec] = []
    templates: list[JsonObject] = []
    specs = mapping(spec, field)
    for role in sorted(specs, key=lambda r: (_ROLE_ORDER.get(str(r), 2), str(r))):
        role_spec = specs[role]
        if not isinstance(role_spec, dict):
            continue
        template = mapping(role_spec, "template")
        templates.append(template)
        replicas.append(replica(role, integer(role_spec, "replicas", 0), mapping(template, "spec"), cfg))
    return replicas, templates


def _parse(
    obj: JsonObject, cfg: ParseConfig, notes: list[SetAside], kind: WorkloadKind, field: str
) -> JobRecord:
    spec, status = mapping(obj, "spec"), mapping(obj, "status")
    replicas, templates = _roles(spec, field, cfg)
    attempts = 1
    if kind is WorkloadKind.MPI_JOB:
        launcher = mapping(mapping(status, "replicaStatuses"), "Launcher")
        attempts = count(launcher, "failed") + count(launcher, "succeeded")
    return run_record(
        obj,
        kind,
        cfg,
        notes,
        outcome=conditions_outcome(status),
        replicas=replicas,
        templates=templates,
        started_at=timestamp(status, "startTime"),
        attempts=attempts,
    )


def parse_pytorchjob(obj: JsonObject, cfg: ParseConfig, notes: list[SetAside]) -> JobRecord:
    return _parse(obj, cfg, notes, WorkloadKind.PYTORCH_JOB, "pytorchReplicaSpecs")


def parse_mpijob(obj: JsonObject, cfg: ParseConfig, notes: list[SetAside]) -> JobRecord:
    return _parse(obj, cfg, notes, WorkloadKind.MPI_JOB, "mpiReplicaSpecs")
