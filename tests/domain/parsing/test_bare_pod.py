"""GPU pods that no Job owns become one-pod workloads; everything else is left to the Job path."""

from __future__ import annotations

from inno_notify.domain.model import JobStatus, NotifyMode, WorkloadKind
from inno_notify.domain.parsing import ParseConfig, parse_bare_gpu_pod

from ._load import load, load_items, utc

CFG = ParseConfig(cluster="lab", namespace_teams={"airflow-jobs": "nlp", "face-research": "face"})


def test_airflow_kubernetes_pod_operator_pod() -> None:
    record = parse_bare_gpu_pod(load("pod-airflow-kpo.json"), CFG)
    assert record is not None
    assert (record.kind, record.uid, record.name) == (
        WorkloadKind.POD,
        "d3042596-c7e8-4d04-2596-c7e8f30425b3",
        "embed-corpus-q3m7x2ka",
    )
    assert (record.status, record.exit_code, record.exit_reason) == (JobStatus.SUCCEEDED, 0, "Completed")
    assert (record.owner, record.team, record.notify, record.group_key) == (
        "carol@example.com",
        "nlp",
        NotifyMode.ALWAYS,
        None,
    )
    assert record.family == "nightly_embeddings.embed_corpus"
    assert record.created_at == utc("2026-11-30T01:00:12")
    assert record.started_at == utc("2026-11-30T01:00:40")
    assert record.first_scheduled_at == utc("2026-11-30T01:00:40")
    assert record.finished_at == utc("2026-11-30T02:14:50")
    assert (record.requested.gpus, record.requested.cpu_cores, record.requested.memory_bytes) == (
        1.0,
        4.0,
        24 * 2**30,
    )
    assert (record.requested.parallelism, record.requested.completions) == (1, 1)
    assert record.labels["dag_id"] == "nightly_embeddings"


def test_argo_step_pod_groups_by_workflow() -> None:
    record = parse_bare_gpu_pod(load("pod-argo-step-failed.json"), CFG)
    assert record is not None
    assert (record.status, record.exit_code, record.exit_reason) == (JobStatus.FAILED, 1, "Error")
    assert (record.owner, record.team) == ("dave@example.com", "face")
    assert record.group_key == "hpo-resnet-x9k2m"
    assert record.family == "hpo-resnet.train"
    assert record.finished_at == utc("2026-11-30T18:25:13")
    assert record.requested.gpus == 1.0


def test_explicit_group_beats_the_workflow() -> None:
    obj = load("pod-argo-step-failed.json")
    obj["metadata"]["annotations"]["inno-notify/group"] = "hpo-november"
    record = parse_bare_gpu_pod(obj, CFG)
    assert record is not None and record.group_key == "hpo-november"


def test_running_bare_pod_has_no_end_yet() -> None:
    obj = load("pod-airflow-kpo.json")
    obj["status"]["phase"] = "Running"
    obj["status"]["containerStatuses"][0]["state"] = {"running": {"startedAt": "2026-11-30T01:01:33Z"}}
    record = parse_bare_gpu_pod(obj, CFG)
    assert record is not None
    assert (record.status, record.finished_at, record.exit_code) == (JobStatus.RUNNING, None, None)


def test_a_bare_gpu_pod_without_an_owner_is_recorded_without_one() -> None:
    obj = load("pod-airflow-kpo.json")
    del obj["metadata"]["annotations"]
    record = parse_bare_gpu_pod(obj, CFG)
    assert record is not None
    assert (record.owner, record.team, record.status) == (None, "nlp", JobStatus.SUCCEEDED)
    assert record.requested.gpus == 1.0


def test_an_mlflow_annotation_becomes_a_link() -> None:
    obj = load("pod-argo-step-failed.json")
    obj["metadata"]["annotations"]["inno-notify/mlflow-run-id"] = "0f3c2b9a8e7d4c1b9a8e7d4c1b9a8e7d"
    obj["metadata"]["annotations"]["inno-notify/mlflow-experiment-id"] = "12"
    plain = parse_bare_gpu_pod(obj, CFG)
    linked = parse_bare_gpu_pod(obj, ParseConfig(cluster="lab", mlflow_url="https://mlflow.example.org/"))
    assert plain is not None and plain.links == ()
    assert linked is not None
    assert [(link.title, link.url) for link in linked.links] == [
        ("MLflow run", "https://mlflow.example.org/#/experiments/12/runs/0f3c2b9a8e7d4c1b9a8e7d4c1b9a8e7d")
    ]


def test_pods_that_are_not_bare_gpu_workloads() -> None:
    no_gpu = load("pod-airflow-kpo.json")
    no_gpu["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "4"}}
    rejected = {
        "job pod": load_items("pods-train-resnet-succeeded.json")[0],
        "notebook of a StatefulSet": load("pod-notebook-statefulset.json"),
        "no GPU": no_gpu,
    }
    assert {name: parse_bare_gpu_pod(obj, CFG) for name, obj in rejected.items()} == dict.fromkeys(rejected)
