"""Converts domain records to table rows and back.

Kept apart from the queries so that the one place that knows how a dataclass maps to columns
and JSON is easy to check against the model: every field goes in, every field comes back.
JSON detail holds times as ISO-8601 text in UTC and tuples as lists.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import RowMapping

from inno_notify.domain.model import (
    Channel,
    ContainerRecord,
    DeliveryStatus,
    DirectoryUser,
    GpuUsage,
    JobRecord,
    JobStatus,
    KueueInfo,
    Link,
    MissingFigure,
    MissingReason,
    Notification,
    NotificationKind,
    NotifyMode,
    PodRecord,
    PodUsage,
    Recommendation,
    RecommendationKind,
    Requested,
    Severity,
    Team,
    TerminatedState,
    Unit,
    Usage,
    WorkloadKind,
)

Row = RowMapping
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.astimezone(UTC).isoformat()


def _dt(value: str | None) -> datetime | None:
    return None if value is None else parse_iso(value)


def parse_iso(value: str) -> datetime:
    """An ISO-8601 time with an offset, as an aware UTC datetime (naive text is refused).

    Raises ValueError for anything else, a time that leaves datetime's range in UTC included
    (0001-01-01T00:00:00+01:00)."""
    parsed = datetime.fromisoformat(value)
    if parsed.tzinfo is None:
        raise ValueError(f"time without a zone: {value!r}")
    try:
        return parsed.astimezone(UTC)
    except OverflowError as exc:
        raise ValueError(f"time out of range in UTC: {value!r}") from exc


# --- jobs -------------------------------------------------------------------------------------


def _requested_json(req: Requested) -> dict[str, Any]:
    return {
        "gpus": req.gpus,
        "cpu_cores": req.cpu_cores,
        "memory_bytes": req.memory_bytes,
        "cpu_limit_cores": req.cpu_limit_cores,
        "memory_limit_bytes": req.memory_limit_bytes,
        "extended": dict(req.extended),
        "parallelism": req.parallelism,
        "completions": req.completions,
    }


def _requested(data: Mapping[str, Any]) -> Requested:
    return Requested(
        gpus=data["gpus"],
        cpu_cores=data["cpu_cores"],
        memory_bytes=data["memory_bytes"],
        cpu_limit_cores=data["cpu_limit_cores"],
        memory_limit_bytes=data["memory_limit_bytes"],
        extended=dict(data["extended"]),
        parallelism=data["parallelism"],
        completions=data["completions"],
    )


def _kueue_json(info: KueueInfo | None) -> dict[str, Any] | None:
    if info is None:
        return None
    return {
        "local_queue": info.local_queue,
        "cluster_queue": info.cluster_queue,
        "workload_name": info.workload_name,
        "quota_reserved_at": _iso(info.quota_reserved_at),
        "admitted_at": _iso(info.admitted_at),
        "evictions": info.evictions,
        "preemptions": info.preemptions,
        "last_eviction_reason": info.last_eviction_reason,
    }


def _kueue(data: Mapping[str, Any] | None) -> KueueInfo | None:
    if data is None:
        return None
    return KueueInfo(
        local_queue=data["local_queue"],
        cluster_queue=data["cluster_queue"],
        workload_name=data["workload_name"],
        quota_reserved_at=_dt(data["quota_reserved_at"]),
        admitted_at=_dt(data["admitted_at"]),
        evictions=data["evictions"],
        preemptions=data["preemptions"],
        last_eviction_reason=data["last_eviction_reason"],
    )


def job_sort_at(job: JobRecord) -> datetime:
    """The job list's sort key: when it finished, else when it was created, else the epoch."""
    return job.finished_at or job.created_at or EPOCH


def job_to_row(job: JobRecord) -> dict[str, Any]:
    return {
        "cluster": job.cluster,
        "uid": job.uid,
        "namespace": job.namespace,
        "name": job.name,
        "kind": job.kind.value,
        "status": job.status.value,
        "reason": job.reason,
        "owner": job.owner,
        "team": job.team,
        "notify": job.notify.value,
        "channels": None if job.channels is None else list(job.channels),
        "group_key": job.group_key,
        "family": job.family,
        "created_at": job.created_at,
        "started_at": job.started_at,
        "finished_at": job.finished_at,
        "first_scheduled_at": job.first_scheduled_at,
        "queued_until": job.queued_until,
        "sort_at": job_sort_at(job),
        "exit_code": job.exit_code,
        "exit_reason": job.exit_reason,
        "gpus_requested": job.requested.gpus,
        "cpu_requested_cores": job.requested.cpu_cores,
        "memory_requested_bytes": job.requested.memory_bytes,
        "requested": _requested_json(job.requested),
        "kueue": _kueue_json(job.kueue),
        "labels": dict(job.labels),
        "event_counts": dict(job.event_counts),
        "resource_version": job.resource_version,
        "links": [{"title": link.title, "url": link.url} for link in job.links] or None,
    }


def job_from_row(row: Row) -> JobRecord:
    return JobRecord(
        cluster=row["cluster"],
        uid=row["uid"],
        namespace=row["namespace"],
        name=row["name"],
        kind=WorkloadKind(row["kind"]),
        status=JobStatus(row["status"]),
        reason=row["reason"],
        owner=row["owner"],
        team=row["team"],
        notify=NotifyMode(row["notify"]),
        channels=None if row["channels"] is None else tuple(row["channels"]),
        group_key=row["group_key"],
        family=row["family"],
        created_at=row["created_at"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        first_scheduled_at=row["first_scheduled_at"],
        exit_code=row["exit_code"],
        exit_reason=row["exit_reason"],
        requested=_requested(row["requested"]),
        kueue=_kueue(row["kueue"]),
        labels=dict(row["labels"]),
        event_counts=dict(row["event_counts"]),
        resource_version=row["resource_version"],
        links=tuple(Link(item["title"], item["url"]) for item in row["links"] or ()),
    )


# --- pods -------------------------------------------------------------------------------------


def _terminated_json(state: TerminatedState | None) -> dict[str, Any] | None:
    if state is None:
        return None
    return {
        "exit_code": state.exit_code,
        "reason": state.reason,
        "signal": state.signal,
        "message": state.message,
        "started_at": _iso(state.started_at),
        "finished_at": _iso(state.finished_at),
    }


def _terminated(data: Mapping[str, Any] | None) -> TerminatedState | None:
    if data is None:
        return None
    return TerminatedState(
        exit_code=data["exit_code"],
        reason=data["reason"],
        signal=data["signal"],
        message=data["message"],
        started_at=_dt(data["started_at"]),
        finished_at=_dt(data["finished_at"]),
    )


def _container_json(c: ContainerRecord) -> dict[str, Any]:
    return {
        "name": c.name,
        "init": c.init,
        "sidecar": c.sidecar,
        "requests": dict(c.requests),
        "limits": dict(c.limits),
        "started_at": _iso(c.started_at),
        "terminated": _terminated_json(c.terminated),
        "last_terminated": _terminated_json(c.last_terminated),
        "restart_count": c.restart_count,
    }


def _container(data: Mapping[str, Any]) -> ContainerRecord:
    return ContainerRecord(
        name=data["name"],
        init=data["init"],
        sidecar=data["sidecar"],
        requests=dict(data["requests"]),
        limits=dict(data["limits"]),
        started_at=_dt(data["started_at"]),
        terminated=_terminated(data["terminated"]),
        last_terminated=_terminated(data["last_terminated"]),
        restart_count=data["restart_count"],
    )


def pod_to_row(pod: PodRecord) -> dict[str, Any]:
    return {
        "cluster": pod.cluster,
        "uid": pod.uid,
        "namespace": pod.namespace,
        "name": pod.name,
        "job_uid": pod.job_uid,
        "phase": pod.phase,
        "created_at": pod.created_at,
        "node": pod.node,
        "reason": pod.reason,
        "scheduled_at": pod.scheduled_at,
        "started_at": pod.started_at,
        "finished_at": pod.finished_at,
        "deleted_at": pod.deleted_at,
        "gpu_equivalents": pod.gpu_equivalents,
        "containers": [_container_json(c) for c in pod.containers],
        "completion_index": pod.completion_index,
        "resource_version": pod.resource_version,
    }


def pod_from_row(row: Row) -> PodRecord:
    return PodRecord(
        cluster=row["cluster"],
        uid=row["uid"],
        namespace=row["namespace"],
        name=row["name"],
        job_uid=row["job_uid"],
        phase=row["phase"],
        created_at=row["created_at"],
        node=row["node"],
        reason=row["reason"],
        scheduled_at=row["scheduled_at"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        deleted_at=row["deleted_at"],
        gpu_equivalents=row["gpu_equivalents"],
        containers=tuple(_container(c) for c in row["containers"]),
        completion_index=row["completion_index"],
        resource_version=row["resource_version"],
    )


# --- usage and recommendations ----------------------------------------------------------------

_GPU_FIELDS = (
    "pod_uid",
    "pod_name",
    "gpu",
    "uuid",
    "model",
    "mig_profile",
    "held_minutes",
    "util_mean_percent",
    "util_max_percent",
    "fb_used_peak_bytes",
    "fb_total_bytes",
    "shared",
    "samples",
    "source",
    "sharing",
)
_POD_USAGE_FIELDS = (
    "pod_uid",
    "pod_name",
    "memory_peak_bytes",
    "cpu_cores_mean",
    "cpu_cores_p95",
    "cpu_throttled_seconds",
    "samples",
)
# Job-level figures kept as real columns (SQL aggregation reads them).
USAGE_COLUMNS = (
    "gpu_minutes",
    "used_gpu_minutes",
    "gpus_idle",
    "idle_gpu_minutes",
    "gpu_util_mean_percent",
    "gpu_memory_peak_bytes",
    "memory_peak_bytes",
    "cpu_cores_mean",
    "cpu_cores_p95",
    "collected_at",
)


def usage_to_row(cluster: str, job_uid: str, usage: Usage) -> dict[str, Any]:
    row: dict[str, Any] = {"cluster": cluster, "job_uid": job_uid}
    row.update({name: getattr(usage, name) for name in USAGE_COLUMNS})
    row["detail"] = {
        "gpus": [{f: getattr(g, f) for f in _GPU_FIELDS} for g in usage.gpus],
        "pods": [{f: getattr(p, f) for f in _POD_USAGE_FIELDS} for p in usage.pods],
        "missing": [
            {"figure": m.figure, "reason": m.reason.value, "detail": m.detail} for m in usage.missing
        ],
    }
    return row


def usage_from_row(row: Mapping[Any, Any]) -> Usage:
    detail = row["detail"]
    return Usage(
        **{name: row[name] for name in USAGE_COLUMNS},
        gpus=tuple(GpuUsage(**g) for g in detail["gpus"]),
        pods=tuple(PodUsage(**p) for p in detail["pods"]),
        missing=tuple(
            MissingFigure(figure=m["figure"], reason=MissingReason(m["reason"]), detail=m["detail"])
            for m in detail["missing"]
        ),
    )


def recommendation_to_row(cluster: str, job_uid: str, position: int, rec: Recommendation) -> dict[str, Any]:
    return {
        "cluster": cluster,
        "job_uid": job_uid,
        "position": position,
        "kind": rec.kind.value,
        "severity": rec.severity.value,
        "amounts": {"current": rec.current, "suggested": rec.suggested},
        "unit": rec.unit.value,
        "message": rec.message,
        "waste_gpu_minutes": rec.waste_gpu_minutes,
        "waste_gib_hours": rec.waste_gib_hours,
        "waste_core_hours": rec.waste_core_hours,
        "field_path": rec.field_path,
        "evidence": dict(rec.evidence),
    }


def recommendation_from_row(row: Row) -> Recommendation:
    return Recommendation(
        kind=RecommendationKind(row["kind"]),
        severity=Severity(row["severity"]),
        current=row["amounts"]["current"],
        suggested=row["amounts"]["suggested"],
        unit=Unit(row["unit"]),
        message=row["message"],
        waste_gpu_minutes=row["waste_gpu_minutes"],
        waste_gib_hours=row["waste_gib_hours"],
        waste_core_hours=row["waste_core_hours"],
        field_path=row["field_path"],
        evidence=dict(row["evidence"]),
    )


# --- outbox -----------------------------------------------------------------------------------


def notification_to_row(n: Notification) -> dict[str, Any]:
    """A new outbox row; the database assigns the id, and next_attempt_at starts at due_at if unset."""
    return {
        "dedup_key": n.dedup_key,
        "kind": n.kind.value,
        "channel": n.channel.value,
        "recipient": n.recipient,
        "status": n.status.value,
        "cluster": n.cluster,
        "job_uid": n.job_uid,
        "group_key": n.group_key,
        "payload": dict(n.payload),
        "created_at": n.created_at,
        "due_at": n.due_at,
        "next_attempt_at": n.next_attempt_at
        if n.next_attempt_at is not None or n.status is not DeliveryStatus.PENDING
        else n.due_at,
        "attempts": n.attempts,
        "last_error": n.last_error,
        "provider_message_id": n.provider_message_id,
        "sent_at": n.sent_at,
    }


def notification_from_row(row: Row) -> Notification:
    return Notification(
        id=row["id"],
        dedup_key=row["dedup_key"],
        kind=NotificationKind(row["kind"]),
        channel=Channel(row["channel"]),
        recipient=row["recipient"],
        status=DeliveryStatus(row["status"]),
        cluster=row["cluster"],
        job_uid=row["job_uid"],
        group_key=row["group_key"],
        payload=dict(row["payload"]),
        created_at=row["created_at"],
        due_at=row["due_at"],
        next_attempt_at=row["next_attempt_at"],
        attempts=row["attempts"],
        last_error=row["last_error"],
        provider_message_id=row["provider_message_id"],
        sent_at=row["sent_at"],
    )


# --- directory --------------------------------------------------------------------------------


def user_to_row(user: DirectoryUser) -> dict[str, Any]:
    return {
        "email": user.email,
        "name": user.name,
        "slack_user_id": user.slack_user_id,
        "telegram_chat_id": user.telegram_chat_id,
        "channels": list(user.channels),
    }


def user_from_row(row: Row) -> DirectoryUser:
    return DirectoryUser(
        email=row["email"],
        name=row["name"],
        slack_user_id=row["slack_user_id"],
        telegram_chat_id=row["telegram_chat_id"],
        channels=tuple(row["channels"]),
    )


def team_to_row(team: Team) -> dict[str, Any]:
    return {
        "name": team.name,
        "namespaces": list(team.namespaces),
        "leads": list(team.leads),
        "digest_channels": list(team.digest_channels),
        "slack_channel": team.slack_channel,
        "notify_unowned": team.notify_unowned,
    }


def team_from_row(row: Row) -> Team:
    return Team(
        name=row["name"],
        namespaces=tuple(row["namespaces"]),
        leads=tuple(row["leads"]),
        digest_channels=tuple(row["digest_channels"]),
        slack_channel=row["slack_channel"],
        notify_unowned=row["notify_unowned"],
    )
