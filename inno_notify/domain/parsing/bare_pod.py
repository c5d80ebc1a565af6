"""GPU pods that no Job owns, tracked as one-pod workloads.

Airflow's KubernetesPodOperator and Argo Workflows run GPU work as bare pods (no Job), and their
users deserve the same summary. A pod qualifies when it requests GPUs and is not run by a Job (the
Job is the workload then) or by a controller of long-lived replicas (ReplicaSet, StatefulSet,
DaemonSet, ReplicationController: services and notebooks, whose pods are replaced rather than
finished). Like a Job, a pod without an owner key is recorded all the same (its GPU time counts);
routing sends its summary to the team's leads only where the team asks for unowned summaries.
Argo step pods share their workflow's name as group key, so a workflow's steps become one message
where workflows are not summarized as a whole (domain.workflows).

A GPU pod that a workspace selector matches (Coder, JupyterHub, …) is a workspace instead, whoever
controls it and whether or not it names an owner: see :mod:`.workspace`.

Family, for right-sizing across runs: the ``inno-notify/family`` key; else Airflow's
``<dag_id>.<task_id>`` labels; else Argo's ``<workflow family>.<template>`` read from the pod name
``<workflow>-<template>-<node hash>``; else the generic name rules of :mod:`.family`.
"""

from __future__ import annotations

from dataclasses import replace

from ..links import mlflow_links
from ..model import JobRecord, PodRecord, WorkloadKind
from .annotations import FAMILY_KEY, indexed_lookup, read_words
from .config import ParseConfig
from .family import family_from_name, job_family
from .fields import JsonObject, SetAside, indexed_text, mapping, objects
from .outcome import pod_exit
from .pod import parse_pod
from .pod_workload import pod_status, pod_workload_record
from .storable import INDEXED_MAX_BYTES, storable
from .workspace import parse_workspace_pod

__all__ = ["ARGO_WORKFLOW_KEY", "parse_bare_gpu_pod"]

ARGO_WORKFLOW_KEY = "workflows.argoproj.io/workflow"
_REPLICA_CONTROLLERS = frozenset({"ReplicaSet", "StatefulSet", "DaemonSet", "ReplicationController"})


def _controlled_elsewhere(metadata: JsonObject, pod: PodRecord) -> bool:
    if pod.job_uid is not None:
        return True
    kinds = (ref.get("kind") for ref in objects(metadata, "ownerReferences"))
    return any(isinstance(kind, str) and (kind in _REPLICA_CONTROLLERS or kind == "Job") for kind in kinds)


def _argo_family(pod_name: str, workflow: str | None) -> str | None:
    """``<workflow>-<template>-<node hash>`` → ``<workflow family>.<template>``: the same step of
    the same workflow (template) across runs."""
    if not workflow or not pod_name.startswith(workflow + "-"):
        return None
    template, sep, _ = pod_name[len(workflow) + 1 :].rpartition("-")
    if not sep or not template:
        return None
    return f"{family_from_name(workflow)}.{template}"


def _airflow_family(labels: dict[str, str]) -> str | None:
    dag, task = labels.get("dag_id"), labels.get("task_id")
    return f"{dag}.{task}" if dag and task else None


def parse_bare_gpu_pod(
    obj: JsonObject, cfg: ParseConfig, notes: list[SetAside] | None = None, pod: PodRecord | None = None
) -> JobRecord | None:
    """A one-pod workload (``WorkloadKind.POD``, or ``WORKSPACE`` where a workspace selector matches;
    uid = the pod's uid), or None if the pod is not one. Its owner is None when the pod names none
    (or not exactly one address).

    ``pod`` is the pod's record when the caller parsed it already; refused values go to ``notes``.
    """
    metadata = mapping(obj, "metadata")
    if pod is None:
        pod = parse_pod(obj, cfg, notes)
    workspace = parse_workspace_pod(obj, cfg, pod, notes)
    if workspace is not None:
        return workspace
    if pod.gpu_equivalents <= 0 or _controlled_elsewhere(metadata, pod):
        return None
    words = read_words(metadata, pod.namespace, cfg, notes)
    labels, layers, intent = words.labels, words.layers, words.intent

    workflow = indexed_lookup(layers, (ARGO_WORKFLOW_KEY,))
    status = pod_status(pod)
    exit_code, exit_reason = pod_exit(pod)
    family = (
        indexed_lookup(layers, (FAMILY_KEY,))
        or _airflow_family(labels)
        or _argo_family(pod.name, workflow)
        or job_family(pod.name, indexed_text(metadata, "generateName"), None)
    )
    return replace(
        pod_workload_record(obj, pod, cfg, WorkloadKind.POD, status, intent, labels),
        group_key=intent.group_key or workflow,
        family=None if family is None else storable(family, INDEXED_MAX_BYTES),
        exit_code=exit_code,
        exit_reason=exit_reason,
        links=mlflow_links(layers, cfg.mlflow_url),
    )
