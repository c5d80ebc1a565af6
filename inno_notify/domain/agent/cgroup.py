"""The pod and container a host process runs in, read from the lines of its ``/proc/PID/cgroup``.

NVML names the processes on a GPU by host PID; the kubelet puts every container in a cgroup
whose path carries the pod's UID and the container's ID. Two cgroup drivers, two layouts:

- systemd: ``/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_with_underscores>.slice/
  cri-containerd-<id>.scope`` (guaranteed pods: ``kubepods-pod<uid>.slice``; the runtime prefix is
  ``cri-containerd-``, ``crio-`` or ``docker-``; crun may add a ``/container`` level below);
- cgroupfs: ``/kubepods/burstable/pod<uid>/<id>`` (guaranteed pods: ``/kubepods/pod<uid>/<id>``).

cgroup v1 writes one line per hierarchy (``4:memory:/kubepods/…``), v2 a single ``0::/…`` line.
A reader in its own cgroup namespace (the default for containers on v2) sees paths relative to its
own cgroup, e.g. ``0::/../../kubepods-besteffort-pod<uid>.slice/…``, so the path is searched by
component, not matched from the root. Static pods have a 32-hex UID without dashes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A pod's cgroup: `pod<uid>` (cgroupfs) or `…-pod<uid_with_underscores>.slice` (systemd).
_POD_COMPONENT = re.compile(r"^(?:[a-z0-9_-]*-)?pod([0-9a-fA-F_-]{32,36})(?:\.slice)?$")
_UID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32}")
# A container's cgroup below its pod's: `<runtime>-<id>.scope` (systemd) or `<id>` (cgroupfs).
# CRI-O's `crio-conmon-<id>.scope` is its monitor process, not the container: it does not match.
_CONTAINER_COMPONENT = re.compile(
    r"^(?:(?:cri-containerd|crio|docker|containerd)-)?([0-9a-f]{64})(?:\.scope)?$"
)
# /proc/PID/cgroup has one line per hierarchy (about a dozen on v1); anything far beyond is not it.
MAX_LINES = 256
MAX_LINE_CHARS = 4096


@dataclass(frozen=True, slots=True)
class CgroupRef:
    """Where a process runs: its pod's UID (dashed, lower case) and, when known, its container's ID
    (the 64 hex digits the runtime uses, as in ``containerStatuses[].containerID`` after the
    ``containerd://`` scheme)."""

    pod_uid: str
    container_id: str | None = None


def parse_cgroup(text: str) -> CgroupRef | None:
    """The pod (and container) of a process from its cgroup file's text; None when it runs in no pod.

    Every line is tried; a line that names the container as well as the pod wins over one that names
    only the pod (v1 hierarchies such as ``name=systemd`` may stop at a parent).
    """
    best: CgroupRef | None = None
    for number, line in enumerate(text.splitlines()):
        if number >= MAX_LINES:
            break
        parts = line[:MAX_LINE_CHARS].split(":", 2)
        if len(parts) != 3:
            continue
        ref = parse_cgroup_path(parts[2])
        if ref is None:
            continue
        if ref.container_id is not None:
            return ref
        if best is None:
            best = ref
    return best


def parse_cgroup_path(path: str) -> CgroupRef | None:
    """The pod (and container) named by one cgroup path; None when no component names a pod."""
    components = [c for c in path.strip().split("/") if c]
    for position, component in enumerate(components):
        match = _POD_COMPONENT.match(component)
        if match is None:
            continue
        uid = match.group(1).replace("_", "-").lower()
        if not _UID.fullmatch(uid):
            continue
        container = None
        if position + 1 < len(components):
            found = _CONTAINER_COMPONENT.match(components[position + 1])
            container = found.group(1) if found else None
        return CgroupRef(pod_uid=uid, container_id=container)
    return None
