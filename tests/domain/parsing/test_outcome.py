"""Which container exit speaks for the job (outcome.py's documented rule)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from inno_notify.domain.model import ContainerRecord, PodRecord, TerminatedState
from inno_notify.domain.parsing import ParseConfig, decide_exit, parse_pod

from ._load import load, load_items, utc

CFG = ParseConfig()


def pods(name: str) -> list[PodRecord]:
    return [parse_pod(item, CFG) for item in load_items(name)]


def one(name: str) -> list[PodRecord]:
    return [parse_pod(load(name), CFG)]


def synthetic(*containers: ContainerRecord, finished: str | None = None) -> PodRecord:
    return PodRecord(
        cluster="lab",
        uid=f"pod-{len(containers)}-{finished}",
        namespace="ns",
        name="p",
        job_uid="job",
        phase="Failed",
        created_at=utc("2026-11-30T09:00:00"),
        finished_at=utc(finished) if finished else None,
        containers=containers,
    )


def ended(code: int, reason: str, at: str | None) -> TerminatedState:
    return TerminatedState(exit_code=code, reason=reason, finished_at=utc(at) if at else None)


CASES = [
    pytest.param([], None, (None, None), id="no pods"),
    pytest.param(pods("pods-train-resnet-succeeded.json"), False, (0, "Completed"), id="succeeded"),
    pytest.param(pods("pods-sweep-backofflimit.json"), True, (1, "Error"), id="two failed attempts"),
    pytest.param(pods("pods-embed-oomkilled.json"), True, (137, "OOMKilled"), id="oom killed"),
    pytest.param(one("pod-finetune-retries.json"), False, (0, "Completed"), id="restarts then success"),
    pytest.param(one("pod-finetune-retries.json"), None, (0, "Completed"), id="restarts, outcome unknown"),
    pytest.param(
        one("pod-argo-step-failed.json"), True, (1, "Error"), id="failed main beats later wait exit"
    ),
    pytest.param(
        one("pod-argo-step-failed.json"), None, (0, "Completed"), id="unknown outcome: last to finish"
    ),
    pytest.param(
        one("pod-multicontainer-running.json"), None, (None, None), id="only an init container ended"
    ),
    pytest.param(
        [
            synthetic(ContainerRecord("w", terminated=ended(2, "Error", "2026-11-30T10:00:00"))),
            synthetic(ContainerRecord("w", terminated=ended(0, "Completed", "2026-11-30T11:00:00"))),
        ],
        True,
        (2, "Error"),
        id="failed index beats a later successful sibling",
    ),
    pytest.param(
        [
            synthetic(
                ContainerRecord("a", terminated=ended(0, "Completed", "2026-11-30T10:00:00")),
                ContainerRecord("b", terminated=ended(137, "OOMKilled", "2026-11-30T10:00:00")),
            )
        ],
        None,
        (137, "OOMKilled"),
        id="tie goes to the non-zero exit",
    ),
    pytest.param(
        [
            synthetic(
                ContainerRecord(
                    "w", restart_count=1, last_terminated=ended(137, "OOMKilled", "2026-11-30T10:00:00")
                )
            )
        ],
        None,
        (137, "OOMKilled"),
        id="running again after an OOM: the previous end counts",
    ),
    pytest.param(
        [
            synthetic(
                ContainerRecord("w", terminated=ended(143, "Error", None)), finished="2026-11-30T12:00:00"
            ),
            synthetic(ContainerRecord("w", terminated=ended(1, "Error", "2026-11-30T11:00:00"))),
        ],
        True,
        (143, "Error"),
        id="an end without finishedAt takes the pod's finish time",
    ),
    pytest.param(
        [
            synthetic(
                ContainerRecord(
                    "proxy", init=True, sidecar=True, terminated=ended(137, "Error", "2026-11-30T12:00:00")
                ),
                ContainerRecord("w", terminated=ended(0, "Completed", "2026-11-30T11:00:00")),
            )
        ],
        None,
        (0, "Completed"),
        id="sidecars never decide",
    ),
]


@pytest.mark.parametrize(("pod_records", "job_failed", "expected"), CASES)
def test_decide_exit(
    pod_records: list[PodRecord], job_failed: bool | None, expected: tuple[int | None, str | None]
) -> None:
    assert decide_exit(pod_records, job_failed=job_failed) == expected


def test_failed_job_without_non_zero_exit_falls_back_to_the_last_exit() -> None:
    # A job failed by its deadline while the container had just exited 0: report what happened.
    (record,) = pods("pods-train-resnet-succeeded.json")
    assert decide_exit([replace(record)], job_failed=True) == (0, "Completed")
