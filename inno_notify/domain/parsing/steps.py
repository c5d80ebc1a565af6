"""A pod that ran a workflow step (an Argo node, an Airflow task try), read the same for every kind.

What tells the workflow and the step apart is the kind's own (argo.py, airflow.py); how the pod went
(its phase, times, GPUs, and which exit speaks for it) is read here once.
"""

from __future__ import annotations

from ..model import PodRecord
from ..workflows import WorkflowKind, WorkflowPod
from .outcome import pod_exit

__all__ = ["step_pod"]


def step_pod(
    pod: PodRecord,
    cluster: str,
    kind: WorkflowKind,
    *,
    workflow_uid: str,
    workflow_name: str,
    step_key: str,
    step: str,
) -> WorkflowPod:
    """`pod` as step `step_key` of the workflow: a one-pod job (its exit: :func:`.outcome.pod_exit`)."""
    exit_code, exit_reason = pod_exit(pod)
    return WorkflowPod(
        cluster=cluster,
        uid=pod.uid,
        namespace=pod.namespace,
        name=pod.name,
        kind=kind,
        workflow_uid=workflow_uid,
        workflow_name=workflow_name,
        step_key=step_key,
        step=step,
        phase=pod.phase,
        created_at=pod.created_at,
        started_at=pod.started_at,
        finished_at=pod.finished_at,
        deleted_at=pod.deleted_at,
        exit_code=exit_code,
        exit_reason=exit_reason,
        gpus=pod.gpu_equivalents,
    )
