"""Argo Workflows: real Workflow captures and step pod metadata parse, node IDs and pod names are
computed the controller's way, retries gather into one step, and the creator maps to a directory
address only through Argo's own reduction."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from inno_notify.domain.model import JobStatus
from inno_notify.domain.parsing import ParseConfig
from inno_notify.domain.parsing.argo import (
    argo_node_id,
    argo_pod_name,
    creator_matches,
    dns_friendly,
    fnv1a_32,
    parse_argo_pod,
    parse_off_loop,
    parse_workflow,
)
from inno_notify.domain.parsing.storable import INDEXED_MAX_BYTES
from inno_notify.domain.workflows import ATTEMPTS_KEPT_EACH_END, Creator, WorkflowKind, summarize_workflow
from inno_notify.sim.pipelines import retry_storm_workflow

from ._load import utc

CFG = ParseConfig(cluster="lab", namespace_teams={"argo": "ml"})
T = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)


def capture(captures: Path, name: str) -> dict[str, Any]:
    with (captures / "argo" / name).open() as f:
        data: dict[str, Any] = json.load(f)
    return data


def test_every_argo_capture_is_covered(captures: Path) -> None:
    assert {p.name for p in (captures / "argo").glob("*.json")} == {
        "workflow-succeeded-dag-diamond.json",
        "workflow-failed-exit-handlers.json",
        "step-pod-metadata-upstream-test.json",
        "step-pod-metadata-v1-names-2022-excerpt.json",
    }


def test_fnv1a_matches_go_hash_fnv() -> None:
    # Known FNV-1a 32-bit values: "" is the offset basis, "a" the first step.
    assert (fnv1a_32(""), fnv1a_32("a"), fnv1a_32("foobar")) == (0x811C9DC5, 0xE40C292C, 0xBF9CF968)


@pytest.mark.parametrize(
    "name", ["workflow-succeeded-dag-diamond.json", "workflow-failed-exit-handlers.json"]
)
def test_every_node_id_and_pod_name_is_recomputed(captures: Path, name: str) -> None:
    obj = capture(captures, name)
    workflow = obj["metadata"]["name"]
    for node_id, node in obj["status"]["nodes"].items():
        assert argo_node_id(workflow, node["name"]) == node_id
        if node["type"] != "Pod":
            continue
        pod = argo_pod_name(workflow, node["name"], node.get("templateName"), node_id, "v2")
        for artifact in node.get("outputs", {}).get("artifacts", []):
            # The archived log's key is <workflow>/<pod name>/main.log.
            assert artifact["s3"]["key"].split("/")[1] == pod
        assert argo_pod_name(workflow, node["name"], node.get("templateName"), node_id, "v1") == node_id


def test_succeeded_dag_diamond(captures: Path) -> None:
    record = parse_workflow(capture(captures, "workflow-succeeded-dag-diamond.json"), CFG)
    assert (record.kind, record.uid, record.namespace, record.name) == (
        WorkflowKind.ARGO,
        "dd3d2674-43d8-446a-afdf-17ec95afade2",
        "argo",
        "dag-diamond-82q7s",
    )
    assert (record.status, record.reason, record.team) == (JobStatus.SUCCEEDED, None, "ml")
    assert (record.started_at, record.finished_at) == (utc("2024-10-01T04:27:23"), utc("2024-10-01T04:27:42"))
    assert record.duration_seconds == 19
    assert [(s.name, s.phase, s.template, len(s.attempts)) for s in record.steps] == [
        ("A", "Succeeded", "echo", 1),
        ("B", "Succeeded", "echo", 1),
        ("C", "Succeeded", "echo", 1),
        ("D", "Succeeded", "echo", 1),
    ]
    d = record.steps[3].attempts[0]
    assert (d.key, d.pod_name, d.exit_code) == (
        "dag-diamond-82q7s-1226654358",
        "dag-diamond-82q7s-echo-1226654358",
        0,
    )
    assert (d.started_at, d.finished_at) == (utc("2024-10-01T04:27:36"), utc("2024-10-01T04:27:39"))


def test_failed_workflow_with_exit_handlers(captures: Path) -> None:
    record = parse_workflow(capture(captures, "workflow-failed-exit-handlers.json"), CFG)
    assert (record.status, record.reason) == (JobStatus.FAILED, "main: Error (exit code 1)")
    steps = {s.name: s for s in record.steps}
    # The root node is a Pod itself; Skipped, Steps and StepGroup nodes run nothing.
    assert list(steps) == ["exit-handlers-n7s4n", "cry", "notify"]
    root = steps["exit-handlers-n7s4n"].attempts[0]
    assert (root.phase, root.exit_code, root.message, root.pod_name) == (
        "Failed",
        1,
        "main: Error (exit code 1)",
        "exit-handlers-n7s4n",
    )
    # An exit handler's pod is named after its template, not its step.
    assert steps["notify"].attempts[0].pod_name == "exit-handlers-n7s4n-send-email-3201878844"


def _retried_workflow() -> dict[str, Any]:
    """A steps workflow whose `evaluate` step failed once and succeeded on its retry."""
    wf = "train-pipeline-x7k2p"

    def node(name: str, display: str, type_: str, phase: str, **extra: Any) -> tuple[str, dict[str, Any]]:
        node_id = argo_node_id(wf, name)
        return node_id, {
            "id": node_id,
            "name": name,
            "displayName": display,
            "type": type_,
            "phase": phase,
            **extra,
        }

    retry_id, retry = node(f"{wf}[1].evaluate", "evaluate", "Retry", "Succeeded", templateName="evaluate")
    first_id, first = node(
        f"{wf}[1].evaluate(0)",
        "evaluate(0)",
        "Pod",
        "Failed",
        templateName="evaluate",
        startedAt="2026-11-30T10:10:00Z",
        finishedAt="2026-11-30T10:12:00Z",
        message="Error (exit code 2)",
        outputs={"exitCode": "2"},
    )
    second_id, second = node(
        f"{wf}[1].evaluate(1)",
        "evaluate(1)",
        "Pod",
        "Succeeded",
        templateName="evaluate",
        startedAt="2026-11-30T10:12:30Z",
        finishedAt="2026-11-30T10:15:00Z",
        outputs={"exitCode": "0"},
    )
    retry["children"] = [first_id, second_id]
    train_id, train = node(
        f"{wf}[0].train",
        "train",
        "Pod",
        "Succeeded",
        templateName="train",
        startedAt="2026-11-30T10:00:00Z",
        finishedAt="2026-11-30T10:09:00Z",
        outputs={"exitCode": "0"},
    )
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {
            "name": wf,
            "namespace": "face-research",
            "uid": "0c0ffee0-0000-4000-8000-000000000001",
            "annotations": {"inno-notify/owner": "alice@example.com"},
            "labels": {
                "workflows.argoproj.io/creator": "system-serviceaccount-argo-argo-server",
                "workflows.argoproj.io/creator-email": "alice.at.example.com",
            },
        },
        "status": {
            "phase": "Succeeded",
            "startedAt": "2026-11-30T10:00:00Z",
            "finishedAt": "2026-11-30T10:15:05Z",
            "nodes": {retry_id: retry, first_id: first, second_id: second, train_id: train},
        },
    }


def test_a_retried_step_is_one_step_with_its_attempts() -> None:
    record = parse_workflow(_retried_workflow(), CFG)
    assert (record.owner, record.team) == ("alice@example.com", None)
    assert record.creator == Creator("system-serviceaccount-argo-argo-server", "alice.at.example.com")
    train, evaluate = record.steps
    assert (train.name, len(train.attempts)) == ("train", 1)
    assert (evaluate.name, evaluate.phase, evaluate.template) == ("evaluate", "Succeeded", "evaluate")
    assert [(a.phase, a.exit_code) for a in evaluate.attempts] == [("Failed", 2), ("Succeeded", 0)]
    assert (evaluate.started_at, evaluate.finished_at) == (
        utc("2026-11-30T10:10:00"),
        utc("2026-11-30T10:15:00"),
    )


def test_a_running_workflow_has_no_end_yet() -> None:
    obj = _retried_workflow()
    obj["status"]["phase"] = "Running"
    record = parse_workflow(obj, CFG)
    assert (record.status, record.finished_at) == (JobStatus.RUNNING, None)


def test_step_pod_metadata_of_both_name_formats(captures: Path) -> None:
    v1 = capture(captures, "step-pod-metadata-v1-names-2022-excerpt.json")
    pod = parse_argo_pod(v1, CFG)
    assert pod is not None
    assert (pod.workflow_uid, pod.workflow_name, pod.step_key) == (
        "e91df2cb-b567-4cf0-9be5-3dd6c72854cd",
        "archive-log-test-jzt8n",
        "archive-log-test-jzt8n-3498199655",
    )
    assert pod.name == pod.step_key  # v1: pod name = node ID
    assert argo_node_id("archive-log-test-jzt8n", pod.step) == pod.step_key
    # The upstream test stub has no owner reference: nothing ties it to a Workflow we know.
    stub = capture(captures, "step-pod-metadata-upstream-test.json")
    assert parse_argo_pod(stub, CFG) is None
    stub["metadata"]["uid"] = "9d0e8f00-0000-4000-8000-000000000002"
    stub["metadata"]["ownerReferences"] = [
        {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow", "name": "retry-test-p7jzr", "uid": "wf-1"}
    ]
    owned = parse_argo_pod(stub, CFG)
    assert owned is not None and owned.step_key == "retry-test-p7jzr-2308805457"
    assert fnv1a_32("retry-test-p7jzr[0].steps-outer-step1") == 2308805457


def test_a_pod_without_the_node_id_annotation_gets_it_computed(captures: Path) -> None:
    obj = capture(captures, "step-pod-metadata-v1-names-2022-excerpt.json")
    del obj["metadata"]["annotations"]["workflows.argoproj.io/node-id"]
    pod = parse_argo_pod(obj, CFG)
    assert pod is not None and pod.step_key == "archive-log-test-jzt8n-3498199655"


@pytest.mark.parametrize(
    ("email", "creator", "matches"),
    [
        ("alice@example.com", Creator(email="alice.at.example.com"), True),
        ("Alice@Example.com", Creator(email="alice.at.example.com"), True),
        ("bob@example.com", Creator(email="alice.at.example.com"), False),
        # The subject or preferred user name, against the address or its local part.
        ("alice@example.com", Creator(subject="alice"), True),
        ("alice@example.com", Creator(preferred_username="alice-example.com"), True),
        ("alice@example.com", Creator(preferred_username="bob"), False),
        ("alice@example.com", Creator(subject="alice-example.com"), True),
        # Another address that reduces to a different value is not the creator.
        ("alice+x@example.com", Creator(email="alice.at.example.com"), False),
        ("eve@example.com", Creator(), False),
    ],
)
def test_creator_matches_by_argos_reduction(email: str, creator: Creator, matches: bool) -> None:
    assert creator_matches(creator, email) is matches


def test_dns_friendly_keeps_the_last_63_label_characters() -> None:
    long = "x" * 70 + "@example.com"
    assert dns_friendly(long) == ("x" * 70 + "-example.com")[-63:]
    assert dns_friendly("-_-bob_-") == "bob"


def test_a_retry_storm_keeps_the_first_and_last_attempts_and_counts_the_rest() -> None:
    """Issue 29: attempts under a Retry node were not capped (95,000 became a 14.8 MB record), and
    node IDs and names went into the record as written."""
    obj = retry_storm_workflow("storm", "face-research", T, attempts=3000, name_chars=10_000)
    assert parse_off_loop(obj)
    record = parse_workflow(obj, CFG)
    [step] = record.steps
    n = ATTEMPTS_KEPT_EACH_END
    assert len(step.attempts) == 2 * n and step.attempts_dropped == 3000 - 2 * n and step.tries == 3000
    assert [a.started_at for a in step.attempts] == [
        T + timedelta(seconds=s) for s in [*range(n), *range(3000 - n, 3000)]
    ]
    for value in [step.name, *(a.key for a in step.attempts), *(a.pod_name or "" for a in step.attempts)]:
        assert len(value.encode()) <= INDEXED_MAX_BYTES
    summary = summarize_workflow(record, [], {})
    assert (summary.steps[0].attempts, summary.steps[0].attempts_dropped) == (3000, 3000 - 2 * n)


def test_a_small_workflow_is_parsed_on_the_loop() -> None:
    assert not parse_off_loop(_retried_workflow())
    assert not parse_off_loop({"status": {"nodes": "not a map"}})
