"""Merging observations over time: replays, Kueue resumes, TTL deletions, 1.31 condition pairs."""

from __future__ import annotations

from dataclasses import replace

from inno_notify.domain.model import JobRecord, JobStatus, KueueInfo, PodRecord
from inno_notify.domain.parsing import (
    ParseConfig,
    apply_pods_to_job,
    merge_job,
    merge_kueue,
    parse_job,
    parse_pod,
    parse_workload,
)

from ._load import load, load_items, utc

CFG = ParseConfig(cluster="lab")


def job(name: str) -> JobRecord:
    return parse_job(load(name), CFG)


def pods(name: str) -> list[PodRecord]:
    return [parse_pod(item, CFG) for item in load_items(name)]


def test_kueue_resume_keeps_the_first_start() -> None:
    record = None
    for name in ("job-kueue-1-admitted.json", "job-kueue-2-preempted.json", "job-kueue-3-readmitted.json"):
        record = merge_job(record, job(name))
    assert record is not None
    assert (record.status, record.resource_version) == (JobStatus.RUNNING, "9905600")
    assert record.started_at == utc("2026-11-30T06:20:00")  # not the 07:40 resume

    _, info = parse_workload(load("workload-kueue-readmitted.json"))
    record = replace(record, kueue=merge_kueue(record.kueue, info))
    assert record.kueue == KueueInfo(
        local_queue="nlp-queue",
        cluster_queue="gpu-cluster-queue",
        workload_name="job-llm-sft-7b-3c1f9",
        quota_reserved_at=utc("2026-11-30T07:39:58"),
        admitted_at=utc("2026-11-30T07:39:59"),
        evictions=1,
        preemptions=1,
        last_eviction_reason="Preempted",
    )
    # The next Job observation carries only the local queue: the workload's facts stay.
    again = merge_job(record, job("job-kueue-3-readmitted.json"))
    assert again.kueue == record.kueue


def test_replayed_older_observation_does_not_undo_the_outcome() -> None:
    failed = job("job-sweep-backofflimit.json")
    running = replace(
        failed, status=JobStatus.RUNNING, reason=None, finished_at=None, resource_version="4819000"
    )
    merged = merge_job(failed, running)
    assert (merged.status, merged.reason, merged.finished_at, merged.resource_version) == (
        JobStatus.FAILED,
        "BackoffLimitExceeded",
        utc("2026-11-30T10:40:12"),
        "4820114",
    )


def test_outcome_is_never_undone_even_when_versions_do_not_compare() -> None:
    succeeded = replace(job("job-train-resnet-succeeded.json"), resource_version="opaque-b")
    running = replace(
        succeeded, status=JobStatus.RUNNING, reason=None, finished_at=None, resource_version="opaque-c"
    )
    merged = merge_job(succeeded, running)
    assert (merged.status, merged.finished_at) == (JobStatus.SUCCEEDED, utc("2026-11-30T11:02:05"))


def test_failure_target_then_failed_in_either_order() -> None:
    decided, final = job("job-failuretarget-1-decided.json"), job("job-failuretarget-2-failed.json")
    for merged in (merge_job(decided, final), merge_job(final, decided)):
        assert (merged.status, merged.reason, merged.finished_at) == (
            JobStatus.FAILED,
            "PodFailurePolicy",
            utc("2026-11-30T17:13:02"),
        )


def test_deleted_after_an_outcome_keeps_the_outcome() -> None:
    succeeded = job("job-train-resnet-succeeded.json")
    deleted = replace(succeeded, status=JobStatus.DELETED, resource_version="4817900")
    assert merge_job(succeeded, deleted).status is JobStatus.SUCCEEDED


def test_late_outcome_replaces_deleted() -> None:
    succeeded = job("job-train-resnet-succeeded.json")
    deleted = replace(
        succeeded, status=JobStatus.DELETED, reason=None, finished_at=None, resource_version="4817900"
    )
    merged = merge_job(deleted, succeeded)  # an older event with the Complete condition arrives late
    assert (merged.status, merged.finished_at) == (JobStatus.SUCCEEDED, utc("2026-11-30T11:02:05"))


def test_pods_deleted_by_ttl_before_the_outcome_was_seen() -> None:
    running = job("job-ttl-last-seen-running.json")
    deleted = merge_job(running, replace(running, status=JobStatus.DELETED, resource_version="9930200"))
    assert deleted.status is JobStatus.DELETED
    record = apply_pods_to_job(deleted, pods("pods-ttl-deleted.json"))
    # Nothing terminal was seen: the status stays DELETED, but the pods tell how and when it ended.
    assert (record.status, record.exit_code, record.exit_reason) == (JobStatus.DELETED, 0, "Completed")
    assert record.finished_at == utc("2026-11-30T16:22:17")
    assert record.first_scheduled_at == utc("2026-11-30T16:00:03")


def test_stored_figures_survive_a_new_observation() -> None:
    stored = replace(
        job("job-rl-running.json"),
        exit_code=137,
        exit_reason="Error",
        first_scheduled_at=utc("2026-11-30T15:00:01"),
        event_counts={"FailedScheduling": 3, "Evicted": 1},
    )
    newer = replace(
        job("job-rl-running.json"), resource_version="612100", event_counts={"FailedScheduling": 5}
    )
    merged = merge_job(stored, newer)
    assert (merged.exit_code, merged.exit_reason, merged.first_scheduled_at) == (
        137,
        "Error",
        utc("2026-11-30T15:00:01"),
    )
    assert merged.event_counts == {"FailedScheduling": 5, "Evicted": 1}
    assert merged.resource_version == "612100"


def test_first_sight_is_the_observation_itself() -> None:
    record = job("job-rl-running.json")
    assert merge_job(None, record) is record


def test_apply_pods_oom() -> None:
    record = apply_pods_to_job(job("job-embed-oomkilled.json"), pods("pods-embed-oomkilled.json"))
    assert (record.exit_code, record.exit_reason, record.reason) == (137, "OOMKilled", "BackoffLimitExceeded")
    assert record.first_scheduled_at == utc("2026-11-30T08:00:04")
    assert record.queue_seconds == 4.0


def test_apply_pods_deadline_keeps_the_jobs_reason() -> None:
    record = apply_pods_to_job(job("job-eval-deadline.json"), pods("pods-eval-deadline.json"))
    assert (record.exit_code, record.exit_reason, record.reason) == (143, "Error", "DeadlineExceeded")


def test_apply_pods_sweep() -> None:
    record = apply_pods_to_job(job("job-sweep-backofflimit.json"), pods("pods-sweep-backofflimit.json"))
    assert (record.exit_code, record.exit_reason) == (1, "Error")
    assert record.first_scheduled_at == utc("2026-11-30T10:05:02")
    assert record.runtime_seconds == 35 * 60 + 12


def test_apply_pods_running_job_takes_the_latest_disruption() -> None:
    record = apply_pods_to_job(job("job-rl-running.json"), pods("pods-rl-evicted-preempted.json"))
    assert record.reason == "Preempted"  # 15:50:30 preemption after the 15:31 eviction
    assert (record.exit_code, record.exit_reason) == (143, "Error")
    assert record.first_scheduled_at == utc("2026-11-30T15:00:01")


def test_apply_pods_successful_job_does_not_inherit_an_eviction() -> None:
    succeeded = job("job-train-resnet-succeeded.json")
    evicted = replace(pods("pods-rl-evicted-preempted.json")[0], job_uid=succeeded.uid)
    record = apply_pods_to_job(succeeded, [*pods("pods-train-resnet-succeeded.json"), evicted])
    assert record.reason is None
    assert (record.exit_code, record.exit_reason) == (0, "Completed")


def test_apply_pods_ignores_pods_of_other_jobs() -> None:
    record = job("job-train-resnet-succeeded.json")
    assert apply_pods_to_job(record, pods("pods-sweep-backofflimit.json")) == record


def test_an_owner_once_known_stays_when_a_later_state_names_none() -> None:
    """A workflow's GPU step pod names no owner; it takes its workflow's, and its next states keep it."""
    first = replace(job("job-kueue-1-admitted.json"), owner=None)
    owned = replace(first, owner="alice@example.com")
    later = replace(first, resource_version="9999999", owner=None)
    renamed = replace(later, owner="bob@example.com")
    assert [
        merge_job(owned, later).owner,
        merge_job(owned, renamed).owner,
        merge_job(first, later).owner,
    ] == [
        "alice@example.com",
        "bob@example.com",
        None,
    ]
