"""In-memory object store behind the simulated Kubernetes API server.

The watcher we test must meet the same semantics a real API server has, or the tests prove
nothing: one global resourceVersion shared by every resource (etcd's revision), a per-resource
event history that can be compacted so that an old version is answered with 410 Gone, a LIST
that is a consistent snapshot across pages, and label/field selectors that turn an object moving
in or out of a selector into ADDED/DELETED for that watch. This module holds that state and those
rules; the HTTP side lives in kube_api.py.
"""

from __future__ import annotations

import bisect
import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

JsonObj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class ResourceType:
    """One served group/version/resource. Versions of one resource share `storage`."""

    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    storage: str = ""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def storage_key(self) -> str:
        return self.storage or f"{self.group}/{self.plural}"


JOBS = ResourceType("batch", "v1", "jobs", "Job")
PODS = ResourceType("", "v1", "pods", "Pod")
# Namespaces: a Kubeflow profile's namespace names its owner (annotation `owner`).
NAMESPACES = ResourceType("", "v1", "namespaces", "Namespace", namespaced=False)
# Both Event APIs read and write the same objects on a real server, converted on the way out.
CORE_EVENTS = ResourceType("", "v1", "events", "Event", storage="events")
EVENTS_V1 = ResourceType("events.k8s.io", "v1", "events", "Event", storage="events")
WORKLOADS_V1BETA1 = ResourceType("kueue.x-k8s.io", "v1beta1", "workloads", "Workload", storage="workloads")
WORKLOADS_V1BETA2 = ResourceType("kueue.x-k8s.io", "v1beta2", "workloads", "Workload", storage="workloads")
# Kueue's queues: ClusterQueues are cluster-scoped, LocalQueues namespaced; both versions share storage.
CLUSTER_QUEUES = {
    v: ResourceType(
        "kueue.x-k8s.io", v, "clusterqueues", "ClusterQueue", namespaced=False, storage="clusterqueues"
    )
    for v in ("v1beta1", "v1beta2")
}
LOCAL_QUEUES = {
    v: ResourceType("kueue.x-k8s.io", v, "localqueues", "LocalQueue", storage="localqueues")
    for v in ("v1beta1", "v1beta2")
}

ARGO_WORKFLOWS = ResourceType("argoproj.io", "v1alpha1", "workflows", "Workflow")
INFERENCE_SERVICES = ResourceType("serving.kserve.io", "v1beta1", "inferenceservices", "InferenceService")

# Training operators (sim.training plays their lifecycles). Training Operator v1 and mpi-operator
# share the group kubeflow.org (v1 and v2beta1): discovery then lists both versions, preferring v1.
PYTORCH_JOBS = ResourceType("kubeflow.org", "v1", "pytorchjobs", "PyTorchJob")
MPI_JOBS = ResourceType("kubeflow.org", "v2beta1", "mpijobs", "MPIJob")
JOBSETS = ResourceType("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet")
RAY_JOBS = ResourceType("ray.io", "v1", "rayjobs", "RayJob")
RAY_CLUSTERS = ResourceType("ray.io", "v1", "rayclusters", "RayCluster")

BUILTIN_TYPES: tuple[ResourceType, ...] = (JOBS, PODS, NAMESPACES, CORE_EVENTS, EVENTS_V1)
KUEUE_TYPES: dict[str, ResourceType] = {"v1beta1": WORKLOADS_V1BETA1, "v1beta2": WORKLOADS_V1BETA2}
# Custom resources of the projects a cluster may have installed, by the name a test asks for.
CRD_TYPES: dict[str, tuple[ResourceType, ...]] = {
    "argo": (ARGO_WORKFLOWS,),
    "kserve": (INFERENCE_SERVICES,),
    "training-operator": (PYTORCH_JOBS,),
    "mpi-operator": (MPI_JOBS,),
    "jobset": (JOBSETS,),
    "kuberay": (RAY_JOBS, RAY_CLUSTERS),
}
# Every training operator the simulated cluster knows, for `SimKubeServer(crds=...)`.
TRAINING_CRDS: tuple[str, ...] = ("training-operator", "mpi-operator", "jobset", "kuberay")


class Gone(Exception):
    """The requested resourceVersion is older than the compacted history (HTTP 410)."""

    def __init__(self, requested: int, oldest: int) -> None:
        super().__init__(f"too old resource version: {requested} ({oldest})")
        self.requested = requested
        self.oldest = oldest


class Conflict(Exception):
    """An object with that namespace/name already exists (HTTP 409)."""


class NotFound(Exception):
    """No object with that namespace/name (HTTP 404)."""


class InvalidSelector(ValueError):
    """A label or field selector we cannot parse (HTTP 400)."""


# core/v1 Event field -> events.k8s.io/v1 field, as the API server converts between the two.
_EVENT_RENAMES: tuple[tuple[str, str], ...] = (
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("source", "deprecatedSource"),
    ("count", "deprecatedCount"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("reportingComponent", "reportingController"),
)


def convert(obj: JsonObj, to: ResourceType) -> JsonObj:
    """The object as `to`'s version presents it (a shallow copy when anything changes)."""
    if obj.get("apiVersion") == to.api_version:
        return obj
    out = dict(obj)
    out["apiVersion"] = to.api_version
    if to.storage_key == "events":
        pairs = _EVENT_RENAMES if to.group else tuple((b, a) for a, b in _EVENT_RENAMES)
        for old, new in pairs:
            if old in out:
                out[new] = out.pop(old)
    return out


# --- selectors -------------------------------------------------------------------------------

Matcher = Callable[[JsonObj], bool]

_LABEL_KEY = re.compile(r"[\w./-]+")
_SET_REQ = re.compile(r"^\s*([\w./-]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")


def _split_requirements(selector: str) -> list[str]:
    """Split on commas that are not inside a set's parentheses."""
    parts: list[str] = []
    depth, current = 0, ""
    for char in selector:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return [p.strip() for p in parts if p.strip()]


# A parsed requirement: (operator, key or field path, values); operators in, notin, exists, !exists.
_Requirement = tuple[str, str, frozenset[str]]


def _parse_label_requirement(req: str) -> _Requirement:
    set_match = _SET_REQ.match(req)
    if set_match:
        key, op, raw = set_match.groups()
        return op, key, frozenset(v.strip() for v in raw.split(",") if v.strip())
    for op, token in (("notin", "!="), ("in", "==" if "==" in req else "=")):
        if token in req:
            key, value = (s.strip() for s in req.split(token, 1))
            if not _LABEL_KEY.fullmatch(key):
                raise InvalidSelector(f"invalid label key in requirement: {req!r}")
            return op, key, frozenset((value,))
    if req.startswith("!") and _LABEL_KEY.fullmatch(req[1:].strip()):
        return "!exists", req[1:].strip(), frozenset()
    if _LABEL_KEY.fullmatch(req):
        return "exists", req, frozenset()
    raise InvalidSelector(f"unable to parse requirement: {req!r}")


def _holds(requirement: _Requirement, present: bool, value: str | None) -> bool:
    op, _key, values = requirement
    if op == "in":
        return present and value in values
    if op == "notin":
        return not present or value not in values
    return present if op == "exists" else not present


def parse_label_selector(selector: str | None) -> Matcher:
    """Equality- and set-based label selectors, as kubectl and the API server accept them."""
    requirements = [_parse_label_requirement(r) for r in _split_requirements(selector or "")]

    def match(obj: JsonObj) -> bool:
        labels = obj.get("metadata", {}).get("labels") or {}
        return all(_holds(r, r[1] in labels, labels.get(r[1])) for r in requirements)

    return match


def _field_value(obj: JsonObj, path: str) -> str:
    value: Any = obj
    for part in path.split("."):
        if not isinstance(value, dict):
            return ""
        value = value.get(part)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _parse_field_requirement(req: str) -> _Requirement:
    if "!=" in req:
        path, value = (s.strip() for s in req.split("!=", 1))
        return "notin", path, frozenset((value,))
    if "=" in req:
        path, value = (s.strip() for s in req.replace("==", "=").split("=", 1))
        return "in", path, frozenset((value,))
    raise InvalidSelector(f"invalid field selector: {req!r}")


def parse_field_selector(selector: str | None) -> Matcher:
    """`path=value`, `path==value`, `path!=value` over dotted object paths, comma-joined."""
    requirements = [_parse_field_requirement(r) for r in _split_requirements(selector or "")]

    def match(obj: JsonObj) -> bool:
        # A missing field compares as the empty string, as on the API server.
        return all(_holds(r, True, _field_value(obj, r[1])) for r in requirements)

    return match


# --- store -----------------------------------------------------------------------------------


@dataclass(slots=True)
class StoredEvent:
    """One change in a resource's history; `prev` lets a watch compute selector transitions."""

    rv: int
    type: str  # ADDED | MODIFIED | DELETED
    obj: JsonObj
    prev: JsonObj | None
    # Encoded watch lines per apiVersion, so N watchers of one version serialize once.
    encoded: dict[str, bytes] = field(default_factory=dict)


@dataclass(slots=True)
class _History:
    rvs: list[int] = field(default_factory=list)
    events: list[StoredEvent] = field(default_factory=list)


Listener = Callable[[], None]


def _now_utc() -> datetime:
    return datetime.now(UTC)


def _copy(obj: Any) -> Any:
    # A JSON round trip: several times faster than copy.deepcopy, and objects are JSON anyway.
    return orjson.loads(orjson.dumps(obj))


def merge_patch(target: JsonObj, patch: Mapping[str, Any]) -> JsonObj:
    """RFC 7386 JSON merge patch (what `kubectl patch --type merge` sends); None removes a key."""
    out = dict(target)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = merge_patch(out[key], value)
        else:
            out[key] = _copy(value)
    return out


class KubeStore:
    """Objects, their history and the global resourceVersion. Not thread-safe: one event loop."""

    def __init__(self, *, now: Callable[[], datetime] = _now_utc) -> None:
        self._now = now
        # Never "0": a LIST of an empty store must name a version that a WATCH resumes from, and
        # "0" asks a watch for the current state instead (as on a real API server, whose versions
        # are never 0), losing whatever happened between the LIST and the WATCH.
        self.resource_version = 1
        # Every version at or below this one has been dropped from every history.
        self.compacted_rv = 0
        self._objects: dict[str, dict[tuple[str, str], JsonObj]] = {}
        self._history: dict[str, _History] = {}
        self._listeners: dict[str, set[Listener]] = {}

    # writes ----------------------------------------------------------------------------------

    def create(self, rt: ResourceType, obj: Mapping[str, Any]) -> JsonObj:
        new = _copy(dict(obj))
        meta = new.setdefault("metadata", {})
        if "name" not in meta:
            raise ValueError("metadata.name is required")
        if rt.namespaced:
            meta.setdefault("namespace", "default")
        else:
            meta.pop("namespace", None)
        key = self._key(rt, meta.get("namespace"), meta["name"])
        objects = self._objects.setdefault(rt.storage_key, {})
        if key in objects:
            raise Conflict(f'{rt.plural} "{meta["name"]}" already exists')
        new["apiVersion"] = rt.api_version
        new["kind"] = rt.kind
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", self._now().strftime("%Y-%m-%dT%H:%M:%SZ"))
        meta.setdefault("generation", 1)
        return self._commit(rt, key, "ADDED", new, None)

    def update(self, rt: ResourceType, obj: Mapping[str, Any]) -> JsonObj:
        """Replace an object wholesale; uid and creationTimestamp stay the server's."""
        new = _copy(dict(obj))
        meta = new.setdefault("metadata", {})
        key = self._key(rt, meta.get("namespace", "default" if rt.namespaced else None), meta.get("name"))
        old = self._get(rt, key)
        for kept in ("uid", "creationTimestamp", "namespace"):
            if kept in old["metadata"]:
                meta[kept] = old["metadata"][kept]
        new["apiVersion"] = rt.api_version
        new["kind"] = rt.kind
        if new.get("spec") != old.get("spec"):
            meta["generation"] = int(old["metadata"].get("generation", 1)) + 1
        return self._commit(rt, key, "MODIFIED", new, old)

    def patch(self, rt: ResourceType, namespace: str | None, name: str, patch: Mapping[str, Any]) -> JsonObj:
        old = self._get(rt, self._key(rt, namespace, name))
        new = merge_patch(old, patch)
        new["metadata"] = {**new.get("metadata", {}), "uid": old["metadata"]["uid"], "name": name}
        return self.update(rt, new)

    def delete(self, rt: ResourceType, namespace: str | None, name: str) -> JsonObj:
        key = self._key(rt, namespace, name)
        old = self._get(rt, key)
        return self._commit(rt, key, "DELETED", dict(old), old)

    def preload(self, rt: ResourceType, objects: Iterable[JsonObj]) -> int:
        """Puts objects in place as a long-running cluster holds them: each at a version of its
        own, with their history compacted away (a watch from before now gets 410, as after etcd's
        compaction). For building clusters of 100,000s of objects in seconds: the objects are taken
        as they are (no copy, no event, no listener; they must carry metadata.name and uid and must
        not be changed afterwards, though they may share unchanging parts such as a spec). Returns
        how many were loaded."""
        objects_of = self._objects.setdefault(rt.storage_key, {})
        loaded = 0
        for obj in objects:
            meta = obj["metadata"]
            namespace = meta.setdefault("namespace", "default") if rt.namespaced else None
            key = self._key(rt, namespace, meta.get("name"))
            if key in objects_of:
                raise Conflict(f'{rt.plural} "{key[1]}" already exists')
            if not meta.get("uid"):
                raise ValueError("metadata.uid is required")
            self.resource_version += 1
            obj["apiVersion"] = rt.api_version
            obj["kind"] = rt.kind
            meta["resourceVersion"] = str(self.resource_version)
            objects_of[key] = obj
            loaded += 1
        self.compact()
        return loaded

    def _commit(
        self, rt: ResourceType, key: tuple[str, str], kind: str, new: JsonObj, old: JsonObj | None
    ) -> JsonObj:
        self.resource_version += 1
        rv = self.resource_version
        new["metadata"] = {**new["metadata"], "resourceVersion": str(rv)}
        objects = self._objects.setdefault(rt.storage_key, {})
        if kind == "DELETED":
            del objects[key]
        else:
            objects[key] = new
        history = self._history.setdefault(rt.storage_key, _History())
        history.rvs.append(rv)
        history.events.append(StoredEvent(rv, kind, new, old))
        for listener in list(self._listeners.get(rt.storage_key, ())):
            listener()
        return new

    # reads -----------------------------------------------------------------------------------

    def get(self, rt: ResourceType, namespace: str | None, name: str) -> JsonObj:
        return self._get(rt, self._key(rt, namespace, name))

    def snapshot(self, rt: ResourceType, namespace: str | None, match: Matcher) -> tuple[list[JsonObj], int]:
        """Matching objects sorted by namespace/name, and the version they are consistent at."""
        objects = self._objects.get(rt.storage_key, {})
        keys = sorted(objects) if namespace is None else sorted(k for k in objects if k[0] == namespace)
        items = [objects[k] for k in keys if match(objects[k])]
        return items, self.resource_version

    def objects(self, rt: ResourceType) -> list[JsonObj]:
        return list(self._objects.get(rt.storage_key, {}).values())

    def events_after(self, rt: ResourceType, rv: int) -> list[StoredEvent]:
        """History strictly after `rv`; Gone when part of it was compacted away."""
        if rv < self.compacted_rv:
            raise Gone(rv, self.compacted_rv + 1)
        history = self._history.get(rt.storage_key)
        if history is None:
            return []
        start = bisect.bisect_right(history.rvs, rv)
        return history.events[start:]

    def compact(self, rv: int | None = None) -> int:
        """Drop history at or below `rv` (default: everything so far), as etcd compaction does."""
        target = self.resource_version if rv is None else min(rv, self.resource_version)
        if target <= self.compacted_rv:
            return self.compacted_rv
        for history in self._history.values():
            cut = bisect.bisect_right(history.rvs, target)
            del history.rvs[:cut]
            del history.events[:cut]
        self.compacted_rv = target
        return target

    # change notification ---------------------------------------------------------------------

    def subscribe(self, rt: ResourceType, listener: Listener) -> None:
        self._listeners.setdefault(rt.storage_key, set()).add(listener)

    def unsubscribe(self, rt: ResourceType, listener: Listener) -> None:
        self._listeners.get(rt.storage_key, set()).discard(listener)

    # helpers ---------------------------------------------------------------------------------

    @staticmethod
    def _key(rt: ResourceType, namespace: str | None, name: Any) -> tuple[str, str]:
        if not isinstance(name, str) or not name:
            raise ValueError("metadata.name is required")
        return ((namespace or "") if rt.namespaced else "", name)

    def _get(self, rt: ResourceType, key: tuple[str, str]) -> JsonObj:
        try:
            return self._objects.get(rt.storage_key, {})[key]
        except KeyError:
            raise NotFound(f'{rt.plural} "{key[1]}" not found') from None


def watch_transition(event: StoredEvent, match: Matcher) -> str | None:
    """The event type a selector-filtered watch sees, or None when it sees nothing."""
    now_in = event.type != "DELETED" and match(event.obj)
    was_in = event.prev is not None and match(event.prev)
    if event.type == "DELETED":
        return "DELETED" if was_in else None
    if now_in and was_in:
        return "MODIFIED"
    if now_in:
        return "ADDED"
    if was_in:
        return "DELETED"
    return None


def in_namespace(obj: JsonObj, namespace: str | None) -> bool:
    return namespace is None or obj.get("metadata", {}).get("namespace") == namespace


def kueue_types(version: str) -> tuple[ResourceType, ...]:
    """What an installed Kueue of that API version serves: Workloads and the two queue kinds."""
    return (KUEUE_TYPES[version], CLUSTER_QUEUES[version], LOCAL_QUEUES[version])


def all_types(kueue_versions: Iterable[str]) -> list[ResourceType]:
    return [*BUILTIN_TYPES, *(rt for v in kueue_versions for rt in kueue_types(v))]
