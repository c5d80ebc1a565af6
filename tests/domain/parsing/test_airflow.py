"""Airflow KubernetesPodOperator pods: the real pod parses into a task of its DAG run, label values
are matched by applying Airflow's own make_safe_label_value (to every recorded case), and pods that
are no KPO tasks are left alone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from inno_notify.domain.model import NotifyMode
from inno_notify.domain.parsing import ParseConfig
from inno_notify.domain.parsing.airflow import (
    RAW_RUN_ID_KEY,
    make_safe_label_value,
    parse_airflow_pod,
    run_id_shown,
)
from inno_notify.domain.workflows import WorkflowKind, airflow_run_uid

from ._load import utc

CFG = ParseConfig(cluster="lab", namespace_teams={"airflow": "data"})


def capture(captures: Path, name: str) -> dict[str, Any]:
    with (captures / "airflow" / name).open() as f:
        data: dict[str, Any] = json.load(f)
    return data


def test_every_airflow_capture_is_covered(captures: Path) -> None:
    assert {p.name for p in (captures / "airflow").glob("*.json")} == {
        "kpo-label-sanitization-cases.json",
        "kpo-pod-running-airflow-2.9.3.json",
    }


def test_make_safe_label_value_gives_every_recorded_label(captures: Path) -> None:
    cases = capture(captures, "kpo-label-sanitization-cases.json")["cases"]
    assert len(cases) == 6
    for case in cases:
        assert make_safe_label_value(case["input"]) == case["label"], case["input"]


def test_a_lone_surrogate_in_a_run_id_is_hashed_not_raised() -> None:
    """A hostile run id (a JSON "\\ud800" escape decodes to a lone surrogate) gets a label, as any other
    value with characters a label may not hold."""
    assert make_safe_label_value("\ud800").startswith("-")


def test_the_running_kpo_pod_is_a_task_of_its_run(captures: Path) -> None:
    pod = parse_airflow_pod(capture(captures, "kpo-pod-running-airflow-2.9.3.json"), CFG)
    assert pod is not None
    assert (pod.kind, pod.uid, pod.name, pod.namespace) == (
        WorkflowKind.AIRFLOW,
        "32e164c4-8529-4bf1-8d0f-560d23789d8c",
        "model-deploy-jftwximu",
        "airflow",
    )
    run_label = "manual__2025-04-23T061957.1290120000-b70705113"
    assert (pod.workflow_name, pod.run_id, pod.step, pod.attempt) == (
        "modeL_deploy-0416083718",
        run_label,
        "model_deploy",
        1,
    )
    assert pod.workflow_uid == airflow_run_uid("airflow", "modeL_deploy-0416083718", run_label)
    assert (pod.phase, pod.started_at, pod.ended_at, pod.exit_code) == (
        "Running",
        utc("2025-04-23T06:20:10"),
        None,
        None,
    )
    assert (pod.gpus, pod.owner, pod.team, pod.notify) == (0.0, None, "data", NotifyMode.ALWAYS)


def test_the_raw_run_id_is_shown_only_when_it_gives_the_label_back(captures: Path) -> None:
    label = "manual__2025-04-23T061957.1290120000-b70705113"
    raw = "manual__2025-04-23T06:19:57.129012+00:00"
    assert run_id_shown(label, raw) == raw
    assert run_id_shown(label, "manual__2025-01-01T00:00:00+00:00") == label
    assert run_id_shown(label, None) == label
    obj = capture(captures, "kpo-pod-running-airflow-2.9.3.json")
    obj["metadata"]["annotations"] = {RAW_RUN_ID_KEY: raw, "inno-notify/owner": "dana@example.com"}
    pod = parse_airflow_pod(obj, CFG)
    assert pod is not None and (pod.run_id, pod.owner) == (raw, "dana@example.com")
    # The run's key stays the label: the same run whether or not the annotation is there.
    assert pod.workflow_uid == airflow_run_uid("airflow", "modeL_deploy-0416083718", label)


def test_a_mapped_task_and_a_retry(captures: Path) -> None:
    obj = capture(captures, "kpo-pod-running-airflow-2.9.3.json")
    obj["metadata"]["labels"].update({"map_index": "3", "try_number": "2"})
    pod = parse_airflow_pod(obj, CFG)
    assert pod is not None and (pod.step, pod.step_key, pod.attempt) == (
        "model_deploy[3]",
        "model_deploy[3]",
        2,
    )


@pytest.mark.parametrize(
    "change",
    [
        {"kubernetes_pod_operator": None},
        {"kubernetes_pod_operator": "False"},
        {"run_id": None},
        {"kubernetes_pod_operator": None, "kubernetes_executor": "True"},
    ],
)
def test_pods_that_are_no_kpo_tasks(captures: Path, change: dict[str, str | None]) -> None:
    obj = capture(captures, "kpo-pod-running-airflow-2.9.3.json")
    labels = obj["metadata"]["labels"]
    for key, value in change.items():
        if value is None:
            labels.pop(key, None)
        else:
            labels[key] = value
    assert parse_airflow_pod(obj, CFG) is None
