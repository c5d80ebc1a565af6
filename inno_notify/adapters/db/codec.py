"""Converts domain records to table rows and back, each through its RowCodec (json_codec.py).

A record's field is the column of the same name, and a JSON column's shape is the field's domain
type, so nothing here repeats a dataclass field by field. What is left is what the tables add to
the records: the job list's sort key, the end of its queue wait and the request columns copied
out of `requested` for SQL, the JSON objects that hold fields without a column of their own (a
usage's per-GPU detail, a recommendation's amounts), the outbox's first attempt time, and the
address of an outbox row that a release before migration 0020 wrote (in its payload).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import RowMapping

from inno_notify.adapters.db import tables
from inno_notify.adapters.db.json_codec import RowCodec, parse_iso
from inno_notify.domain.model import (
    DeliveryStatus,
    DirectoryUser,
    JobRecord,
    Notification,
    PodRecord,
    RecipientAddress,
    Recommendation,
    Team,
    Usage,
)

__all__ = ["EPOCH", "Row", "parse_iso"]

Row = RowMapping
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

_JOBS = RowCodec(JobRecord, tables.jobs)
_PODS = RowCodec(PodRecord, tables.pods)
# Usage: the job-level figures are real columns (SQL aggregates them); the rest is `detail`.
_USAGE = RowCodec(Usage, tables.usage, rest="detail")
# A recommendation's two amounts share one JSON column (a bare JSON scalar would not survive
# SQLite's NUMERIC affinity, tables.py).
_RECOMMENDATIONS = RowCodec(Recommendation, tables.recommendations, rest="amounts")
_OUTBOX = RowCodec(Notification, tables.outbox)
_USERS = RowCodec(DirectoryUser, tables.users)
_TEAMS = RowCodec(Team, tables.teams)

# Job-level usage figures kept as real columns.
USAGE_COLUMNS = _USAGE.columns

# The conversions that add nothing to their RowCodec's.
job_from_row = _JOBS.from_row
pod_to_row = _PODS.to_row
pod_from_row = _PODS.from_row
usage_from_row = _USAGE.from_row
recommendation_from_row = _RECOMMENDATIONS.from_row
user_to_row = _USERS.to_row
user_from_row = _USERS.from_row
team_to_row = _TEAMS.to_row
team_from_row = _TEAMS.from_row


def job_sort_at(job: JobRecord) -> datetime:
    """The job list's sort key: when it finished, else when it was created, else the epoch."""
    return job.finished_at or job.created_at or EPOCH


def job_to_row(job: JobRecord) -> dict[str, Any]:
    row = _JOBS.to_row(job)
    row["sort_at"] = job_sort_at(job)
    row["queued_until"] = job.queued_until  # derived, stored for the API's queue wait and the trend
    row["gpus_requested"] = job.requested.gpus
    row["cpu_requested_cores"] = job.requested.cpu_cores
    row["memory_requested_bytes"] = job.requested.memory_bytes
    row["links"] = row["links"] or None  # most jobs have none: no JSON to store
    return row


def usage_to_row(cluster: str, job_uid: str, usage: Usage) -> dict[str, Any]:
    return {"cluster": cluster, "job_uid": job_uid, **_USAGE.to_row(usage)}


def recommendation_to_row(cluster: str, job_uid: str, position: int, rec: Recommendation) -> dict[str, Any]:
    return {"cluster": cluster, "job_uid": job_uid, "position": position, **_RECOMMENDATIONS.to_row(rec)}


def notification_from_row(row: Row) -> Notification:
    n = _OUTBOX.from_row(row)
    if row["address"] is None:
        # Planned by a release before migration 0020 (an old leader during a rolling upgrade, which
        # names no address): where it goes is in its payload still.
        return replace(n, address=legacy_address(n.payload))
    return n


_INTEGER = re.compile(r"-?[0-9]+")


def legacy_address(payload: Mapping[str, object]) -> RecipientAddress:
    """The address a release before migration 0020 wrote into a row's payload, read as that
    release's dispatcher read it (and as the migration moved it); the empty address if none."""
    chat = payload.get("telegram_chat_id")
    if isinstance(chat, str) and _INTEGER.fullmatch(chat):
        chat = int(chat)
    epoch = payload.get("telegram_link_epoch", 0) if payload.get("telegram_linkable") is True else None
    return RecipientAddress(
        name=_text(payload.get("name")),
        telegram_chat_id=chat if isinstance(chat, int) and not isinstance(chat, bool) else None,
        slack_user_id=_text(payload.get("slack_user_id")),
        slack_channel=_text(payload.get("slack_channel")),
        telegram_link_epoch=epoch if isinstance(epoch, int) and not isinstance(epoch, bool) else None,
    )


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def notification_to_row(n: Notification) -> dict[str, Any]:
    """A new outbox row; the database assigns the id, and next_attempt_at starts at due_at if unset."""
    row = _OUTBOX.to_row(n)
    del row["id"]
    if n.next_attempt_at is None and n.status is DeliveryStatus.PENDING:
        row["next_attempt_at"] = n.due_at
    return row
