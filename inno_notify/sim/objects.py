"""Kubernetes Job and Pod objects as the API server returns them, at each step of a job's life.

The simulated cluster, the ingestion tests and the benchmarks all need realistic objects (the
fields real clusters set, camelCase JSON, RFC 3339 timestamps) that move through the states the
Job controller and the kubelet produce. These builders return fresh dicts; each step function
returns a new object and leaves its input untouched.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from inno_notify.sim.kube_store import JOBS, PODS, JsonObj, ResourceType


def ts(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


OWNER_ANNOTATION = "inno-notify/owner"


def with_owner(annotations: Mapping[str, str], owner: str | None) -> dict[str, str]:
    """`annotations` plus the `inno-notify/owner` annotation naming `owner` (when there is one and
    `annotations` does not name one already)."""
    annotated = dict(annotations)
    if owner:
        annotated.setdefault(OWNER_ANNOTATION, owner)
    return annotated


def kube_object(
    rt: ResourceType, name: str, namespace: str, uid: str, created: datetime, **meta: Any
) -> JsonObj:
    """A namespaced object as the API server returns it, without spec and status: its type and the
    metadata every object carries, then `meta` (labels, annotations, ownerReferences...)."""
    return {
        "apiVersion": rt.api_version,
        "kind": rt.kind,
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid,
            "creationTimestamp": ts(created),
            **meta,
        },
    }


def controller_ref(owner: JsonObj) -> JsonObj:
    """The ownerReference a controller puts on each object it creates for `owner`."""
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


@dataclass(frozen=True, slots=True)
class JobSpec:
    """What a researcher submits: one Job whose pods ask for GPUs, memory and CPU."""

    name: str
    namespace: str
    owner: str | None = None
    gpus: int = 1
    gpu_resource: str = "nvidia.com/gpu"
    memory: str = "64Gi"
    cpu: str = "8"
    image: str = "registry.example.com/research/train:2026.11"
    completions: int = 1
    parallelism: int = 1
    backoff_limit: int = 0
    annotations: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    uid: str = field(default_factory=lambda: str(uuid.uuid4()))


def container_resources(cpu: str, memory: str, gpus: int, gpu_resource: str = "nvidia.com/gpu") -> JsonObj:
    """A batch container's resources as researchers write them: CPU and memory requested, memory
    limited, and `gpus` (if any) both requested and limited, as an extended resource must be."""
    resources: JsonObj = {"requests": {"cpu": cpu, "memory": memory}, "limits": {"memory": memory}}
    if gpus:
        resources["requests"][gpu_resource] = str(gpus)
        resources["limits"][gpu_resource] = str(gpus)
    return resources


def job_object(spec: JobSpec, created_at: datetime) -> JsonObj:
    resources = container_resources(spec.cpu, spec.memory, spec.gpus, spec.gpu_resource)
    job = kube_object(
        JOBS,
        spec.name,
        spec.namespace,
        spec.uid,
        created_at,
        generation=1,
        labels={"app.kubernetes.io/name": spec.name, **spec.labels},
        annotations=with_owner(spec.annotations, spec.owner),
    )
    job["spec"] = {
        "backoffLimit": spec.backoff_limit,
        "completionMode": "NonIndexed",
        "completions": spec.completions,
        "parallelism": spec.parallelism,
        "manualSelector": False,
        "podReplacementPolicy": "TerminatingOrFailed",
        "suspend": False,
        "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": spec.uid}},
        "template": {
            "metadata": {
                "labels": {
                    "batch.kubernetes.io/controller-uid": spec.uid,
                    "batch.kubernetes.io/job-name": spec.name,
                    "controller-uid": spec.uid,
                    "job-name": spec.name,
                }
            },
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "main",
                        "image": spec.image,
                        "command": ["python", "train.py"],
                        "resources": resources,
                    }
                ],
            },
        },
    }
    job["status"] = {}
    return job


def job_started(job: JsonObj, at: datetime) -> JsonObj:
    new = copy.deepcopy(job)
    new["status"] = {
        "startTime": ts(at),
        "active": 1,
        "ready": 0,
        "terminating": 0,
        "uncountedTerminatedPods": {},
    }
    return new


def _decided(at: datetime, reason: str, message: str, first: str, final: str) -> list[JsonObj]:
    """The two conditions the Job controller (Kubernetes ≥ 1.31) sets when it has decided a Job:
    `first` (SuccessCriteriaMet, FailureTarget), then `final` (Complete, Failed), with one reason."""
    condition = {
        "lastProbeTime": ts(at),
        "lastTransitionTime": ts(at),
        "reason": reason,
        "message": message,
        "status": "True",
    }
    return [{**condition, "type": first}, {**condition, "type": final}]


def job_succeeded(job: JsonObj, at: datetime) -> JsonObj:
    """Kubernetes ≥ 1.31: SuccessCriteriaMet, then Complete, both with reason CompletionsReached."""
    new = copy.deepcopy(job)
    status = new.setdefault("status", {})
    completions = new["spec"].get("completions") or 1
    message = "Reached expected number of succeeded pods"
    status.update(
        {
            "active": 0,
            "ready": 0,
            "succeeded": completions,
            "terminating": 0,
            "completionTime": ts(at),
            "conditions": _decided(at, "CompletionsReached", message, "SuccessCriteriaMet", "Complete"),
        }
    )
    return new


def job_failed(job: JsonObj, at: datetime, reason: str = "BackoffLimitExceeded", failed: int = 1) -> JsonObj:
    """Kubernetes ≥ 1.31: FailureTarget, then Failed, with the same reason."""
    new = copy.deepcopy(job)
    status = new.setdefault("status", {})
    messages = {
        "BackoffLimitExceeded": "Job has reached the specified backoff limit",
        "DeadlineExceeded": "Job was active longer than specified deadline",
    }
    message = messages.get(reason, reason)
    status.update(
        {
            "active": 0,
            "ready": 0,
            "failed": failed,
            "terminating": 0,
            "conditions": _decided(at, reason, message, "FailureTarget", "Failed"),
        }
    )
    return new


def pod_object(job: JsonObj, suffix: str, created_at: datetime, uid: str | None = None) -> JsonObj:
    meta = job["metadata"]
    template = job["spec"]["template"]
    pod = kube_object(
        PODS,
        f"{meta['name']}-{suffix}",
        meta["namespace"],
        uid or str(uuid.uuid4()),
        created_at,
        generateName=f"{meta['name']}-",
        labels=dict(template["metadata"]["labels"]),
        finalizers=["batch.kubernetes.io/job-tracking"],
        ownerReferences=[controller_ref(job)],
    )
    pod["spec"] = copy.deepcopy(template["spec"])
    pod["status"] = {"phase": "Pending", "qosClass": "Burstable"}
    return pod


def pod_running(pod: JsonObj, node: str, scheduled_at: datetime, started_at: datetime) -> JsonObj:
    new = copy.deepcopy(pod)
    new["spec"]["nodeName"] = node
    new["status"] = {
        "phase": "Running",
        "hostIP": "10.0.0.10",
        "podIP": "10.244.1.20",
        "qosClass": "Burstable",
        "startTime": ts(scheduled_at),
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": ts(scheduled_at),
            },
            {
                "type": "Initialized",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": ts(scheduled_at),
            },
            {"type": "Ready", "status": "True", "lastProbeTime": None, "lastTransitionTime": ts(started_at)},
        ],
        "containerStatuses": [
            {
                "name": c["name"],
                "image": c["image"],
                "imageID": c["image"] + "@sha256:" + "0" * 64,
                "containerID": "containerd://" + uuid.uuid4().hex,
                "ready": True,
                "restartCount": 0,
                "started": True,
                "state": {"running": {"startedAt": ts(started_at)}},
                "lastState": {},
            }
            for c in new["spec"]["containers"]
        ],
    }
    return new


def pod_terminated(
    pod: JsonObj,
    finished_at: datetime,
    exit_code: int = 0,
    reason: str | None = None,
    message: str | None = None,
) -> JsonObj:
    """The pod after its containers ended: Succeeded on exit 0, else Failed (OOMKilled: 137)."""
    new = copy.deepcopy(pod)
    reason = reason or ("Completed" if exit_code == 0 else "Error")
    status = new["status"]
    status["phase"] = "Succeeded" if exit_code == 0 else "Failed"
    for container in status.get("containerStatuses", []):
        started = (container["state"].get("running") or {}).get("startedAt") or ts(finished_at)
        terminated: JsonObj = {
            "exitCode": exit_code,
            "reason": reason,
            "startedAt": started,
            "finishedAt": ts(finished_at),
            "containerID": container.get("containerID"),
        }
        if message:
            terminated["message"] = message
        container.update({"ready": False, "started": False, "state": {"terminated": terminated}})
    for condition in status.get("conditions", []):
        if condition["type"] == "Ready":
            condition.update(
                {"status": "False", "reason": "PodCompleted", "lastTransitionTime": ts(finished_at)}
            )
    return new


def notebook_pod(
    name: str,
    namespace: str,
    uid: str,
    username: str,
    node: str,
    started_at: datetime,
    gpus: int = 1,
    image: str = "quay.io/jupyter/pytorch-notebook:cuda12-2026-11-24",
) -> JsonObj:
    """A running JupyterHub single-user server as KubeSpawner (z2jh) creates it: no owner reference,
    `component: singleuser-server`, the user's name as a label and, raw, as an annotation."""
    labels = {
        "app": "jupyterhub",
        "chart": "jupyterhub-3.3.8",
        "component": "singleuser-server",
        "heritage": "jupyterhub",
        "hub.jupyter.org/network-access-hub": "true",
        "hub.jupyter.org/servername": "",
        "hub.jupyter.org/username": username,
        "release": "jhub",
    }
    pod = kube_object(
        PODS,
        name,
        namespace,
        uid,
        started_at,
        labels=labels,
        annotations={"hub.jupyter.org/username": username},
    )
    return pod | {
        "spec": {
            "nodeName": node,
            "restartPolicy": "OnFailure",
            "containers": [
                {
                    "name": "notebook",
                    "image": image,
                    "resources": {
                        "requests": {"cpu": "2", "memory": "16Gi", "nvidia.com/gpu": str(gpus)},
                        "limits": {"memory": "16Gi", "nvidia.com/gpu": str(gpus)},
                    },
                }
            ],
        },
        "status": {
            "phase": "Running",
            "qosClass": "Burstable",
            "startTime": ts(started_at),
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "True",
                    "lastProbeTime": None,
                    "lastTransitionTime": ts(started_at),
                },
                {
                    "type": "Ready",
                    "status": "True",
                    "lastProbeTime": None,
                    "lastTransitionTime": ts(started_at),
                },
            ],
            "containerStatuses": [
                {
                    "name": "notebook",
                    "image": image,
                    "ready": True,
                    "restartCount": 0,
                    "started": True,
                    "state": {"running": {"startedAt": ts(started_at)}},
                    "lastState": {},
                }
            ],
        },
    }
