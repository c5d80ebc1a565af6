"""Every real capture in tests/fixtures/k8s parses, to values read off the files by hand."""

from __future__ import annotations

from pathlib import Path

from inno_notify.domain.model import JobStatus, KueueInfo, Requested, TerminatedState
from inno_notify.domain.parsing import ParseConfig, decide_exit, parse_bare_gpu_pod, parse_job, parse_pod

from ._load import load_capture, utc

CFG = ParseConfig(cluster="lab")


def test_every_capture_is_covered(captures: Path) -> None:
    covered = {
        "job-succeeded.json",
        "job-running.json",
        "job-failed-backofflimit.json",
        "job-suspended-kueue.json",
        "pod-job-completed.json",
        "pod-job-failed-exit42.json",
        "pod-pending-unschedulable.json",
        "pod-restarts-error.json",
        "workload-admitted.json",  # test_workload.py
        "workload-finished-evicted-deactivated.json",
        "workload-v1beta2-deactivated.json",
    }
    assert {p.name for p in (captures / "k8s").glob("*.json")} == covered


def test_job_succeeded_131_style(captures: Path) -> None:
    record = parse_job(load_capture(captures, "job-succeeded.json"), CFG)
    assert (record.uid, record.namespace, record.name) == (
        "4dc6ef71-c2eb-44af-9b73-bb77ab6463db",
        "default",
        "worker1",
    )
    assert (record.status, record.reason) == (JobStatus.SUCCEEDED, "CompletionsReached")
    assert (record.created_at, record.started_at, record.finished_at) == (
        utc("2026-04-26T18:35:42"),
        utc("2026-04-26T18:35:42"),
        utc("2026-04-26T18:37:06"),
    )
    # busybox with "resources: {}": nothing requested, which is None, not 0.
    assert record.requested == Requested(gpus=0.0, parallelism=1, completions=6)
    assert (record.owner, record.team, record.family, record.kueue) == (None, None, "worker1", None)
    assert record.resource_version == "27656"


def test_job_running(captures: Path) -> None:
    record = parse_job(load_capture(captures, "job-running.json"), CFG)
    assert (record.status, record.reason, record.finished_at) == (JobStatus.RUNNING, None, None)
    assert record.resource_version == "27446"


def test_job_failed_backoff_limit(captures: Path) -> None:
    record = parse_job(load_capture(captures, "job-failed-backofflimit.json"), CFG)
    assert (record.uid, record.name) == ("a4bb1d1c-2471-457d-a31f-3a8371630c94", "worker2")
    assert (record.status, record.reason, record.finished_at) == (
        JobStatus.FAILED,
        "BackoffLimitExceeded",
        utc("2026-04-26T18:47:32"),
    )


def test_job_suspended_by_kueue(captures: Path) -> None:
    record = parse_job(load_capture(captures, "job-suspended-kueue.json"), ParseConfig(default_team="ml"))
    assert (record.status, record.reason, record.started_at) == (JobStatus.SUSPENDED, "JobSuspended", None)
    assert record.kueue == KueueInfo(local_queue="lq-all-resources")
    assert record.family == "ml-job-online-filtering-6"  # the trailing git ref "4f6f9f6" is stripped
    assert record.team == "ml"
    # One app container (30 cpu, 70Gi, 4 GPUs) dwarfs the git-clone init container (100m, 512Mi).
    assert record.requested == Requested(
        gpus=4.0,
        cpu_cores=30.0,
        memory_bytes=70 * 2**30,
        cpu_limit_cores=30.0,
        memory_limit_bytes=70 * 2**30,
        extended={"nvidia.com/gpu": 4.0},
        parallelism=1,
        completions=1,
    )


def test_pod_of_cronjob_completed(captures: Path) -> None:
    record = parse_pod(load_capture(captures, "pod-job-completed.json"), CFG)
    assert (record.uid, record.job_uid, record.phase, record.node) == (
        "8c27e2aa-e3ee-406d-b45e-432476d5dc13",
        "e2e56c92-b266-4003-94c1-72ff60682bc4",
        "Succeeded",
        "datagen-1-35",
    )
    assert (record.scheduled_at, record.started_at, record.finished_at) == (
        utc("2026-06-26T10:13:00"),
        utc("2026-06-26T10:13:00"),
        utc("2026-06-26T10:14:33"),
    )
    (container,) = record.containers
    assert container.requests == {"cpu": 0.04, "memory": 15 * 2**20}
    assert container.limits == {"cpu": 0.08, "memory": 30 * 2**20}
    assert decide_exit([record], job_failed=False) == (0, "Completed")
    assert parse_bare_gpu_pod(load_capture(captures, "pod-job-completed.json"), CFG) is None


def test_pod_failed_exit_42(captures: Path) -> None:
    record = parse_pod(load_capture(captures, "pod-job-failed-exit42.json"), CFG)
    assert (record.job_uid, record.phase, record.reason) == (
        "9a709939-4c71-4c8d-a23d-c319134e80e1",
        "Failed",
        None,
    )
    assert record.containers[0].terminated == TerminatedState(
        exit_code=42,
        reason="Error",
        started_at=utc("2026-06-26T10:14:28"),
        finished_at=utc("2026-06-26T10:14:33"),
    )
    assert record.finished_at == utc("2026-06-26T10:14:33")
    assert decide_exit([record], job_failed=True) == (42, "Error")


def test_pod_pending_unschedulable(captures: Path) -> None:
    record = parse_pod(load_capture(captures, "pod-pending-unschedulable.json"), CFG)
    # PodScheduled is False: not scheduled, so no GPU time starts.
    assert (record.phase, record.scheduled_at, record.node, record.job_uid) == ("Pending", None, None, None)
    assert record.created_at == utc("2026-06-26T10:12:51")
    assert decide_exit([record]) == (None, None)
    assert parse_bare_gpu_pod(load_capture(captures, "pod-pending-unschedulable.json"), CFG) is None


def test_pod_restarting_after_errors(captures: Path) -> None:
    record = parse_pod(load_capture(captures, "pod-restarts-error.json"), CFG)
    (container,) = record.containers
    assert container.restart_count == 2
    assert container.last_terminated is not None and container.last_terminated.finished_at == utc(
        "2018-12-02T09:19:41"
    )
    assert container.terminated is not None and container.terminated.finished_at == utc("2018-12-02T09:19:56")
    # restartPolicy Always and phase Running: a terminated container will run again, the pod has not ended.
    assert (record.phase, record.finished_at) == ("Running", None)
    assert decide_exit([record]) == (1, "Error")
