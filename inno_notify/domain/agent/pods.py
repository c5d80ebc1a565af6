"""The names a node agent's series carry for a pod UID: namespace, pod, and container by container ID.

Read from the pod objects of the node (the API server's list/watch or the kubelet's ``/pods``): the
metadata gives the names, ``status.*containerStatuses[].containerID`` (``containerd://<id>``,
``cri-o://<id>``, ``docker://<id>``) ties the IDs found in cgroup paths to container names. A pod
object is as hostile as anything a user writes: a malformed one yields None, never an exception.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

_STATUS_LISTS = ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses")
# Kubernetes names are at most 253 characters; a longer value is not a name.
MAX_NAME_CHARS = 253
MAX_CONTAINERS = 512


@dataclass(frozen=True, slots=True)
class PodIdentity:
    """A pod on the node: its UID, namespace, name, and container names keyed by runtime container ID."""

    uid: str
    namespace: str
    name: str
    containers: Mapping[str, str] = field(default_factory=dict)


def _name(value: Any) -> str | None:
    if not isinstance(value, str) or not value or len(value) > MAX_NAME_CHARS or "\x00" in value:
        return None
    return value


def parse_pod_identity(obj: Any) -> PodIdentity | None:
    """The identity of a pod object, or None when its metadata lacks a UID, namespace or name."""
    if not isinstance(obj, Mapping):
        return None
    metadata = obj.get("metadata")
    if not isinstance(metadata, Mapping):
        return None
    uid, namespace, name = (_name(metadata.get(k)) for k in ("uid", "namespace", "name"))
    if uid is None or namespace is None or name is None:
        return None
    containers: dict[str, str] = {}
    status = obj.get("status")
    if isinstance(status, Mapping):
        for key in _STATUS_LISTS:
            entries = status.get(key)
            if not isinstance(entries, list):
                continue
            for entry in entries[:MAX_CONTAINERS]:
                if not isinstance(entry, Mapping):
                    continue
                container = _name(entry.get("name"))
                raw_id = _name(entry.get("containerID"))
                if container is None or raw_id is None:
                    continue
                # `containerd://<id>`: the cgroup path holds only the id.
                container_id = raw_id.rpartition("://")[2].lower()
                if container_id:
                    containers[container_id] = container
    return PodIdentity(uid=uid.lower(), namespace=namespace, name=name, containers=containers)
