"""Argo Workflows objects (argoproj.io/v1alpha1 Workflow, and the pods of its steps) turned into records.

The Workflow holds the whole story in ``status.nodes``, a map keyed by node ID: every ``Pod`` node
is one attempt of a step and has one pod; a step with a retry strategy is a ``Retry`` node whose
children are the attempts (named ``<step>(0)``, ``(1)``, …). The other node types (Steps, DAG,
StepGroup, Skipped, Suspend, …) run nothing and are not steps here. A pod names its node in the
``workflows.argoproj.io/node-id`` annotation; where a pod lacks it the node ID is computed the way
the controller does (``<workflow>-<fnv-1a 32-bit of the node name>``), and so are pod names
(``v1``: the node ID; ``v2``, the default since 3.4: ``<workflow>-<template>-<same number>``).

Owner: the Workflow's own annotations and labels (``inno-notify/owner`` …); the SSO user who
submitted it through the Argo Server is kept as :class:`Creator` (the ``workflows.argoproj.io/creator``
labels, reduced by Argo to label characters) for the service to map through the directory
(:func:`creator_matches`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ..links import mlflow_links
from ..model import JobStatus, PodRecord
from ..workflows import (
    ARGO_WORKFLOW_LABEL,
    ATTEMPTS_KEPT_EACH_END,
    STEPS_KEPT,
    AttemptRecord,
    Creator,
    StepRecord,
    WorkflowKind,
    WorkflowPod,
    WorkflowRecord,
)
from .annotations import read_words
from .config import ParseConfig
from .fields import (
    JsonObject,
    SetAside,
    indexed_text,
    integer,
    key,
    mapping,
    objects,
    required_identity,
    string_map,
    text,
    timestamp,
)
from .pod import parse_pod
from .steps import step_pod
from .storable import INDEXED_MAX_BYTES, storable

__all__ = [
    "CREATOR_EMAIL_LABEL",
    "CREATOR_LABEL",
    "CREATOR_USERNAME_LABEL",
    "argo_node_id",
    "argo_pod_name",
    "creator_matches",
    "dns_friendly",
    "fnv1a_32",
    "parse_argo_pod",
    "parse_off_loop",
    "parse_workflow",
    "workflow_creator",
]

NODE_ID_KEY = "workflows.argoproj.io/node-id"
NODE_NAME_KEY = "workflows.argoproj.io/node-name"
POD_NAME_FORMAT_KEY = "workflows.argoproj.io/pod-name-format"
PHASE_LABEL = "workflows.argoproj.io/phase"
CREATOR_LABEL = "workflows.argoproj.io/creator"
CREATOR_EMAIL_LABEL = "workflows.argoproj.io/creator-email"
CREATOR_USERNAME_LABEL = "workflows.argoproj.io/creator-preferred-username"

_STATUS = {
    "Pending": JobStatus.PENDING,
    "Running": JobStatus.RUNNING,
    "Succeeded": JobStatus.SUCCEEDED,
    "Failed": JobStatus.FAILED,
    "Error": JobStatus.FAILED,
}
# Kubernetes object names are at most 253 characters; Argo keeps 10 for the hash.
_MAX_POD_NAME_PREFIX = 253 - 10 - 1
# A Workflow with more nodes than this is parsed off the event loop (parse_off_loop): parsing
# takes about a millisecond per hundred nodes, and the loop also answers the liveness probe.
PARSE_ON_LOOP_MAX_NODES = 500
_FNV_OFFSET = 0x811C9DC5
_FNV_PRIME = 0x01000193


def fnv1a_32(text_: str) -> int:
    """FNV-1a, 32 bits, over the UTF-8 bytes (Go's hash/fnv New32a)."""
    value = _FNV_OFFSET
    for byte in text_.encode("utf-8", "surrogatepass"):
        value = ((value ^ byte) * _FNV_PRIME) & 0xFFFFFFFF
    return value


def argo_node_id(workflow: str, node_name: str) -> str:
    """The node ID the controller gives a node name (the root node's ID is the workflow's name)."""
    if node_name == workflow:
        return workflow
    return f"{workflow}-{fnv1a_32(node_name)}"


def argo_pod_name(workflow: str, node_name: str, template: str | None, node_id: str, version: str) -> str:
    """The pod name of a node (workflow/util/pod_name.go ``GeneratePodName``)."""
    if version == "v1":
        return node_id
    if node_name == workflow:
        return workflow
    prefix = f"{workflow}-{template}" if template else workflow
    return f"{prefix[:_MAX_POD_NAME_PREFIX]}-{fnv1a_32(node_name)}"


# --- the creator ----------------------------------------------------------------------------------

_NOT_LABEL = re.compile(r"[^-_.a-zA-Z0-9]")
_LEADING = re.compile(r"^[^a-zA-Z0-9]*")
_TRAILING = re.compile(r"[^a-zA-Z0-9]*$")


def dns_friendly(value: str) -> str:
    """What Argo writes into a creator label (workflow/creator/creator.go ``dnsFriendly``)."""
    cleaned = _NOT_LABEL.sub("-", value)
    if len(cleaned) > 63:
        cleaned = cleaned[-63:]
    return _TRAILING.sub("", _LEADING.sub("", cleaned))


def workflow_creator(labels: Mapping[str, str]) -> Creator | None:
    found = Creator(
        subject=labels.get(CREATOR_LABEL) or None,
        email=labels.get(CREATOR_EMAIL_LABEL) or None,
        preferred_username=labels.get(CREATOR_USERNAME_LABEL) or None,
    )
    return found if (found.subject or found.email or found.preferred_username) else None


def creator_matches(creator: Creator, email: str) -> bool:
    """Whether a directory address is the creator: the address is put through Argo's own reduction
    and compared with the labels (an e-mail as ``user.at.domain``; the subject and preferred
    user name against the whole address or its local part)."""
    address = email.strip().lower()
    if creator.email and dns_friendly(address.replace("@", ".at.", 1)) == creator.email.lower():
        return True
    local = address.partition("@")[0]
    names = {dns_friendly(address), dns_friendly(local)} - {""}
    return any(value and value.lower() in names for value in (creator.subject, creator.preferred_username))


# --- the Workflow ---------------------------------------------------------------------------------


def parse_off_loop(obj: JsonObject) -> bool:
    """Whether parsing this Workflow takes long enough to block an event loop: its node count,
    which a dict knows without a walk."""
    status = obj.get("status")
    nodes = status.get("nodes") if isinstance(status, Mapping) else None
    return isinstance(nodes, Mapping) and len(nodes) > PARSE_ON_LOOP_MAX_NODES


def _node_key(node_id: object) -> str:
    """A node ID as records keep it: any string a cluster user wrote, made storable (cut like any
    indexed value; the pods' node-id annotation is cut the same way, so they still match)."""
    return storable(node_id if isinstance(node_id, str) else str(node_id), INDEXED_MAX_BYTES)


def _kept(members: list[str]) -> tuple[list[str], int]:
    """The first and the last ATTEMPTS_KEPT_EACH_END attempts (in the controller's order, which is
    the order it created them in), and how many lie between."""
    if len(members) <= 2 * ATTEMPTS_KEPT_EACH_END:
        return members, 0
    kept = members[:ATTEMPTS_KEPT_EACH_END] + members[-ATTEMPTS_KEPT_EACH_END:]
    return kept, len(members) - len(kept)


def _template(node: JsonObject) -> str | None:
    return indexed_text(node, "templateName") or indexed_text(mapping(node, "templateRef"), "template")


def _attempt(node_id: str, node: JsonObject, workflow: str, version: str) -> AttemptRecord:
    name = text(node, "name") or node_id
    outputs = mapping(node, "outputs")
    return AttemptRecord(
        key=_node_key(node_id),
        phase=indexed_text(node, "phase") or "Pending",
        started_at=timestamp(node, "startedAt"),
        finished_at=timestamp(node, "finishedAt"),
        exit_code=integer(outputs, "exitCode"),
        message=text(node, "message", INDEXED_MAX_BYTES),
        pod_name=storable(
            argo_pod_name(workflow, name, _template(node), node_id, version), INDEXED_MAX_BYTES
        ),
    )


def _steps(nodes: JsonObject, workflow: str, version: str) -> tuple[list[StepRecord], int]:
    """The workflow's steps (Pod nodes, with the attempts of a Retry node gathered into one step)."""
    typed = {node_id: node for node_id, node in nodes.items() if isinstance(node, Mapping)}
    retry_of: dict[str, str] = {}
    order: dict[str, int] = {}
    for node_id, node in typed.items():
        if node.get("type") == "Retry":
            children = node.get("children")
            for n, child in enumerate(children if isinstance(children, list) else ()):
                if isinstance(child, str):
                    retry_of[child] = node_id
                    order[child] = n
    groups: dict[str, list[str]] = {}
    for node_id, node in typed.items():
        if node.get("type") == "Pod":
            groups.setdefault(retry_of.get(node_id, node_id), []).append(str(node_id))
    steps: list[StepRecord] = []
    for group_id, members in groups.items():
        if len(steps) >= STEPS_KEPT:
            break
        members.sort(key=lambda m: order.get(m, 0))
        kept, dropped = _kept(members)
        attempts = sorted(
            (_attempt(m, typed[m], workflow, version) for m in kept),
            key=lambda a: (a.started_at is None, a.started_at.timestamp() if a.started_at else 0.0, a.key),
        )
        head = typed[group_id]
        steps.append(
            StepRecord(
                name=indexed_text(head, "displayName") or indexed_text(head, "name") or _node_key(group_id),
                phase=indexed_text(head, "phase") or attempts[-1].phase,
                template=_template(head) or _template(typed[members[0]]),
                attempts=tuple(attempts),
                attempts_dropped=dropped,
            )
        )
    steps.sort(
        key=lambda s: (s.started_at is None, s.started_at.timestamp() if s.started_at else 0.0, s.name)
    )
    return steps, max(0, len(groups) - len(steps))


def parse_workflow(obj: JsonObject, cfg: ParseConfig, notes: list[SetAside] | None = None) -> WorkflowRecord:
    """The workflow's record; values refused but not fatal (an owner that is not one address) go to
    ``notes``."""
    metadata = mapping(obj, "metadata")
    status = mapping(obj, "status")
    uid, namespace, name = required_identity(metadata, "Workflow")
    words = read_words(metadata, namespace, cfg, notes)
    intent, labels = words.intent, words.labels
    phase = indexed_text(status, "phase") or labels.get(PHASE_LABEL) or "Pending"
    job_status = _STATUS.get(phase, JobStatus.PENDING)
    version = "v1" if words.annotations.get(POD_NAME_FORMAT_KEY) == "v1" else "v2"
    steps, dropped = _steps(mapping(status, "nodes"), name, version)
    return WorkflowRecord(
        cluster=cfg.cluster,
        uid=uid,
        kind=WorkflowKind.ARGO,
        namespace=namespace,
        name=name,
        status=job_status,
        reason=text(status, "message", INDEXED_MAX_BYTES) if job_status is JobStatus.FAILED else None,
        owner=intent.owner,
        team=intent.team,
        notify=intent.notify,
        channels=intent.channels,
        created_at=timestamp(metadata, "creationTimestamp"),
        started_at=timestamp(status, "startedAt"),
        finished_at=timestamp(status, "finishedAt") if job_status.is_terminal else None,
        steps=tuple(steps),
        steps_dropped=dropped,
        links=mlflow_links(words.layers, cfg.mlflow_url),
        resource_version=indexed_text(metadata, "resourceVersion"),
        creator=workflow_creator(labels),
    )


# --- the pods of its steps ------------------------------------------------------------------------


def _workflow_owner_uid(metadata: JsonObject) -> str | None:
    for ref in objects(metadata, "ownerReferences"):
        api_version = ref.get("apiVersion", "")
        argo = isinstance(api_version, str) and api_version.startswith("argoproj.io/")
        if ref.get("kind") == "Workflow" and argo:
            return key(ref, "uid")
    return None


def parse_argo_pod(
    obj: JsonObject, cfg: ParseConfig, notes: list[SetAside] | None = None, pod: PodRecord | None = None
) -> WorkflowPod | None:
    """The step pod of an Argo Workflow (labelled with it and owned by it), else None."""
    metadata = mapping(obj, "metadata")
    labels = string_map(metadata, "labels")
    workflow = labels.get(ARGO_WORKFLOW_LABEL)
    workflow_uid = _workflow_owner_uid(metadata)
    if not workflow or workflow_uid is None:
        return None
    if pod is None:
        pod = parse_pod(obj, cfg, notes)
    annotations = mapping(metadata, "annotations")
    node_name = text(annotations, NODE_NAME_KEY) or ""
    node_id = indexed_text(annotations, NODE_ID_KEY) or (
        argo_node_id(workflow, node_name) if node_name else None
    )
    if node_id is None:
        return None
    return step_pod(
        pod,
        cfg.cluster,
        WorkflowKind.ARGO,
        workflow_uid=workflow_uid,
        workflow_name=storable(workflow, INDEXED_MAX_BYTES),
        step_key=node_id,
        step=storable(node_name, INDEXED_MAX_BYTES) or node_id,
    )
