"""Which workload an object belongs to: its controller, and the replica role a pod plays in it.

Kubernetes says who runs an object in `metadata.ownerReferences`: the one entry with
`controller: true` (Kueue's jobframework walks the same chain, FindAncestorJobManagedByKueue). A pod
of a PyTorchJob names the PyTorchJob; a pod of a JobSet names its child Job, which names the
JobSet; a Ray pod names its RayCluster, which names the RayJob. Which controllers make an object
part of a workload depends on which kinds are watched (`ParseConfig.owner_kinds`): a PyTorchJob's
pod in a cluster whose PyTorchJobs we do not watch stays a bare GPU pod, as it always was.

A pod's role comes from the labels the operators write (FACTS.md, Training operators); labels are
shortcuts, never proof of ownership, but they are the only place a role is written.
"""

from __future__ import annotations

from collections.abc import Mapping

from .fields import JsonObject, key, objects
from .storable import INDEXED_MAX_BYTES, storable

__all__ = ["ControllerRef", "controller_ref", "owned_by", "pod_role"]

# Kubeflow Training Operator and mpi-operator: the replica type, lower-case on pods.
KUBEFLOW_REPLICA_TYPE = "training.kubeflow.org/replica-type"
KUBEFLOW_JOB_ROLE = "training.kubeflow.org/job-role"
JOBSET_REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"
RAY_NODE_TYPE = "ray.io/node-type"
RAY_GROUP = "ray.io/group"
RAY_ORIGINATED_FROM_CRD = "ray.io/originated-from-crd"
SUBMITTER = "submitter"


class ControllerRef:
    """The controller owner reference of an object, as far as it can be read."""

    __slots__ = ("api_version", "kind", "uid")

    def __init__(self, kind: str, api_version: str, uid: str) -> None:
        self.kind = kind
        self.api_version = api_version
        self.uid = uid


def controller_ref(metadata: JsonObject) -> ControllerRef | None:
    """The `controller: true` owner reference with a usable uid, or None."""
    for ref in objects(metadata, "ownerReferences"):
        if ref.get("controller") is not True:
            continue
        kind, api_version = ref.get("kind"), ref.get("apiVersion")
        uid = key(ref, "uid")
        if isinstance(kind, str) and uid is not None:
            return ControllerRef(kind, api_version if isinstance(api_version, str) else "", uid)
    return None


def owned_by(metadata: JsonObject, owner_kinds: frozenset[str]) -> str | None:
    """The uid of the controller that makes this object part of a watched workload kind, or None.

    Kinds are matched with their API group (`Job` of `batch` is not Volcano's `Job` of
    `batch.volcano.sh`): `owner_kinds` holds "group/Kind" entries (domain.kinds.owner_key)."""
    ref = controller_ref(metadata)
    if ref is None:
        return None
    group = ref.api_version.rpartition("/")[0]
    return ref.uid if f"{group}/{ref.kind}" in owner_kinds else None


def _capped(value: str) -> str | None:
    cleaned = storable(value, INDEXED_MAX_BYTES).strip()
    return cleaned or None


def _label(labels: Mapping[str, object], name: str) -> str | None:
    value = labels.get(name)
    return value if isinstance(value, str) and value else None


def pod_role(labels: Mapping[str, object]) -> str | None:
    """The replica role a pod plays, from its operator's labels (as the object holds them: only the
    few read here are cleaned): Master/Worker/Launcher (Kubeflow, capitalised as in the job's spec),
    a JobSet's replicated job, a Ray head or worker group, a RayJob's submitter; None for a pod with
    no role (a Job's or a bare pod)."""
    replica_type = _label(labels, KUBEFLOW_REPLICA_TYPE) or _label(labels, KUBEFLOW_JOB_ROLE)
    if replica_type is not None:
        return _capped(replica_type[:1].upper() + replica_type[1:])
    replicated_job = _label(labels, JOBSET_REPLICATED_JOB)
    if replicated_job is not None:
        return _capped(replicated_job)
    node_type = _label(labels, RAY_NODE_TYPE)
    if node_type == "head":
        return "head"
    if node_type is not None:
        return _capped(_label(labels, RAY_GROUP) or node_type)
    if _label(labels, RAY_ORIGINATED_FROM_CRD) is not None:
        return SUBMITTER
    return None
