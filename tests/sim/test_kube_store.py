"""The sim store's rules: selectors, selector transitions, conversion, versions and compaction."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from inno_notify.sim.kube_store import (
    CORE_EVENTS,
    EVENTS_V1,
    JOBS,
    PODS,
    Conflict,
    Gone,
    InvalidSelector,
    KubeStore,
    NotFound,
    StoredEvent,
    convert,
    merge_patch,
    parse_field_selector,
    parse_label_selector,
    watch_transition,
)

NOW = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)


def labelled(**labels: str) -> dict[str, Any]:
    return {"metadata": {"name": "x", "labels": labels}}


@pytest.mark.parametrize(
    ("selector", "labels", "matches"),
    [
        ("", {}, True),
        ("app=train", {"app": "train"}, True),
        ("app==train", {"app": "eval"}, False),
        ("app!=train", {}, True),
        ("app!=train", {"app": "train"}, False),
        ("app", {"app": ""}, True),
        ("!app", {"app": "x"}, False),
        ("team in (face, nlp)", {"team": "nlp"}, True),
        ("team notin (face,nlp)", {"team": "face"}, False),
        ("team notin (face,nlp)", {}, True),
        ("app=train,team in (face,nlp)", {"app": "train", "team": "face"}, True),
        ("app=train,team in (face,nlp)", {"app": "train", "team": "cv"}, False),
        ("batch.kubernetes.io/job-name=j1", {"batch.kubernetes.io/job-name": "j1"}, True),
    ],
)
def test_label_selector(selector: str, labels: dict[str, str], matches: bool) -> None:
    assert parse_label_selector(selector)(labelled(**labels)) is matches


@pytest.mark.parametrize(
    ("selector", "obj", "matches"),
    [
        ("metadata.name=x", {"metadata": {"name": "x"}}, True),
        ("metadata.namespace!=kube-system", {"metadata": {"namespace": "ml"}}, True),
        ("status.phase=Running", {"status": {"phase": "Pending"}}, False),
        (
            "involvedObject.kind=Job,type=Warning",
            {"involvedObject": {"kind": "Job"}, "type": "Warning"},
            True,
        ),
        ("spec.nodeName=", {"spec": {}}, True),
        ("spec.suspend=true", {"spec": {"suspend": True}}, True),
    ],
)
def test_field_selector(selector: str, obj: dict[str, Any], matches: bool) -> None:
    assert parse_field_selector(selector)(obj) is matches


@pytest.mark.parametrize("selector", ["a b c", "=x", "!"])
def test_bad_label_selector_is_refused(selector: str) -> None:
    with pytest.raises(InvalidSelector):
        parse_label_selector(selector)


MATCH_A = parse_label_selector("sel=a")


@pytest.mark.parametrize(
    ("event_type", "prev", "new", "seen"),
    [
        ("ADDED", None, "a", "ADDED"),
        ("ADDED", None, "b", None),
        ("MODIFIED", "a", "a", "MODIFIED"),
        ("MODIFIED", "b", "a", "ADDED"),  # moved into the selector
        ("MODIFIED", "a", "b", "DELETED"),  # moved out of it
        ("MODIFIED", "b", "b", None),
        ("DELETED", "a", "a", "DELETED"),
        ("DELETED", "b", "b", None),
    ],
)
def test_selector_transitions(event_type: str, prev: str | None, new: str, seen: str | None) -> None:
    event = StoredEvent(2, event_type, labelled(sel=new), labelled(sel=prev) if prev else None)
    assert watch_transition(event, MATCH_A) == seen


def test_event_versions_convert_both_ways() -> None:
    core = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "e"},
        "involvedObject": {"kind": "Job", "name": "j"},
        "message": "Job has reached the specified backoff limit",
        "reason": "BackoffLimitExceeded",
        "count": 1,
    }
    served = convert(core, EVENTS_V1)
    assert served["apiVersion"] == "events.k8s.io/v1"
    assert served["regarding"] == {"kind": "Job", "name": "j"}
    assert served["note"] == core["message"]
    assert served["deprecatedCount"] == 1
    assert convert(served, CORE_EVENTS) == core


@pytest.mark.parametrize(
    ("target", "patch", "result"),
    [
        ({"a": 1}, {"b": 2}, {"a": 1, "b": 2}),
        ({"a": {"x": 1, "y": 2}}, {"a": {"y": None}}, {"a": {"x": 1}}),
        ({"a": [1, 2]}, {"a": [3]}, {"a": [3]}),
        ({"a": 1}, {"a": {"b": 1}}, {"a": {"b": 1}}),
    ],
)
def test_merge_patch(target: dict[str, Any], patch: dict[str, Any], result: dict[str, Any]) -> None:
    assert merge_patch(target, patch) == result


def test_writes_set_metadata_and_share_one_version_counter() -> None:
    store = KubeStore(now=lambda: NOW)
    job = store.create(JOBS, {"metadata": {"name": "j"}, "spec": {"parallelism": 1}})
    pod = store.create(PODS, {"metadata": {"name": "p", "namespace": "ml"}})
    assert job["metadata"]["namespace"] == "default"
    assert job["metadata"]["creationTimestamp"] == "2026-11-30T10:00:00Z"
    # Versions start above 0 (an API server's never are 0: "0" asks a watch for the current state).
    assert (job["metadata"]["resourceVersion"], pod["metadata"]["resourceVersion"]) == ("2", "3")
    assert (job["apiVersion"], job["kind"]) == ("batch/v1", "Job")
    with pytest.raises(Conflict):
        store.create(JOBS, {"metadata": {"name": "j"}})

    status_only = store.patch(JOBS, "default", "j", {"status": {"active": 1}})
    new_spec = store.patch(JOBS, "default", "j", {"spec": {"parallelism": 2}})
    assert status_only["metadata"]["uid"] == job["metadata"]["uid"]
    assert (status_only["metadata"]["generation"], new_spec["metadata"]["generation"]) == (1, 2)
    gone = store.delete(JOBS, "default", "j")
    assert gone["metadata"]["resourceVersion"] == "6"
    with pytest.raises(NotFound):
        store.get(JOBS, "default", "j")
    assert [e.type for e in store.events_after(JOBS, 0)] == ["ADDED", "MODIFIED", "MODIFIED", "DELETED"]
    assert [e.rv for e in store.events_after(JOBS, 4)] == [5, 6]


def test_compaction_makes_older_versions_gone() -> None:
    store = KubeStore(now=lambda: NOW)
    for i in range(5):
        store.create(JOBS, {"metadata": {"name": f"j{i}"}})
    assert store.compact(4) == 4
    with pytest.raises(Gone) as caught:
        store.events_after(JOBS, 3)
    assert str(caught.value) == "too old resource version: 3 (5)"
    assert [e.rv for e in store.events_after(JOBS, 4)] == [5, 6]
    store.compact()
    assert store.events_after(JOBS, 6) == []


def test_preload_puts_objects_in_place_with_versions_and_compacted_history() -> None:
    store = KubeStore(now=lambda: NOW)
    store.create(JOBS, {"metadata": {"name": "before", "namespace": "ml"}})
    spec = {"containers": [{"name": "main"}]}  # shared by every object, as a bulk loader may
    pods = [{"metadata": {"name": f"p{i}", "namespace": "ml", "uid": f"u{i}"}, "spec": spec} for i in "012"]
    assert store.preload(PODS, pods) == 3
    listed, version = store.snapshot(PODS, None, lambda _: True)
    assert [p["metadata"]["resourceVersion"] for p in listed] == ["3", "4", "5"] and version == 5
    assert listed[0]["kind"] == "Pod" and listed[0]["apiVersion"] == "v1"
    # A preloaded cluster has been running a while: the history before it is gone.
    with pytest.raises(Gone):
        store.events_after(JOBS, 0)
    assert store.events_after(PODS, 5) == []
    # Later writes are ordinary: they have history and bump the global version.
    store.patch(PODS, "ml", "p1", {"status": {"phase": "Running"}})
    assert [e.type for e in store.events_after(PODS, 5)] == ["MODIFIED"]
    with pytest.raises(Conflict):
        store.preload(PODS, [{"metadata": {"name": "p0", "namespace": "ml", "uid": "again"}}])
    with pytest.raises(ValueError, match="uid"):
        store.preload(PODS, [{"metadata": {"name": "no-uid", "namespace": "ml"}}])
