"""Pipelines on the simulated cluster: Argo Workflows, Airflow DAG runs and KServe InferenceServices.

Each pipeline is described once (its steps, their attempts, when they start and how they end) and
turned into the changes the real controllers would make, in time order: the Argo controller's
Workflow with its `status.nodes` and one pod per attempt (labels, node annotations, owner
reference, v2 pod names), Airflow's KubernetesPodOperator pods (task labels with Airflow's label
sanitizing, deleted when they end, as `on_finish_action="delete_pod"` does), KServe's
InferenceService turning Ready with a revision. A `Change` is applied to the simulated API server
by `apply_change`; the demo plays them on its simulated clock, tests apply them at once (the
objects carry their own timestamps either way).
"""

from __future__ import annotations

import contextlib
import copy
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from inno_notify.domain.parsing.airflow import make_safe_label_value
from inno_notify.domain.parsing.argo import argo_node_id, argo_pod_name
from inno_notify.sim.behaviour import Behaviour
from inno_notify.sim.kube_api import SimKubeServer
from inno_notify.sim.kube_store import (
    ARGO_WORKFLOWS,
    INFERENCE_SERVICES,
    PODS,
    JsonObj,
    NotFound,
    ResourceType,
)
from inno_notify.sim.objects import (
    container_resources,
    kube_object,
    pod_running,
    pod_terminated,
    ts,
    with_owner,
)

ARGOEXEC = "quay.io/argoproj/argoexec:v3.5.8"
# Seconds from a pod's creation to its scheduling and to its container running.
SCHEDULE_SECONDS = 2.0
START_SECONDS = 5.0


@dataclass(frozen=True, slots=True)
class Change:
    """One write a controller makes: create, update or delete `obj` of `rt` at `at`."""

    at: datetime
    rt: ResourceType
    op: str  # create | update | delete
    obj: JsonObj


def apply_change(server: SimKubeServer, change: Change) -> None:
    meta = change.obj["metadata"]
    if change.op == "create":
        server.create(change.rt, change.obj)
    elif change.op == "update":
        server.update(change.rt, change.obj)
    else:
        with contextlib.suppress(NotFound):  # already gone (a controller's second delete)
            if change.rt is PODS:
                # A graceful deletion: the API server stamps deletionTimestamp (a MODIFIED event)
                # before the pod goes, so its last state says when it was deleted.
                current = server.store.get(change.rt, meta.get("namespace"), meta["name"])
                current["metadata"].setdefault("deletionTimestamp", ts(change.at))
                server.update(change.rt, current)
            server.delete(change.rt, meta.get("namespace"), meta["name"])


def apply_all(server: SimKubeServer, changes: Iterable[Change]) -> None:
    for change in sorted(changes, key=lambda c: c.at):
        apply_change(server, change)


@dataclass(frozen=True, slots=True)
class SimAttempt:
    """One try of a step: when it starts, how long it runs, how it ends."""

    start: datetime
    seconds: float
    exit_code: int = 0
    pod_uid: str = field(default_factory=lambda: str(uuid.uuid4()))

    @property
    def end(self) -> datetime:
        return self.start + timedelta(seconds=self.seconds)

    @property
    def scheduled(self) -> datetime:
        return self.start + timedelta(seconds=SCHEDULE_SECONDS)


@dataclass(frozen=True, slots=True)
class SimStep:
    """A step (an Argo template run, an Airflow task) and its attempts; GPUs per attempt's pod."""

    name: str
    attempts: tuple[SimAttempt, ...]
    template: str | None = None
    gpus: int = 0
    cpu: str = "2"
    memory: str = "8Gi"
    image: str = "registry.example.com/ml/pipeline:2026.11"
    # How a GPU step really runs (the demo's metrics come from it).
    behaviour: Behaviour | None = None

    @property
    def succeeded(self) -> bool:
        return self.attempts[-1].exit_code == 0


def _last_end(steps: Iterable[SimStep]) -> datetime:
    """When the last attempt of `steps` ended."""
    return max(attempt.end for step in steps for attempt in step.attempts)


def _container(name: str, image: str, cpu: str, memory: str, gpus: int) -> JsonObj:
    return {"name": name, "image": image, "resources": container_resources(cpu, memory, gpus)}


def _pod(
    name: str,
    namespace: str,
    uid: str,
    created: datetime,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    containers: list[JsonObj],
    owner_refs: list[JsonObj],
) -> JsonObj:
    pod = kube_object(
        PODS,
        name,
        namespace,
        uid,
        created,
        labels=dict(labels),
        annotations=dict(annotations),
        ownerReferences=owner_refs,
    )
    pod["spec"] = {"restartPolicy": "Never", "containers": containers}
    pod["status"] = {"phase": "Pending", "qosClass": "Burstable"}
    return pod


def _pod_changes(pod: JsonObj, attempt: SimAttempt, node: str, *, delete_after: float | None) -> list[Change]:
    running = pod_running(pod, node, attempt.scheduled, attempt.start + timedelta(seconds=START_SECONDS))
    reason = "OOMKilled" if attempt.exit_code == 137 else None
    done = pod_terminated(running, attempt.end, attempt.exit_code, reason)
    changes = [
        Change(attempt.start, PODS, "create", pod),
        Change(attempt.scheduled, PODS, "update", running),
        Change(attempt.end, PODS, "update", done),
    ]
    if delete_after is not None:
        changes.append(Change(attempt.end + timedelta(seconds=delete_after), PODS, "delete", done))
    return changes


# --- Argo Workflows -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SimArgoWorkflow:
    """A steps workflow: its steps run one after the other, a step with several attempts is retried."""

    name: str
    namespace: str
    created: datetime
    steps: tuple[SimStep, ...]
    owner: str | None = None
    annotations: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    uid: str = field(default_factory=lambda: str(uuid.uuid4()))
    node: str = "gpu-node-01"

    @property
    def end(self) -> datetime:
        return _last_end(self.steps) + timedelta(seconds=2)

    @property
    def succeeded(self) -> bool:
        return all(step.succeeded for step in self.steps)

    def node_name(self, index: int, step: SimStep, attempt: int | None = None) -> str:
        base = f"{self.name}[{index}].{step.name}"
        return base if attempt is None else f"{base}({attempt})"


def _argo_object(wf: SimArgoWorkflow) -> JsonObj:
    annotations = with_owner({"workflows.argoproj.io/pod-name-format": "v2", **wf.annotations}, wf.owner)
    steps: list[list[JsonObj]] = [[{"name": s.name, "template": s.template or s.name}] for s in wf.steps]
    templates: list[JsonObj] = [{"name": "main", "steps": steps}]
    templates += [
        {"name": s.template or s.name, "container": {"image": s.image, "command": ["python", f"{s.name}.py"]}}
        for s in wf.steps
    ]
    labels = {"workflows.argoproj.io/completed": "false", **wf.labels}
    workflow = kube_object(
        ARGO_WORKFLOWS,
        wf.name,
        wf.namespace,
        wf.uid,
        wf.created,
        labels=labels,
        annotations=annotations,
    )
    return workflow | {"spec": {"entrypoint": "main", "templates": templates}, "status": {}}


def _argo_node(
    wf: SimArgoWorkflow, name: str, display: str, type_: str, phase: str, **extra: Any
) -> tuple[str, JsonObj]:
    node_id = argo_node_id(wf.name, name)
    node = {"id": node_id, "name": name, "displayName": display, "type": type_, "phase": phase}
    node.update({k: v for k, v in extra.items() if v is not None})
    return node_id, node


def argo_changes(wf: SimArgoWorkflow) -> list[Change]:
    """Every write of the Argo controller for this workflow, oldest first."""
    base = _argo_object(wf)
    changes = [Change(wf.created, ARGO_WORKFLOWS, "create", base)]
    nodes: dict[str, JsonObj] = {}
    root_id, root = _argo_node(wf, wf.name, wf.name, "Steps", "Running", startedAt=ts(wf.created))
    nodes[root_id] = root

    def snapshot(at: datetime, phase: str, finished: datetime | None = None) -> None:
        obj = copy.deepcopy(base)
        obj["status"] = {"phase": phase, "startedAt": ts(wf.created), "nodes": copy.deepcopy(nodes)}
        if finished is not None:
            obj["status"]["finishedAt"] = ts(finished)
            obj["metadata"]["labels"].update(
                {"workflows.argoproj.io/completed": "true", "workflows.argoproj.io/phase": phase}
            )
            if phase == "Failed":
                obj["status"]["message"] = "child failed"
        else:
            obj["metadata"]["labels"]["workflows.argoproj.io/phase"] = phase
        changes.append(Change(at, ARGO_WORKFLOWS, "update", obj))

    snapshot(wf.created + timedelta(seconds=1), "Running")
    for index, step in enumerate(wf.steps):
        template = step.template or step.name
        retried = len(step.attempts) > 1
        retry_id = None
        if retried:
            retry_id, retry = _argo_node(
                wf,
                wf.node_name(index, step),
                step.name,
                "Retry",
                "Running",
                templateName=template,
                startedAt=ts(step.attempts[0].start),
                children=[],
            )
            nodes[retry_id] = retry
        for number, attempt in enumerate(step.attempts):
            name = wf.node_name(index, step, number if retried else None)
            display = f"{step.name}({number})" if retried else step.name
            node_id, node = _argo_node(
                wf, name, display, "Pod", "Pending", templateName=template, startedAt=ts(attempt.start)
            )
            nodes[node_id] = node
            if retry_id is not None:
                nodes[retry_id]["children"].append(node_id)
            pod = _pod(
                argo_pod_name(wf.name, name, template, node_id, "v2"),
                wf.namespace,
                attempt.pod_uid,
                attempt.start,
                {"workflows.argoproj.io/workflow": wf.name, "workflows.argoproj.io/completed": "false"},
                {
                    "workflows.argoproj.io/node-id": node_id,
                    "workflows.argoproj.io/node-name": name,
                    "kubectl.kubernetes.io/default-container": "main",
                },
                [
                    _container("wait", ARGOEXEC, "10m", "64Mi", 0),
                    _container("main", step.image, step.cpu, step.memory, step.gpus),
                ],
                [
                    {
                        "apiVersion": "argoproj.io/v1alpha1",
                        "kind": "Workflow",
                        "name": wf.name,
                        "uid": wf.uid,
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            )
            changes.extend(_pod_changes(pod, attempt, wf.node, delete_after=None))
            snapshot(attempt.start, "Running")
            node.update({"phase": "Running", "hostNodeName": wf.node})
            snapshot(attempt.scheduled, "Running")
            phase = "Succeeded" if attempt.exit_code == 0 else "Failed"
            node.update(
                {
                    "phase": phase,
                    "finishedAt": ts(attempt.end),
                    "outputs": {"exitCode": str(attempt.exit_code)},
                }
            )
            if attempt.exit_code:
                node["message"] = f"Error (exit code {attempt.exit_code})"
            if retry_id is not None and number == len(step.attempts) - 1:
                nodes[retry_id].update({"phase": phase, "finishedAt": ts(attempt.end)})
            snapshot(attempt.end, "Running")
        if not step.succeeded:
            break
    phase = "Succeeded" if wf.succeeded else "Failed"
    root.update({"phase": phase, "finishedAt": ts(wf.end)})
    snapshot(wf.end, phase, wf.end)
    return changes


# --- Airflow DAG runs ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SimDagRun:
    """A DAG run whose tasks run as KubernetesPodOperator pods, deleted when they end."""

    dag_id: str
    run_id: str
    namespace: str
    tasks: tuple[SimStep, ...]
    owner: str | None = None
    node: str = "gpu-node-02"
    delete_after_seconds: float = 1.0

    @property
    def end(self) -> datetime:
        return _last_end(self.tasks)


def airflow_changes(run: SimDagRun) -> list[Change]:
    """The KPO pods of every task attempt: created, running, ended, deleted."""
    changes: list[Change] = []
    for task in run.tasks:
        for number, attempt in enumerate(task.attempts, start=1):
            labels = {
                "dag_id": make_safe_label_value(run.dag_id),
                "task_id": make_safe_label_value(task.name),
                "run_id": make_safe_label_value(run.run_id),
                "try_number": str(number),
                "kubernetes_pod_operator": "True",
                "airflow_version": "2.10.4",
                "airflow_kpo_in_cluster": "True",
            }
            annotations = with_owner({"inno-notify/airflow-run-id": run.run_id}, run.owner)
            pod = _pod(
                f"{task.name.replace('_', '-')}-{attempt.pod_uid[:8]}",
                run.namespace,
                attempt.pod_uid,
                attempt.start,
                labels,
                annotations,
                [_container("base", task.image, task.cpu, task.memory, task.gpus)],
                [],
            )
            changes.extend(_pod_changes(pod, attempt, run.node, delete_after=run.delete_after_seconds))
    return sorted(changes, key=lambda c: c.at)


# --- KServe -------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SimInferenceService:
    """A model served by KServe (Knative mode): created, then Ready with its first revision."""

    name: str
    namespace: str
    created: datetime
    ready_after_seconds: float = 60.0
    owner: str | None = None
    trained_by: str | None = None
    gpus: int = 1
    storage_uri: str = "s3://models/resnet/v1"
    model_format: str = "pytorch"
    uid: str = field(default_factory=lambda: str(uuid.uuid4()))

    @property
    def ready_at(self) -> datetime:
        return self.created + timedelta(seconds=self.ready_after_seconds)


def inference_service_object(isvc: SimInferenceService) -> JsonObj:
    annotations = with_owner({}, isvc.owner)
    if isvc.trained_by:
        annotations["inno-notify/trained-by"] = isvc.trained_by
    resources: JsonObj = {"limits": {"cpu": "4", "memory": "16Gi"}}
    if isvc.gpus:
        resources["limits"]["nvidia.com/gpu"] = str(isvc.gpus)
    return kube_object(
        INFERENCE_SERVICES,
        isvc.name,
        isvc.namespace,
        isvc.uid,
        isvc.created,
        generation=1,
        annotations=annotations,
    ) | {
        "spec": {
            "predictor": {
                "minReplicas": 1,
                "model": {
                    "modelFormat": {"name": isvc.model_format},
                    "storageUri": isvc.storage_uri,
                    "resources": resources,
                },
            }
        },
        "status": {},
    }


def isvc_ready(obj: JsonObj, revision: str, at: datetime) -> JsonObj:
    """The InferenceService once `revision` serves all traffic (Knative mode)."""
    new = copy.deepcopy(obj)
    meta = new["metadata"]
    host = f"{meta['name']}.{meta['namespace']}.example.org"
    conditions = [
        {"type": name, "status": "True", "lastTransitionTime": ts(at)}
        for name in (
            "IngressReady",
            "PredictorConfigurationReady",
            "PredictorReady",
            "PredictorRouteReady",
            "Ready",
        )
    ]
    new["status"] = {
        "url": f"https://{host}",
        "address": {"url": f"http://{meta['name']}.{meta['namespace']}.svc.cluster.local"},
        "conditions": conditions,
        "components": {
            "predictor": {
                "latestCreatedRevision": revision,
                "latestReadyRevision": revision,
                "latestRolledoutRevision": revision,
                "traffic": [{"revisionName": revision, "percent": 100, "latestRevision": True}],
            }
        },
        "deploymentMode": "Serverless",
        "observedGeneration": meta.get("generation", 1),
    }
    return new


def serving_changes(isvc: SimInferenceService) -> list[Change]:
    obj = inference_service_object(isvc)
    return [
        Change(isvc.created, INFERENCE_SERVICES, "create", obj),
        Change(
            isvc.ready_at,
            INFERENCE_SERVICES,
            "update",
            isvc_ready(obj, f"{isvc.name}-predictor-00001", isvc.ready_at),
        ),
    ]


def gpu_behaviours(steps: Sequence[SimStep]) -> dict[str, Behaviour]:
    """The behaviour of every GPU attempt's pod, by pod uid (for the simulated metrics)."""
    return {a.pod_uid: s.behaviour for s in steps if s.gpus and s.behaviour for a in s.attempts}


def retry_storm_workflow(
    name: str, namespace: str, at: datetime, *, attempts: int, name_chars: int = 0, owner: str | None = None
) -> JsonObj:
    """A hostile Argo Workflow (issue 29): one step whose Retry node has `attempts` failed Pod
    children (a retry strategy without a limit), each node name padded to `name_chars` characters
    (the node IDs derived from them). Its phase is Running: the controller keeps adding to it."""
    pad = "x" * max(0, name_chars - len(name) - 20)
    step = f"{name}{pad}.train"
    retry_id = argo_node_id(name, f"{name}.train") + pad
    nodes: JsonObj = {
        retry_id: {
            "id": retry_id,
            "name": step,
            "displayName": "train",
            "type": "Retry",
            "phase": "Running",
            "templateName": "train",
            "children": [],
        }
    }
    children = nodes[retry_id]["children"]
    for n in range(attempts):
        node_name = f"{step}({n})"
        # Hashing 10,000 characters per node in Python would make the object slow to build.
        node_id = argo_node_id(name, f"{name}.train({n})") + pad
        children.append(node_id)
        started = at + timedelta(seconds=n)
        nodes[node_id] = {
            "id": node_id,
            "name": node_name,
            "displayName": f"train({n})",
            "type": "Pod",
            "phase": "Failed",
            "templateName": "train",
            "startedAt": ts(started),
            "finishedAt": ts(started + timedelta(seconds=1)),
            "message": "Error (exit code 1)",
            "outputs": {"exitCode": "1"},
        }
    uid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"retry-storm/{namespace}/{name}"))
    workflow = kube_object(
        ARGO_WORKFLOWS,
        name,
        namespace,
        uid,
        at,
        resourceVersion="1",
        annotations=with_owner({}, owner),
    )
    return workflow | {"status": {"phase": "Running", "startedAt": ts(at), "nodes": nodes}}
