"""Events we keep, from both Event APIs, and the ones we drop."""

from __future__ import annotations

from typing import Any

import pytest

from inno_notify.domain.parsing import relevant_event


def core_event(reason: str, kind: str, uid: str | None, source: str, message: str) -> dict[str, Any]:
    involved: dict[str, Any] = {
        "apiVersion": "batch/v1" if kind == "Job" else "v1",
        "kind": kind,
        "name": "x",
    }
    if uid is not None:
        involved["uid"] = uid
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "count": 1,
        "firstTimestamp": "2026-11-30T10:40:12Z",
        "lastTimestamp": "2026-11-30T10:40:12Z",
        "involvedObject": {**involved, "namespace": "face-research", "resourceVersion": "4820110"},
        "message": message,
        "metadata": {
            "creationTimestamp": "2026-11-30T10:40:12Z",
            "name": "x.187c6a4e2f5b3d1a",
            "namespace": "face-research",
            "resourceVersion": "4820115",
            "uid": "0f1e2d3c-4b5a-4978-8796-a5b4c3d2e1f0",
        },
        "reason": reason,
        "reportingComponent": source,
        "reportingInstance": "",
        "source": {"component": source},
        "type": "Normal" if reason == "SuccessfulCreate" else "Warning",
    }


def new_event(reason: str, kind: str, uid: str, controller: str, note: str) -> dict[str, Any]:
    return {
        "action": "Scheduling",
        "apiVersion": "events.k8s.io/v1",
        "eventTime": "2026-11-30T15:00:00.412938Z",
        "kind": "Event",
        "metadata": {
            "creationTimestamp": "2026-11-30T15:00:00Z",
            "name": "rl-rollouts-9zq2w.187c6b0f9d2e4a11",
            "namespace": "rl",
            "resourceVersion": "611700",
            "uid": "1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d",
        },
        "note": note,
        "reason": reason,
        "regarding": {
            "apiVersion": "v1",
            "kind": kind,
            "name": "rl-rollouts-9zq2w",
            "namespace": "rl",
            "uid": uid,
        },
        "reportingController": controller,
        "reportingInstance": f"{controller}-control-plane-1",
        "type": "Warning",
    }


JOB = "7c1d9e3f-2a4b-4c6d-8e0f-1a2b3c4d5e62"
POD = "a1b2c3d4-0007-4e5f-8a9b-0c1d2e3f4a5b"
NODE = "2c3d4e5f-6a7b-4c8d-9e0f-1a2b3c4d5e6f"

EVENTS = [
    pytest.param(
        core_event(
            "BackoffLimitExceeded",
            "Job",
            JOB,
            "job-controller",
            "Job has reached the specified backoff limit",
        ),
        (JOB, "Job", "BackoffLimitExceeded"),
        id="core BackoffLimitExceeded",
    ),
    pytest.param(
        core_event(
            "DeadlineExceeded", "Job", JOB, "job-controller", "Job was active longer than specified deadline"
        ),
        (JOB, "Job", "DeadlineExceeded"),
        id="core DeadlineExceeded",
    ),
    pytest.param(
        core_event("Evicted", "Pod", POD, "kubelet", "The node was low on resource: ephemeral-storage."),
        (POD, "Pod", "Evicted"),
        id="core Evicted",
    ),
    pytest.param(
        core_event(
            "OOMKilling", "Node", NODE, "kernel-monitor", "Memory cgroup out of memory: Killed process 4242"
        ),
        (NODE, "Node", "OOMKilling"),
        id="core OOMKilling from node-problem-detector",
    ),
    pytest.param(
        new_event(
            "FailedScheduling",
            "Pod",
            POD,
            "default-scheduler",
            "0/12 nodes are available: 12 Insufficient nvidia.com/gpu.",
        ),
        (POD, "Pod", "FailedScheduling"),
        id="events.k8s.io FailedScheduling",
    ),
    pytest.param(
        new_event(
            "Preempted", "Pod", POD, "default-scheduler", "Preempted by pod ingress/high-priority-inference"
        ),
        (POD, "Pod", "Preempted"),
        id="events.k8s.io Preempted",
    ),
    pytest.param(
        core_event(
            "SuccessfulCreate", "Job", JOB, "job-controller", "Created pod: sweep-lr-0.01-k9x2p-2xq7t"
        ),
        None,
        id="SuccessfulCreate is not kept",
    ),
    pytest.param(
        new_event("Pulled", "Pod", POD, "kubelet", "Container image already present on machine"),
        None,
        id="Pulled is not kept",
    ),
    pytest.param(
        core_event("Evicted", "Pod", None, "kubelet", "The node was low on resource: memory."),
        None,
        id="no uid: cannot be attributed",
    ),
]


@pytest.mark.parametrize(("event", "expected"), EVENTS)
def test_relevant_event(event: dict[str, Any], expected: tuple[str, str, str] | None) -> None:
    assert relevant_event(event) == expected
