"""Domain records (and the store's job rows) to the API's resources (resources.py), field for field.

One function per resource, returning the resource's TypedDict: a plain dict that orjson encodes
(datetimes as RFC 3339 in UTC with a `Z`, enums as their values). mypy holds each literal to its
class, so a field cannot be added on one side only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from inno_notify.adapters.db.recommendation_queries import JobRecommendation
from inno_notify.adapters.db.usage_queries import UsageGroup
from inno_notify.api import resources
from inno_notify.domain.model import Channel, DirectoryUser, Notification, Recommendation

JSON_OPTIONS = orjson.OPT_UTC_Z | orjson.OPT_NON_STR_KEYS


def dumps(document: object) -> bytes:
    return orjson.dumps(document, option=JSON_OPTIONS)


def recommendation(rec: Recommendation) -> resources.Recommendation:
    return {
        "kind": rec.kind,
        "severity": rec.severity,
        "current": rec.current,
        "suggested": rec.suggested,
        "unit": rec.unit,
        "waste_gpu_minutes": rec.waste_gpu_minutes,
        "message": rec.message,
    }


def job_row(row: Sequence[Any], recs: list[resources.Recommendation]) -> resources.Job:
    """The Job resource from a row of the store's job page (job_details.PAGE_COLUMNS) and its
    recommendations (job_details.RECOMMENDATION_FIELDS each, the keys of resources.Recommendation),
    without building domain records: on the list endpoint that cost most of a page's CPU
    (tests/api/test_job_rows.py holds the result to the records' own definitions)."""
    (
        cluster,
        uid,
        namespace,
        name,
        owner,
        team,
        status,
        reason,
        exit_code,
        exit_reason,
        created_at,
        started_at,
        finished_at,
        first_scheduled_at,
        gpus,
        cpu_cores,
        memory_bytes,
        _sort_at,
        usage_uid,
        gpu_minutes,
        used_gpu_minutes,
        gpus_idle,
        util_mean,
        gpu_memory_peak,
        memory_peak,
        cpu_p95,
        missing,
        _recommendations,
    ) = row
    return {
        "uid": uid,
        "cluster": cluster,
        "namespace": namespace,
        "name": name,
        "owner": owner,
        "team": team,
        "status": status,
        "reason": reason,
        "exit_code": exit_code,
        "exit_reason": exit_reason,
        "created_at": created_at,
        "started_at": started_at,
        "finished_at": finished_at,
        # JobRecord.queue_seconds and runtime_seconds, on the row's values.
        "queue_seconds": None
        if created_at is None or first_scheduled_at is None
        else max(0.0, (first_scheduled_at - created_at).total_seconds()),
        "runtime_seconds": None
        if started_at is None or finished_at is None
        else max(0.0, (finished_at - started_at).total_seconds()),
        "requested": {"gpus": gpus, "cpu_cores": cpu_cores, "memory_bytes": memory_bytes},
        "usage": None
        if usage_uid is None
        else {
            "gpu_minutes": gpu_minutes,
            "used_gpu_minutes": used_gpu_minutes,
            "gpus_idle": gpus_idle,
            "gpu_util_mean_percent": util_mean,
            "gpu_memory_peak_bytes": gpu_memory_peak,
            "memory_peak_bytes": memory_peak,
            "cpu_cores_p95": cpu_p95,
            "missing": [{"figure": m["figure"], "reason": m["reason"]} for m in missing] if missing else [],
        },
        "recommendations": recs,
    }


def job_recommendation(item: JobRecommendation) -> resources.JobRecommendation:
    rec = item.recommendation
    return {
        "id": item.id,
        "job": {
            "cluster": item.cluster,
            "uid": item.job_uid,
            "namespace": item.namespace,
            "name": item.name,
            "owner": item.owner,
            "team": item.team,
            "finished_at": item.finished_at,
        },
        **recommendation(rec),
        "waste_gib_hours": rec.waste_gib_hours,
        "waste_core_hours": rec.waste_core_hours,
        "field_path": rec.field_path,
    }


def usage_group(group: UsageGroup) -> resources.UsageGroup:
    return {
        "group": group.key,
        "jobs": group.jobs,
        "measured_jobs": group.measured_jobs,
        "gpu_minutes": group.gpu_minutes,
        "used_gpu_minutes": group.used_gpu_minutes,
        "idle_gpu_minutes": group.idle_gpu_minutes,
        "memory_jobs": group.memory_jobs,
        "memory_requested_bytes": group.memory_requested_bytes,
        "memory_peak_bytes": group.memory_peak_bytes,
    }


def notification(n: Notification) -> resources.Notification:
    if n.id is None:
        raise ValueError("a notification without an id was not read from the store")
    return {
        "id": n.id,
        "kind": n.kind,
        "channel": n.channel,
        "recipient": n.recipient,
        "status": n.status,
        "cluster": n.cluster,
        "job_uid": n.job_uid,
        "group_key": n.group_key,
        "created_at": n.created_at,
        "due_at": n.due_at,
        "next_attempt_at": n.next_attempt_at,
        "attempts": n.attempts,
        "last_error": n.last_error,
        "provider_message_id": n.provider_message_id,
        "sent_at": n.sent_at,
    }


def user(u: DirectoryUser) -> resources.User:
    return {
        "email": u.email,
        "name": u.name,
        "slack_user_id": u.slack_user_id,
        "telegram_chat_id": u.telegram_chat_id,
        "channels": [Channel(c) for c in u.channels],
    }
