"""Interactive workspace pods (Coder, JupyterHub, …) tracked as one-pod workloads for the live check.

A workspace is a long-running GPU pod without a Job: a Coder workspace (a Deployment's pod) or a
JupyterHub single-user server (a pod KubeSpawner creates directly). Such pods hold GPUs for days,
so the live check watches them; they are the pods matched by one of ``live.workspace_selectors``
(:mod:`.selectors`). They are recorded as ``WorkloadKind.WORKSPACE`` (uid = the pod's uid); when one
ends it is measured like any workload (the weekly digest counts its GPU-hours) but routing sends no
summary: a workspace's end is a person stopping it, and what matters is the nudge while it idles.

The owner comes from the platform's own keys (docs/nudges.md lists them with their sources):

- Coder: the annotation ``com.coder.user.email`` where a template puts it on the pod (Coder's
  Kubernetes template sets it on the Deployment and the PVC only), else the label
  ``com.coder.user.username``;
- JupyterHub (KubeSpawner): the annotation ``hub.jupyter.org/username`` (the raw name), else the
  label of the same key (escaped by KubeSpawner where the name is no valid label value).

A platform user name is mapped through the directory (``ParseConfig.user_aliases``: a user's
e-mail, or the local part of it where only one user has that local part); a name that is itself
one e-mail address is taken as is. Failing both, the pod's ``inno-notify/owner`` (the configured
owner keys) decides, as for any pod. Every value read is hostile until parsed (see
:mod:`.annotations` and :mod:`.storable`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from ..model import JobRecord, PodRecord, WorkloadKind
from .annotations import Layers, lookup, one_address, read_intent
from .config import ParseConfig
from .fields import JsonObject, SetAside, mapping, string_map
from .pod_workload import pod_status, pod_workload_record
from .storable import INDEXED_MAX_BYTES, storable

__all__ = [
    "CODER",
    "CODER_EMAIL_KEY",
    "CODER_USERNAME_KEY",
    "CODER_WORKSPACE_ID_KEY",
    "CODER_WORKSPACE_NAME_KEY",
    "JUPYTERHUB",
    "JUPYTERHUB_COMPONENT",
    "JUPYTERHUB_SERVERNAME_KEY",
    "JUPYTERHUB_USERNAME_KEY",
    "WORKSPACE",
    "WorkspaceIdentity",
    "directory_aliases",
    "parse_workspace_pod",
    "resolve_user",
    "workspace_identity",
]

CODER = "coder"
JUPYTERHUB = "jupyterhub"
WORKSPACE = "workspace"

CODER_WORKSPACE_ID_KEY = "com.coder.workspace.id"
CODER_WORKSPACE_NAME_KEY = "com.coder.workspace.name"
CODER_USERNAME_KEY = "com.coder.user.username"
CODER_EMAIL_KEY = "com.coder.user.email"
JUPYTERHUB_USERNAME_KEY = "hub.jupyter.org/username"
JUPYTERHUB_SERVERNAME_KEY = "hub.jupyter.org/servername"
JUPYTERHUB_COMPONENT = ("component", "singleuser-server")


@dataclass(frozen=True, slots=True)
class WorkspaceIdentity:
    """What a workspace pod's labels say about it: the platform, its user name and workspace name."""

    platform: str
    user: str | None = None
    name: str | None = None


def _platform(labels: Mapping[str, str]) -> str:
    if CODER_WORKSPACE_ID_KEY in labels or CODER_WORKSPACE_NAME_KEY in labels:
        return CODER
    key, value = JUPYTERHUB_COMPONENT
    if labels.get(key) == value or JUPYTERHUB_USERNAME_KEY in labels:
        return JUPYTERHUB
    return WORKSPACE


def workspace_identity(labels: Mapping[str, str]) -> WorkspaceIdentity:
    """The platform and names of a workspace from its stored (already storable) labels."""
    platform = _platform(labels)
    layers = (labels,)
    if platform == CODER:
        return WorkspaceIdentity(
            CODER, lookup(layers, (CODER_USERNAME_KEY,)), lookup(layers, (CODER_WORKSPACE_NAME_KEY,))
        )
    if platform == JUPYTERHUB:
        # "" is the default server; a named server has its name here.
        return WorkspaceIdentity(
            JUPYTERHUB,
            lookup(layers, (JUPYTERHUB_USERNAME_KEY,)),
            lookup(layers, (JUPYTERHUB_SERVERNAME_KEY,)),
        )
    return WorkspaceIdentity(WORKSPACE)


def directory_aliases(emails: Iterable[str]) -> dict[str, str]:
    """Lower-case e-mail and unambiguous lower-case local part → the directory's e-mail."""
    aliases: dict[str, str] = {}
    local_parts: dict[str, set[str]] = {}
    for email in emails:
        key = email.strip().lower()
        if not key:
            continue
        aliases[key] = email
        local_parts.setdefault(key.rpartition("@")[0], set()).add(email)
    for local, owners in local_parts.items():
        if local and len(owners) == 1 and local not in aliases:
            aliases[local] = next(iter(owners))
    return aliases


def resolve_user(name: str | None, aliases: Mapping[str, str]) -> str | None:
    """A platform user name as an owner e-mail: through the directory, else the name itself when it
    is one plain e-mail address, else None."""
    if not name:
        return None
    found = aliases.get(name.strip().lower())
    if found is not None:
        return found
    return one_address(name)


def _platform_user(platform: str, layers: Layers) -> str | None:
    annotations, labels = layers
    if platform == CODER:
        return lookup((annotations,), (CODER_EMAIL_KEY,)) or lookup((labels,), (CODER_USERNAME_KEY,))
    if platform == JUPYTERHUB:
        return lookup((annotations, labels), (JUPYTERHUB_USERNAME_KEY,))
    return None


def parse_workspace_pod(
    obj: JsonObject, cfg: ParseConfig, pod: PodRecord, notes: list[SetAside] | None = None
) -> JobRecord | None:
    """The workspace record of a GPU pod that no Job runs and a workspace selector matches, else None."""
    if not cfg.workspace_selectors or pod.job_uid is not None or pod.gpu_equivalents <= 0:
        return None
    metadata = mapping(obj, "metadata")
    labels = string_map(metadata, "labels")
    if not any(selector.matches(labels) for selector in cfg.workspace_selectors):
        return None
    layers = (mapping(metadata, "annotations"), labels)
    platform = _platform(labels)
    intent = read_intent(layers, pod.namespace, cfg, notes)
    owner = resolve_user(_platform_user(platform, layers), cfg.user_aliases) or intent.owner
    # A workspace that ended on its own (its container exited) is over, however it exited.
    status = pod_status(pod)
    return replace(
        pod_workload_record(obj, pod, cfg, WorkloadKind.WORKSPACE, status, intent, labels),
        owner=None if owner is None else storable(owner, INDEXED_MAX_BYTES),
    )
