"""Kueue Workloads (v1beta1 and v1beta2) give the job uid and the admission story."""

from __future__ import annotations

from pathlib import Path

import pytest

from inno_notify.domain.model import KueueInfo
from inno_notify.domain.parsing import parse_workload

from ._load import load, load_capture, utc

CAPTURES = [
    (
        "workload-admitted.json",
        "2eae97f8-63f4-4ba6-9930-4c526f0ec781",
        KueueInfo(
            local_queue="queue",
            cluster_queue="queue",
            workload_name="job-action",
            quota_reserved_at=utc("2024-11-29T03:03:26"),
            admitted_at=utc("2024-11-29T03:03:26"),
        ),
    ),
    (
        "workload-finished-evicted-deactivated.json",  # admission released at finish: no ClusterQueue left
        "c250a4b4-a69b-4872-ba98-8b29b83007a4",
        KueueInfo(
            local_queue="default-queue",
            workload_name="pytorchjob-job-suspend-test-cea58",
            evictions=1,
            last_eviction_reason="Deactivated",
        ),
    ),
    (
        "workload-v1beta2-deactivated.json",
        "0a6b4c89-65cf-413d-8cf3-a334b66f48c6",
        KueueInfo(
            local_queue="user-queue",
            workload_name="pytorchjob-pytorch-simple-dfbe0",
            evictions=1,
            last_eviction_reason="Deactivated",
        ),
    ),
]


@pytest.mark.parametrize(("name", "job_uid", "info"), CAPTURES, ids=[c[0] for c in CAPTURES])
def test_real_workloads(captures: Path, name: str, job_uid: str, info: KueueInfo) -> None:
    assert parse_workload(load_capture(captures, name)) == (job_uid, info)


def test_readmitted_after_preemption() -> None:
    # Evicted is False again after readmission; schedulingStats keeps the count and the reason.
    assert parse_workload(load("workload-kueue-readmitted.json")) == (
        "9fc0e162-83a4-4fc0-e162-83a4bfc0e179",
        KueueInfo(
            local_queue="nlp-queue",
            cluster_queue="gpu-cluster-queue",
            workload_name="job-llm-sft-7b-3c1f9",
            quota_reserved_at=utc("2026-11-30T07:39:58"),
            admitted_at=utc("2026-11-30T07:39:59"),
            evictions=1,
            preemptions=1,
            last_eviction_reason="Preempted",
        ),
    )


def test_job_uid_from_owner_reference_without_the_label(captures: Path) -> None:
    obj = load_capture(captures, "workload-admitted.json")
    del obj["metadata"]["labels"]
    assert parse_workload(obj)[0] == "2eae97f8-63f4-4ba6-9930-4c526f0ec781"


PREEMPTED = "Preempted to accommodate a workload (UID: 4c2e) due to prioritization in the ClusterQueue"


def test_currently_evicted_by_preemption_without_scheduling_stats() -> None:
    obj = load("workload-kueue-readmitted.json")
    del obj["status"]["schedulingStats"]
    del obj["status"]["admission"]
    obj["status"]["conditions"] = [
        {
            "lastTransitionTime": "2026-11-30T07:05:00Z",
            "message": PREEMPTED,
            "reason": "Preempted",
            "status": "True",
            "type": "Evicted",
        },
        {
            "lastTransitionTime": "2026-11-30T07:05:00Z",
            "message": PREEMPTED,
            "reason": "InClusterQueue",
            "status": "True",
            "type": "Preempted",
        },
    ]
    _, info = parse_workload(obj)
    assert (info.evictions, info.preemptions, info.last_eviction_reason, info.cluster_queue) == (
        1,
        1,
        "Preempted",
        None,
    )
