"""Pure merges: a newer observation of a job into the stored record, and a job's pods into the job.

Watches replay (relists after ``410 Gone``, restarts, events delivered out of order), Kueue resets
``status.startTime`` on every resume, and TTL deletes jobs and pods soon after they end. The stored
record must survive all of that, so the rules are:

- the newer observation is the one with the larger ``resourceVersion`` when both are numeric (the
  API's versions are opaque, but etcd-backed servers hand out increasing integers); otherwise the
  one passed as ``new``;
- a terminal outcome (succeeded, failed) is never undone, and ``DELETED`` is kept only when no
  outcome was ever seen: a job deleted after it failed stays failed;
- ``started_at`` and ``first_scheduled_at`` keep the earliest known time;
- what other sources filled (exit code, Kueue admission, event counts, first scheduling) is kept
  when the newer object lacks it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime

from ..model import JobRecord, JobStatus, KueueInfo, PodRecord
from .outcome import decide_exit

__all__ = ["apply_pods_to_job", "is_older", "merge_job", "merge_kueue"]

_OUTCOMES = (JobStatus.SUCCEEDED, JobStatus.FAILED)
_NEVER = datetime.min.replace(tzinfo=UTC)


def is_older(candidate: str | None, than: str | None) -> bool:
    """True when ``candidate`` is known to precede ``than`` (both numeric resourceVersions)."""
    if candidate is None or than is None or not _is_version(candidate) or not _is_version(than):
        return False
    return int(candidate) < int(than)


def _is_version(value: str) -> bool:
    # ASCII digits only: "²".isdigit() is true and int("²") raises.
    return value.isascii() and value.isdigit() and len(value) <= 40


def _earliest(*times: datetime | None) -> datetime | None:
    known = [t for t in times if t is not None]
    return min(known) if known else None


def merge_kueue(old: KueueInfo | None, new: KueueInfo | None) -> KueueInfo | None:
    """Field by field: the newer value where it has one; counts never go down."""
    if old is None or new is None:
        return new or old
    return KueueInfo(
        local_queue=new.local_queue or old.local_queue,
        cluster_queue=new.cluster_queue or old.cluster_queue,
        workload_name=new.workload_name or old.workload_name,
        quota_reserved_at=new.quota_reserved_at or old.quota_reserved_at,
        admitted_at=new.admitted_at or old.admitted_at,
        evictions=max(old.evictions, new.evictions),
        preemptions=max(old.preemptions, new.preemptions),
        last_eviction_reason=new.last_eviction_reason or old.last_eviction_reason,
    )


def _merge_counts(old: Mapping[str, int], new: Mapping[str, int]) -> Mapping[str, int]:
    # Counts are totals seen so far, not increments: the larger total of each reason is the truth.
    merged = dict(old)
    for reason, count in new.items():
        merged[reason] = max(merged.get(reason, 0), count)
    return merged


def merge_job(old: JobRecord | None, new: JobRecord) -> JobRecord:
    """The record to store after observing ``new`` when ``old`` was stored (None: first sight)."""
    if old is None:
        return new
    newer, older = (old, new) if is_older(new.resource_version, old.resource_version) else (new, old)

    outcome = next((r for r in (newer, older) if r.status in _OUTCOMES), None)
    if outcome is not None:
        status, reason, finished_at = outcome.status, outcome.reason, outcome.finished_at
        finished_at = finished_at or (older.finished_at if older.status is outcome.status else None)
    elif JobStatus.DELETED in (newer.status, older.status):
        status = JobStatus.DELETED
        deleted = newer if newer.status is JobStatus.DELETED else older
        reason, finished_at = deleted.reason or older.reason, deleted.finished_at or older.finished_at
    else:
        status, reason, finished_at = newer.status, newer.reason, newer.finished_at

    return replace(
        newer,
        status=status,
        reason=reason,
        finished_at=finished_at,
        created_at=newer.created_at or older.created_at,
        started_at=_earliest(newer.started_at, older.started_at),
        first_scheduled_at=_earliest(newer.first_scheduled_at, older.first_scheduled_at),
        exit_code=newer.exit_code if newer.exit_code is not None else older.exit_code,
        exit_reason=newer.exit_reason if newer.exit_code is not None else older.exit_reason,
        kueue=merge_kueue(older.kueue, newer.kueue),
        event_counts=_merge_counts(older.event_counts, newer.event_counts),
        labels=newer.labels or older.labels,
        # An owner or a parent once known stays when a later state names none (a workflow's step
        # pod takes its workflow's uid and owner, which the pod itself never carries).
        owner=newer.owner or older.owner,
        parent_uid=newer.parent_uid or older.parent_uid,
        resource_version=newer.resource_version or older.resource_version,
        attempts=max(newer.attempts, older.attempts),
        replicas=newer.replicas or older.replicas,
    )


def _pod_reason(pods: Sequence[PodRecord]) -> str | None:
    """The reason of the pod that was taken away last."""
    with_reason = [p for p in pods if p.reason is not None]
    if not with_reason:
        return None
    latest = max(
        with_reason, key=lambda p: p.deleted_at or p.finished_at or p.scheduled_at or p.created_at or _NEVER
    )
    return latest.reason


def _pod_attempts(pods: Sequence[PodRecord]) -> int:
    """Runs the pods show: operators that restart a run recreate its pods under the same names (a
    PyTorchJob's ExitCode restarts, a JobSet's restarts), so the most pods one name had is the
    number of attempts they saw."""
    seen: dict[str, int] = {}
    for pod in pods:
        seen[pod.name] = seen.get(pod.name, 0) + 1
    return max(seen.values(), default=1)


def apply_pods_to_job(job: JobRecord, pods: Sequence[PodRecord]) -> JobRecord:
    """Fill what only the pods know: exit code and reason, first scheduling, a pod-level reason,
    the start of a run whose kind records none (a JobSet), the attempts its pods show.

    The pod's reason (Evicted, Preempted) becomes the job's only when the job has none of its own and
    did not succeed: an eviction that a retry recovered from is not why a successful job ended. A job
    that was deleted before its outcome was seen ends when its last pod ended (or was deleted).
    """
    own = [p for p in pods if p.job_uid is None or p.job_uid == job.uid]
    if not own:
        return job
    decided = job.status in (JobStatus.SUCCEEDED, JobStatus.FAILED)
    exit_code, exit_reason = decide_exit(own, job_failed=job.status is JobStatus.FAILED if decided else None)
    reason = job.reason
    if reason is None and job.status is not JobStatus.SUCCEEDED:
        reason = _pod_reason(own)
    finished_at = job.finished_at
    if finished_at is None and job.status is JobStatus.DELETED:
        ends = [t for p in own if (t := p.finished_at or p.deleted_at) is not None]
        finished_at = max(ends) if ends else None
    started_at = job.started_at
    if started_at is None and job.replicas:
        started_at = _earliest(*(p.started_at for p in own))
    return replace(
        job,
        exit_code=exit_code if exit_code is not None else job.exit_code,
        exit_reason=exit_reason if exit_code is not None else job.exit_reason,
        first_scheduled_at=_earliest(job.first_scheduled_at, *(p.scheduled_at for p in own)),
        reason=reason,
        finished_at=finished_at,
        started_at=started_at,
        attempts=max(job.attempts, _pod_attempts(own)),
    )
