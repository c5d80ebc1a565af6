"""The registry of workload kinds (CONTRACT.md §3a): one line per kind, in one place.

Each kind is a module of its own (batch, kubeflow, jobset, ray) answering one question — what is
this object (domain.kinds.spec) — and this tuple lists them. The watch set and readiness
(adapters.kube), the `workloads.kinds` settings, the RBAC rules of the manifests and the simulated
API server's CRDs are derived from it; the ingestion pipeline parses every kind through it and
never names one. Adding a kind: its module, its table test, one line here, one sim fixture
(docs/workloads.md).

Pods are not in the registry: a pod is a run's when its controller is (domain.parsing.ownership),
and a GPU pod no watched run controls is a run of its own (domain.parsing.bare_pod).
"""

from __future__ import annotations

from collections.abc import Iterable

from ..model import WorkloadKind
from .batch import parse_batch_job
from .jobset import parse_jobset
from .kubeflow import parse_mpijob, parse_pytorchjob
from .ray import parse_raycluster, parse_rayjob
from .spec import LINK_DEPTH, KindSpec, Link, Parser, owner_key

__all__ = [
    "BATCH_JOB",
    "KINDS",
    "LINK_DEPTH",
    "OPTIONAL_KINDS",
    "KindSpec",
    "Link",
    "Parser",
    "kind_spec",
    "owner_key",
    "owner_kinds",
]

BATCH_JOB = KindSpec("Job", "batch", ("v1",), "jobs", parse_batch_job, WorkloadKind.JOB, "Job")
PYTORCH_JOB = KindSpec(
    "PyTorchJob",
    "kubeflow.org",
    ("v1",),
    "pytorchjobs",
    parse_pytorchjob,
    WorkloadKind.PYTORCH_JOB,
    "PyTorchJob",
)
MPI_JOB = KindSpec(
    "MPIJob", "kubeflow.org", ("v2beta1",), "mpijobs", parse_mpijob, WorkloadKind.MPI_JOB, "MPIJob"
)
JOB_SET = KindSpec(
    "JobSet", "jobset.x-k8s.io", ("v1alpha2",), "jobsets", parse_jobset, WorkloadKind.JOB_SET, "JobSet"
)
RAY_JOB = KindSpec("RayJob", "ray.io", ("v1",), "rayjobs", parse_rayjob, WorkloadKind.RAY_JOB, "RayJob")
# Watched with RayJob: the link from a RayJob to its pods.
RAY_CLUSTER = KindSpec("RayCluster", "ray.io", ("v1",), "rayclusters", parse_raycluster, None, "RayJob")

KINDS: tuple[KindSpec, ...] = (BATCH_JOB, PYTORCH_JOB, MPI_JOB, JOB_SET, RAY_JOB, RAY_CLUSTER)
# The kinds that exist only where their operator is installed: found by discovery.
OPTIONAL_KINDS: tuple[KindSpec, ...] = tuple(spec for spec in KINDS if spec is not BATCH_JOB)
_BY_KIND = {spec.kind: spec for spec in KINDS}


def kind_spec(kind: str) -> KindSpec | None:
    """The registered kind of that name (a watch event's resource kind), or None."""
    return _BY_KIND.get(kind)


def owner_kinds(watched: Iterable[KindSpec]) -> frozenset[str]:
    """`ParseConfig.owner_kinds` for the kinds being watched: their controllers' names, and a batch
    Job's (whose pods are found by its controller-uid label anyway)."""
    return frozenset(spec.owner_key for spec in watched if spec is not BATCH_JOB)
