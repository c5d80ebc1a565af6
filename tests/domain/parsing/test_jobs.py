"""Realistic Job objects parse to the records worked out by hand from each object's fields."""

from __future__ import annotations

from typing import Any

import pytest

from inno_notify.domain.model import JobStatus, KueueInfo, NotifyMode, Requested, WorkloadKind
from inno_notify.domain.parsing import ParseConfig, ParseError, parse_job

from ._load import load, utc

GiB = 2**30
CFG = ParseConfig(
    cluster="lab",
    gpu_resources={"nvidia.com/gpu": 1.0, "nvidia.com/mig-1g.10gb": 1 / 7},
    namespace_teams={"face-research": "face", "speech": "speech"},
    default_team="research",
)

# file -> the fields we expect; anything not listed is checked by the other cases or tests below.
JOBS: list[tuple[str, dict[str, Any]]] = [
    (
        "job-train-resnet-succeeded.json",  # k8s 1.29: a Complete condition without a reason
        {
            "uid": "1b4c5e2a-0f7d-4c1e-9a3b-2d6f8e9a0c11",
            "namespace": "face-research",
            "name": "train-resnet-7f9c2",
            "status": JobStatus.SUCCEEDED,
            "reason": None,
            "owner": "alice@example.com",
            "team": "face",
            "channels": ("slack", "email"),
            "notify": NotifyMode.ALWAYS,
            "group_key": None,
            "family": "train-resnet",
            "created_at": utc("2026-11-30T10:00:00"),
            "started_at": utc("2026-11-30T10:00:00"),
            "finished_at": utc("2026-11-30T11:02:05"),
            "requested": Requested(
                gpus=2.0,
                cpu_cores=8.0,
                memory_bytes=64 * GiB,
                cpu_limit_cores=16.0,
                memory_limit_bytes=128 * GiB,
                extended={"nvidia.com/gpu": 2.0},
                parallelism=1,
                completions=1,
            ),
            "kueue": None,
            "resource_version": "4817731",
        },
    ),
    (
        "job-sweep-backofflimit.json",  # k8s 1.30: Failed only; owner on the template, team as a job label
        {
            "status": JobStatus.FAILED,
            "reason": "BackoffLimitExceeded",
            "finished_at": utc("2026-11-30T10:40:12"),
            "started_at": utc("2026-11-30T10:05:00"),
            "owner": "bob@example.com",
            "team": "vision",
            "notify": NotifyMode.FAILURE,
            "group_key": "sweep-lr-2026-11",
            "family": "sweep-lr-0.01",
            "requested": Requested(
                gpus=1.0,
                cpu_cores=4.0,
                memory_bytes=16 * GiB,
                cpu_limit_cores=None,
                memory_limit_bytes=16 * GiB,
                extended={"nvidia.com/gpu": 1.0},
                parallelism=1,
                completions=1,
            ),
        },
    ),
    (
        "job-embed-oomkilled.json",  # k8s 1.31: FailureTarget + Failed at the same instant
        {
            "status": JobStatus.FAILED,
            "reason": "BackoffLimitExceeded",
            "finished_at": utc("2026-11-30T08:47:19"),
            "owner": "erin@example.com",
            "team": "research",
            "family": "embed-bert-large",
        },
    ),
    (
        "job-eval-deadline.json",  # FailureTarget at the deadline, Failed 31 s later when the pod was gone
        {
            "status": JobStatus.FAILED,
            "reason": "DeadlineExceeded",
            "finished_at": utc("2026-11-30T13:00:31"),
            "started_at": utc("2026-11-30T12:00:00"),
            "team": "face",
        },
    ),
    (
        "job-indexed-8.json",
        {
            "status": JobStatus.SUCCEEDED,
            "reason": "CompletionsReached",
            "finished_at": utc("2026-11-29T22:31:40"),
            "family": "shard-preprocess-v2",
            "owner": None,
            "requested": Requested(
                gpus=0.0,
                cpu_cores=1.5,
                memory_bytes=3 * GiB,
                cpu_limit_cores=None,
                memory_limit_bytes=4 * GiB,
                extended={},
                parallelism=4,
                completions=8,
            ),
        },
    ),
    (
        "job-finetune-retries.json",  # created by a CronJob: the schedule suffix is not part of the family
        {
            "status": JobStatus.SUCCEEDED,
            "family": "finetune-whisper",
            "team": "speech",
            "finished_at": utc("2026-11-30T03:12:44"),
        },
    ),
    (
        "job-multicontainer-running.json",  # sidecar + init + two app containers
        {
            "status": JobStatus.RUNNING,
            "reason": None,
            "finished_at": None,
            "owner": "grace@example.com",
            "team": "platform",
            "notify": NotifyMode.NEVER,
            "requested": Requested(
                gpus=1.0,
                # max(2 + 0.1 + 0.5 sidecar, 4 fetch-data + 0.5 sidecar)
                cpu_cores=4.5,
                # max(8Gi + 128Mi + 512Mi, 16Gi + 512Mi)
                memory_bytes=16 * GiB + 512 * 2**20,
                # max(4 + 0.2 + 1, 4 + 1)
                cpu_limit_cores=5.2,
                # max(12Gi + 256Mi + 512Mi, 16Gi + 512Mi)
                memory_limit_bytes=16 * GiB + 512 * 2**20,
                extended={"nvidia.com/gpu": 1.0},
                parallelism=1,
                completions=1,
            ),
        },
    ),
    (
        "job-mig-running.json",
        {
            "status": JobStatus.RUNNING,
            "requested": Requested(
                gpus=1 / 7,
                cpu_cores=2.0,
                memory_bytes=8 * GiB,
                cpu_limit_cores=2.0,
                memory_limit_bytes=8 * GiB,
                extended={"nvidia.com/mig-1g.10gb": 1.0},
                parallelism=1,
                completions=1,
            ),
        },
    ),
    (
        "job-kueue-1-admitted.json",
        {
            "status": JobStatus.RUNNING,
            "started_at": utc("2026-11-30T06:20:00"),
            "kueue": KueueInfo(local_queue="nlp-queue"),
        },
    ),
    (
        "job-kueue-2-preempted.json",  # Kueue suspended it again: no startTime while suspended
        {"status": JobStatus.SUSPENDED, "reason": "JobSuspended", "started_at": None, "finished_at": None},
    ),
    (
        "job-kueue-3-readmitted.json",  # resumed: startTime is the resume time
        {"status": JobStatus.RUNNING, "reason": None, "started_at": utc("2026-11-30T07:40:00")},
    ),
    ("job-rl-running.json", {"status": JobStatus.RUNNING, "reason": None}),
    (
        "job-ttl-last-seen-running.json",
        {
            "status": JobStatus.RUNNING,
            "requested": Requested(
                gpus=0.0,
                cpu_cores=4.0,
                memory_bytes=8 * GiB,
                cpu_limit_cores=4.0,
                memory_limit_bytes=8 * GiB,
                extended={},
                parallelism=2,
                completions=2,
            ),
        },
    ),
    (
        "job-failuretarget-1-decided.json",  # 1.31: decided while a pod is still terminating
        {"status": JobStatus.FAILED, "reason": "PodFailurePolicy", "finished_at": utc("2026-11-30T17:12:30")},
    ),
    (
        "job-failuretarget-2-failed.json",
        {"status": JobStatus.FAILED, "reason": "PodFailurePolicy", "finished_at": utc("2026-11-30T17:13:02")},
    ),
]


@pytest.mark.parametrize(("name", "expected"), JOBS, ids=[name for name, _ in JOBS])
def test_parse_job(name: str, expected: dict[str, Any]) -> None:
    record = parse_job(load(name), CFG)
    assert record.cluster == "lab"
    assert record.kind is WorkloadKind.JOB
    expected = dict(expected)
    if "requested" in expected:
        assert_requested(record.requested, expected.pop("requested"))
    assert {field: getattr(record, field) for field in expected} == expected


def assert_requested(actual: Requested, expected: Requested) -> None:
    """Sums of decimal fractions (0.1 + 0.5) are compared approximately, everything else exactly."""
    assert actual.gpus == pytest.approx(expected.gpus)
    assert actual.cpu_cores == pytest.approx(expected.cpu_cores)
    assert actual.cpu_limit_cores == pytest.approx(expected.cpu_limit_cores)
    assert (actual.memory_bytes, actual.memory_limit_bytes) == (
        expected.memory_bytes,
        expected.memory_limit_bytes,
    )
    assert dict(actual.extended) == pytest.approx(dict(expected.extended))
    assert (actual.parallelism, actual.completions) == (expected.parallelism, expected.completions)


def test_at_least_fifteen_hand_written_jobs() -> None:
    assert len(JOBS) >= 15


def test_suspended_by_spec_before_the_controller_adds_a_condition() -> None:
    obj = load("job-kueue-1-admitted.json")
    obj["spec"]["suspend"] = True
    obj["status"] = {}
    record = parse_job(obj, CFG)
    assert (record.status, record.reason, record.started_at) == (JobStatus.SUSPENDED, None, None)


def test_created_but_not_yet_active_is_pending() -> None:
    obj = load("job-rl-running.json")
    obj["status"] = {}
    assert parse_job(obj, CFG).status is JobStatus.PENDING


def test_parallelism_zero_is_kept() -> None:
    obj = load("job-rl-running.json")
    obj["spec"]["parallelism"] = 0
    assert parse_job(obj, CFG).requested.parallelism == 0


def test_success_criteria_met_alone_decides_success_with_its_time() -> None:
    obj = load("job-indexed-8.json")
    obj["status"]["conditions"] = obj["status"]["conditions"][:1]
    del obj["status"]["completionTime"]
    record = parse_job(obj, CFG)
    assert (record.status, record.finished_at) == (JobStatus.SUCCEEDED, utc("2026-11-29T22:31:40"))


def test_job_without_uid_is_an_error() -> None:
    obj = load("job-rl-running.json")
    del obj["metadata"]["uid"]
    with pytest.raises(ParseError):
        parse_job(obj, CFG)


def test_bad_quantity_names_the_field() -> None:
    obj = load("job-rl-running.json")
    obj["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "three"
    with pytest.raises(ParseError, match=r"requests\[cpu\]"):
        parse_job(obj, CFG)
