"""Realistic Pod objects parse to hand-checked records: times, containers, reasons, GPU-equivalents."""

from __future__ import annotations

from typing import Any

import pytest

from inno_notify.domain.model import TerminatedState
from inno_notify.domain.parsing import ParseConfig, parse_pod

from ._load import load, load_items, utc

CFG = ParseConfig(cluster="lab", gpu_resources={"nvidia.com/gpu": 1.0, "nvidia.com/mig-1g.10gb": 1 / 7})


def pod(name: str, index: int | None = None) -> dict[str, Any]:
    return load_items(name)[index] if index is not None else load(name)


PODS: list[tuple[str, int | None, dict[str, Any]]] = [
    (
        "pods-train-resnet-succeeded.json",
        0,
        {
            "uid": "5e0c2f4b-8d61-4a9e-b7f3-0c1d2e3f4a51",
            "job_uid": "1b4c5e2a-0f7d-4c1e-9a3b-2d6f8e9a0c11",
            "phase": "Succeeded",
            "node": "gpu-a100-07",
            "reason": None,
            "created_at": utc("2026-11-30T10:00:00"),
            "scheduled_at": utc("2026-11-30T10:00:31"),
            "started_at": utc("2026-11-30T10:00:31"),
            "finished_at": utc("2026-11-30T11:02:03"),
            "deleted_at": None,
            "gpu_equivalents": 2.0,
            "completion_index": None,
            "resource_version": "4817720",
        },
    ),
    (
        "pods-embed-oomkilled.json",
        0,
        {
            "phase": "Failed",
            "finished_at": utc("2026-11-30T08:47:17"),
            "scheduled_at": utc("2026-11-30T08:00:04"),
        },
    ),
    (
        "pods-eval-deadline.json",  # the Job controller marks the pod it kills at the deadline
        0,
        {"reason": "DeadlineExceeded", "finished_at": utc("2026-11-30T13:00:30")},
    ),
    ("pod-indexed-3.json", None, {"completion_index": 3, "gpu_equivalents": 0.0, "node": "cpu-node-11"}),
    (
        "pod-mig-running.json",
        None,
        {"phase": "Running", "finished_at": None, "gpu_equivalents": pytest.approx(1 / 7)},
    ),
    (
        "pods-rl-evicted-preempted.json",  # node-pressure eviction: status.reason Evicted
        0,
        {
            "phase": "Failed",
            "reason": "Evicted",
            "deleted_at": None,
            "finished_at": utc("2026-11-30T15:31:02"),
        },
    ),
    (
        "pods-rl-evicted-preempted.json",  # scheduler preemption: only the DisruptionTarget condition says so
        1,
        {"phase": "Failed", "reason": "Preempted", "deleted_at": utc("2026-11-30T15:50:30")},
    ),
    (
        "pods-ttl-deleted.json",  # TTL after finish: deletionTimestamp set, containers already terminated
        1,
        {
            "phase": "Succeeded",
            "deleted_at": utc("2026-11-30T16:23:18"),
            "finished_at": utc("2026-11-30T16:22:17"),
        },
    ),
    (
        "pod-argo-step-failed.json",  # no Job; the last app container (argo's "wait") ends the pod
        None,
        {
            "job_uid": None,
            "phase": "Failed",
            "finished_at": utc("2026-11-30T18:25:13"),
            "gpu_equivalents": 1.0,
        },
    ),
]


@pytest.mark.parametrize(("name", "index", "expected"), PODS, ids=[f"{n}[{i}]" for n, i, _ in PODS])
def test_parse_pod(name: str, index: int | None, expected: dict[str, Any]) -> None:
    record = parse_pod(pod(name, index), CFG)
    assert record.cluster == "lab"
    assert {field: getattr(record, field) for field in expected} == expected


def test_containers_of_a_pod_with_sidecar_and_init() -> None:
    record = parse_pod(load("pod-multicontainer-running.json"), CFG)
    assert [(c.name, c.init, c.sidecar) for c in record.containers] == [
        ("log-shipper", True, True),
        ("fetch-data", True, False),
        ("trainer", False, False),
        ("metrics-exporter", False, False),
    ]
    sidecar, fetch, trainer, _ = record.containers
    assert sidecar.started_at == utc("2026-11-30T14:00:04")
    assert sidecar.terminated is None
    assert fetch.terminated == TerminatedState(
        exit_code=0,
        reason="Completed",
        started_at=utc("2026-11-30T14:00:06"),
        finished_at=utc("2026-11-30T14:09:40"),
    )
    assert trainer.requests == {"cpu": 2.0, "memory": 8 * 2**30, "nvidia.com/gpu": 1.0}
    assert trainer.limits == {"cpu": 4.0, "memory": 12 * 2**30, "nvidia.com/gpu": 1.0}
    assert trainer.started_at == utc("2026-11-30T14:09:43")
    # Still running: no finish time even though an init container terminated.
    assert record.finished_at is None
    assert record.gpu_equivalents == 1.0


def test_restarted_container_keeps_its_previous_end() -> None:
    record = parse_pod(load("pod-finetune-retries.json"), CFG)
    (container,) = record.containers
    assert container.restart_count == 2
    assert container.last_terminated == TerminatedState(
        exit_code=1,
        reason="Error",
        message="RuntimeError: CUDA error: an illegal memory access was encountered",
        started_at=utc("2026-11-30T00:40:02"),
        finished_at=utc("2026-11-30T01:05:11"),
    )
    assert container.terminated is not None
    assert (container.terminated.exit_code, container.terminated.reason) == (0, "Completed")


def test_job_uid_from_owner_reference_when_labels_are_missing() -> None:
    obj = load("pod-indexed-3.json")
    for key in ("batch.kubernetes.io/controller-uid", "controller-uid"):
        del obj["metadata"]["labels"][key]
    assert parse_pod(obj, CFG).job_uid == "5b8cad2e-4f60-4b8c-ad2e-4f607b8cad35"


def test_pending_pod_has_no_times_beyond_creation() -> None:
    obj = load("pod-mig-running.json")
    obj["spec"].pop("nodeName")
    obj["status"] = {"phase": "Pending", "qosClass": "Guaranteed"}
    record = parse_pod(obj, CFG)
    assert (record.node, record.scheduled_at, record.started_at, record.finished_at) == (
        None,
        None,
        None,
        None,
    )
    assert record.created_at == utc("2026-11-30T09:30:00")
