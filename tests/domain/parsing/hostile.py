"""Kubernetes-shaped objects with arbitrary values at any field, for the property tests.

An object is a real-looking Job, Pod (of a Job, or a bare GPU pod with an owner), Event or Kueue
Workload from ./objects, with a few of its fields (any of them, the ones users write more often)
replaced by hostile values: wrong types, huge and empty strings, NUL, other scripts' digits, numbers
past every column type, times out of range, deep nesting. `assert_storable` checks what parsing
accepted: every string without NUL and within its cap, every number within its column's range.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from inno_notify.domain.model import JobRecord, PodRecord
from inno_notify.domain.parsing.storable import (
    INDEXED_MAX_BYTES,
    INT32_MAX,
    INT32_MIN,
    KEY_MAX_BYTES,
    QUANTITY_MAX,
    TEXT_MAX_BYTES,
)
from tests.domain.parsing._load import load

CAPTURES = Path(__file__).resolve().parents[2] / "fixtures"

Path_ = tuple[str | int, ...]
# Makes a fresh copy of one real object (the tests change it in place).
Template = Callable[[], dict[str, Any]]

OWNER = "inno-notify/owner"
INDEX = "batch.kubernetes.io/job-completion-index"


def _event() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "count": 3,
        "series": {"count": 3},
        "involvedObject": {"kind": "Pod", "uid": "a1b2c3d4-0003-4e5f-8a9b-0c1d2e3f4a5b", "name": "p"},
        "metadata": {
            "name": "p.187c6",
            "namespace": "data-eng",
            "uid": "0f1e2d3c-4b5a-4978-8796-a5b4c3d2e1f0",
        },
        "reason": "Evicted",
        "message": "The node was low on resource: memory.",
    }


def _bare_gpu_pod() -> dict[str, Any]:
    pod = load("pod-airflow-kpo.json")
    pod["metadata"].setdefault("annotations", {})[OWNER] = "alice@example.com"
    return pod


def _job() -> dict[str, Any]:
    job = load("job-kueue-2-preempted.json")
    meta = job["metadata"]
    meta.setdefault("annotations", {}).update(
        {OWNER: "alice@example.com", "inno-notify/team": "face", "inno-notify/group": "sweep-1"}
    )
    return job


def _capture(path: str) -> Template:
    def read() -> dict[str, Any]:
        data: dict[str, Any] = json.loads((CAPTURES / path).read_text())
        return data

    return read


def _airflow_pod() -> dict[str, Any]:
    pod: dict[str, Any] = json.loads((CAPTURES / "airflow/kpo-pod-running-airflow-2.9.3.json").read_text())
    pod["metadata"]["annotations"] = {OWNER: "alice@example.com", "inno-notify/airflow-run-id": "manual__x"}
    pod["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
    return pod


def _workspace() -> dict[str, Any]:
    """A GPU pod that the default workspace selectors match (JupyterHub's and Coder's keys on it)."""
    pod = load("pod-notebook-statefulset.json")
    meta = pod["metadata"]
    meta["labels"].update(
        {
            "component": "singleuser-server",
            "hub.jupyter.org/username": "alice",
            "hub.jupyter.org/servername": "",
            "com.coder.user.username": "alice",
        }
    )
    meta["annotations"].update(
        {"hub.jupyter.org/username": "alice", "com.coder.user.email": "alice@example.com"}
    )
    return pod


TEMPLATES: dict[str, Template] = {
    "Job": _job,
    "Pod": lambda: load("pod-indexed-3.json"),
    "BarePod": _bare_gpu_pod,
    "Workspace": _workspace,
    "Event": _event,
    "Workload": lambda: load("workload-kueue-readmitted.json"),
    "ArgoPod": lambda: load("pod-argo-step-failed.json"),
    "AirflowPod": _airflow_pod,
}
# Objects only the workflow tracker reads (the ingestion pipeline ignores these kinds).
CRD_TEMPLATES: dict[str, Template] = {
    "Workflow": _capture("argo/workflow-failed-exit-handlers.json"),
    "InferenceService": _capture("kserve/inferenceservice-kfserving-0.5-canary-patch-response.json"),
}
KIND_OF = {
    "Job": "Job",
    "Pod": "Pod",
    "BarePod": "Pod",
    "Workspace": "Pod",
    "Event": "Event",
    "Workload": "Workload",
    "ArgoPod": "Pod",
    "AirflowPod": "Pod",
    "Workflow": "Workflow",
    "InferenceService": "InferenceService",
}

# Fields users write themselves, or that broke something once: drawn more often than the rest.
HOT_PATHS: dict[str, list[Path_]] = {
    "Job": [
        ("metadata", "annotations", OWNER),
        ("metadata", "annotations", "inno-notify/team"),
        ("metadata", "annotations", "inno-notify/group"),
        ("metadata", "annotations", "inno-notify/family"),
        ("metadata", "annotations", "inno-notify/channels"),
        ("metadata", "labels", "kueue.x-k8s.io/queue-name"),
        ("metadata", "name"),
        ("metadata", "uid"),
        ("spec", "parallelism"),
        ("spec", "completions"),
        ("status", "conditions"),
        ("status", "startTime"),
    ],
    "Pod": [
        ("metadata", "annotations", INDEX),
        ("metadata", "labels", INDEX),
        ("metadata", "labels", "batch.kubernetes.io/controller-uid"),
        ("status", "containerStatuses"),
        ("spec", "containers", 0, "resources", "limits", "memory"),
        ("spec", "nodeName"),
    ],
    "BarePod": [
        ("metadata", "annotations", OWNER),
        ("metadata", "labels", "dag_id"),
        ("spec", "containers", 0, "resources", "limits", "nvidia.com/gpu"),
        ("status", "phase"),
    ],
    "Workspace": [
        ("metadata", "annotations", "hub.jupyter.org/username"),
        ("metadata", "annotations", "com.coder.user.email"),
        ("metadata", "labels", "hub.jupyter.org/username"),
        ("metadata", "labels", "hub.jupyter.org/servername"),
        ("metadata", "labels", "com.coder.user.username"),
        ("metadata", "labels", "component"),
        ("metadata", "labels"),
        ("metadata", "ownerReferences"),
    ],
    "Event": [("reason",), ("count",), ("series",), ("involvedObject", "uid"), ("involvedObject",)],
    "Workload": [
        ("metadata", "labels", "kueue.x-k8s.io/job-uid"),
        ("status", "schedulingStats"),
        ("status", "conditions"),
        ("spec", "queueName"),
    ],
    "Workflow": [
        ("metadata", "annotations", OWNER),
        ("metadata", "annotations", "workflows.argoproj.io/pod-name-format"),
        ("metadata", "labels", "workflows.argoproj.io/creator-email"),
        ("status", "nodes"),
        ("status", "nodes", "exit-handlers-n7s4n", "outputs", "exitCode"),
        ("status", "nodes", "exit-handlers-n7s4n", "name"),
        ("status", "nodes", "exit-handlers-n7s4n-975057257", "children"),
        ("status", "phase"),
        ("status", "finishedAt"),
    ],
    "ArgoPod": [
        ("metadata", "annotations", "workflows.argoproj.io/node-id"),
        ("metadata", "annotations", "workflows.argoproj.io/node-name"),
        ("metadata", "labels", "workflows.argoproj.io/workflow"),
        ("metadata", "ownerReferences"),
        ("metadata", "ownerReferences", 0, "uid"),
    ],
    "AirflowPod": [
        ("metadata", "labels", "dag_id"),
        ("metadata", "labels", "run_id"),
        ("metadata", "labels", "try_number"),
        ("metadata", "labels", "map_index"),
        ("metadata", "annotations", "inno-notify/airflow-run-id"),
        ("metadata", "annotations", OWNER),
    ],
    "InferenceService": [
        ("metadata", "annotations", OWNER),
        ("metadata", "annotations", "inno-notify/trained-by"),
        ("metadata", "annotations", "inno-notify/mlflow-run-url"),
        ("spec", "predictor"),
        ("spec", "predictor", "tensorflow", "resources", "limits", "cpu"),
        ("status", "conditions"),
        ("status", "url"),
        ("status", "components", "predictor", "latestReadyRevision"),
    ],
}

SPECIAL_TEXT = [
    "",
    " ",
    "\x00",
    "a\x00b",
    "²",
    "٣",
    "१२",
    "１２",
    "𝟗",
    "9" * 40,
    "1" * 5000,
    "-1",
    "+7",
    "1_000",
    "attacker@evil.example,victim@corp.example",
    "Alice <alice@example.com>",
    "alice@example.com",
    "True",
    "2026-13-45T99:99:99Z",
    "0001-01-01T00:00:00+05:00",
    "9999-12-31T23:59:59-05:00",
    "1e400",
    "8Ei",
    "NaN",
    "\ud800",
]
SPECIAL_INTS = [2**31, -(2**31) - 1, 2**63, -(2**63), 10**30]


def _nest(depth: int) -> Any:
    value: Any = "bottom"
    for level in range(depth):
        value = {"n": value} if level % 2 else [value]
    return value


hostile_text = st.one_of(
    st.text(max_size=12),
    st.sampled_from(SPECIAL_TEXT),
    st.builds(
        lambda piece, n: piece * n,
        st.sampled_from(["x", "é", "日本", "\x00", "𝟗", "a,b@c", "\U0001f600"]),
        st.integers(300, 3000),
    ),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from(SPECIAL_INTS),
    # Past Python's 4,300-digit limit for int <-> str (built here: not even repr() works on it).
    st.integers(4400, 5000).map(lambda digits: 10**digits),
    st.floats(),
    hostile_text,
)
values = st.one_of(
    st.recursive(
        scalars,
        lambda children: (
            st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
        ),
        max_leaves=6,
    ),
    st.integers(200, 2500).map(_nest),
)


def _paths(obj: Any, prefix: Path_ = ()) -> Iterator[Path_]:
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield (*prefix, key)
            yield from _paths(value, (*prefix, key))
    elif isinstance(obj, list):
        for index, value in enumerate(obj):
            yield (*prefix, index)
            yield from _paths(value, (*prefix, index))


def _put(obj: Any, path: Path_, value: Any) -> None:
    """Sets the value at path, creating missing dicts; a path through a non-container is skipped."""
    target = obj
    for step in path[:-1]:
        if isinstance(target, dict):
            target = target.setdefault(step, {}) if isinstance(step, str) else None
        elif isinstance(target, list) and isinstance(step, int) and step < len(target):
            target = target[step]
        else:
            return
        if target is None:
            return
    last = path[-1]
    settable_dict = isinstance(target, dict) and isinstance(last, str)
    settable_list = isinstance(target, list) and isinstance(last, int) and last < len(target)
    if settable_dict or settable_list:
        target[last] = value


@st.composite
def hostile_object(draw: st.DrawFn, template: str) -> dict[str, Any]:
    obj = {**TEMPLATES, **CRD_TEMPLATES}[template]()
    all_paths = list(_paths(obj))
    hot = HOT_PATHS[template]
    changes = draw(
        st.lists(
            st.tuples(st.sampled_from(hot) | st.sampled_from(all_paths), values),
            min_size=1,
            max_size=5,
        )
    )
    for path, value in changes:
        _put(obj, path, copy.copy(value))
    return obj


# --- what parsing accepted must fit the database ---------------------------------------------------

_INDEXED_JOB_FIELDS = ("namespace", "name", "owner", "team", "group_key", "family", "exit_reason", "reason")
_INDEXED_POD_FIELDS = ("namespace", "name", "phase", "node", "reason", "resource_version")


def _walk(value: Any, where: str) -> Iterator[tuple[str, Any]]:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield from _walk(getattr(value, f.name), f"{where}.{f.name}")
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _walk(key, f"{where}[key]")
            yield from _walk(item, f"{where}[{key!r:.20}]")
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _walk(item, f"{where}[{index}]")
    else:
        yield where, value


def _fits(text: str, limit: int) -> bool:
    return "\x00" not in text and len(text.encode("utf-8")) <= limit


def assert_storable(record: Any) -> None:
    """Every string without NUL, valid UTF-8, within its cap; every number within its column."""
    for where, value in _walk(record, type(record).__name__):
        if isinstance(value, str):
            assert _fits(value, TEXT_MAX_BYTES), f"{where}: {value[:80]!r}… not storable"
        elif isinstance(value, bool) or value is None:
            continue
        elif isinstance(value, int):
            assert INT32_MIN <= value <= INT32_MAX or (
                where.endswith("_bytes") and 0 <= value <= QUANTITY_MAX
            ), f"{where}: {value} out of range"
        elif isinstance(value, float):
            assert math.isfinite(value), f"{where}: {value}"
    assert _fits(record.uid, KEY_MAX_BYTES)
    if not isinstance(record, JobRecord | PodRecord):
        fields: tuple[str, ...] = ("namespace", "name")
    else:
        fields = _INDEXED_JOB_FIELDS if isinstance(record, JobRecord) else _INDEXED_POD_FIELDS
    for name in fields:
        value = getattr(record, name)
        assert value is None or _fits(value, INDEXED_MAX_BYTES), f"{name}: {len(value.encode())} bytes"
