"""Advice for multi-pod runs, role by role (domain.rightsizing.replicas)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from inno_notify.domain.model import (
    JobRecord,
    PodRecord,
    RecommendationKind,
    ReplicaSpec,
    Requested,
    Usage,
    WorkloadKind,
)
from inno_notify.domain.rightsizing.engine import recommend
from inno_notify.domain.rightsizing.policy import RightsizingPolicy
from tests.domain.rightsizing.builders import T0, build

POLICY = RightsizingPolicy()
GPU4 = Requested(gpus=4.0, extended={"nvidia.com/gpu": 4})


def run(
    worker_utils: list[list[float]], master_util: list[float] | None = None
) -> tuple[JobRecord, Usage, list[PodRecord]]:
    """A PyTorchJob: an optional Master and len(worker_utils) Workers on 4 GPUs each, 60 min."""
    utils = ([master_util] if master_util is not None else []) + worker_utils
    job, usage, pods = build(pods=len(utils), gpus=4, util=utils, minutes=60)
    roles = (["Master"] if master_util is not None else []) + ["Worker"] * len(worker_utils)
    pods = [replace(p, role=role) for p, role in zip(pods, roles, strict=True)]
    replicas = [ReplicaSpec("Worker", len(worker_utils), GPU4)]
    if master_util is not None:
        replicas.insert(0, ReplicaSpec("Master", 1, GPU4))
    job = replace(job, kind=WorkloadKind.PYTORCH_JOB, replicas=tuple(replicas))
    return job, usage, pods


BUSY = [80.0, 80.0, 80.0, 80.0]
IDLE = [0.5, 0.0, 1.0, 0.2]
HALF = [80.0, 80.0, 0.5, 0.0]

# (case, master, workers, kinds, messages' starts, current, suggested)
CASES = [
    (
        "two of three workers idle",
        BUSY,
        [BUSY, IDLE, IDLE],
        [RecommendationKind.IDLE_GPU],
        "Worker × 3: 2 of 3 pods never used their 4 GPUs",
        12,
        4,
    ),
    (
        "every worker uses half its GPUs",
        BUSY,
        [HALF, HALF, HALF],
        [RecommendationKind.GPU_COUNT],
        "Worker × 3: 2 of 4 GPUs stayed idle",
        4,
        2,
    ),
    ("all busy", BUSY, [BUSY, BUSY], [], None, None, None),
    (
        "every worker idle: no GPU at all",
        BUSY,
        [IDLE, IDLE],
        [RecommendationKind.IDLE_GPU],
        "Worker × 2: The job never used its GPUs",
        4,
        0,
    ),
]


@pytest.mark.parametrize(
    ("case", "master", "workers", "kinds", "message", "current", "suggested"),
    CASES,
    ids=[c[0] for c in CASES],
)
def test_gpu_advice_per_role(
    case: str,
    master: list[float],
    workers: list[list[float]],
    kinds: list[RecommendationKind],
    message: str | None,
    current: int | None,
    suggested: int | None,
) -> None:
    job, usage, pods = run(workers, master)
    advice = [r for r in recommend(job, usage, pods, [], POLICY, T0) if r.unit.value == "gpus"]
    assert [r.kind for r in advice] == kinds
    if message is not None:
        (rec,) = advice
        assert rec.message.startswith(message), rec.message
        assert (rec.current, rec.suggested) == (current, suggested)


def test_a_job_without_roles_is_judged_as_before() -> None:
    job, usage, pods = build(pods=2, gpus=4, util=[HALF, HALF], minutes=60)
    (rec,) = [r for r in recommend(job, usage, pods, [], POLICY, T0) if r.unit.value == "gpus"]
    assert rec.message.startswith("2 of 4 GPUs stayed idle")
