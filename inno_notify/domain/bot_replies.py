"""What the bot answers in a Telegram chat, and its one JSON encoding in the outbox row.

An answer is an outbox row of kind `bot_reply` (so the dispatcher, the one place that retries,
sends it within Telegram's limits), planned in the same transaction that handles the command: a
crash either loses both or keeps both. What it says is fixed when it is planned and travels in
the row's payload under MESSAGE_KEY, like domain.messages; the renderer turns it into HTML with
the template `telegram/bot_reply.html.j2`, where everything a person wrote (their Telegram first
name, the command they typed) is escaped.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from inno_notify.domain.message_json import (
    MESSAGE_KEY,
    iso,
    read_message,
    read_number,
    read_objects,
    read_required_text,
    read_text,
    read_time,
)
from inno_notify.domain.telegram_linking import LinkRefusal

__all__ = [
    "MESSAGE_KEY",
    "NAME_MAX_CHARS",
    "Reply",
    "ReplyKind",
    "RunningJob",
    "StatusFigures",
    "decode_reply",
    "encode_reply",
]

# A first name is at most 64 characters on Telegram; an unknown command is shown cut to this.
NAME_MAX_CHARS = 64
WORD_MAX_CHARS = 32
# Running jobs listed by /status at most (then "and N more").
STATUS_JOBS_MAX = 10


class ReplyKind(enum.StrEnum):
    LINKED = "linked"
    LINK_REFUSED = "link_refused"
    NOT_LINKED = "not_linked"
    HELP = "help"
    STATUS = "status"
    MUTED = "muted"
    MUTE_USAGE = "mute_usage"
    UNMUTED = "unmuted"
    FAILURES_ONLY = "failures_only"
    ALL_SUMMARIES = "all_summaries"
    NUDGES_OFF = "nudges_off"
    NUDGES_ON = "nudges_on"
    NUDGES_USAGE = "nudges_usage"
    STOPPED = "stopped"
    # To the chat a person's link moved away from (a relink from another chat).
    RELINKED_AWAY = "relinked_away"


@dataclass(frozen=True, slots=True)
class RunningJob:
    namespace: str
    name: str
    started_at: datetime | None
    gpus: float


@dataclass(frozen=True, slots=True)
class StatusFigures:
    """What /status shows: the person's running jobs and this week's GPU-hours.

    The week's figures cover the jobs that finished since `week_start`; GPU-hours are summed over
    the measured ones only and are None when none was measured (never 0 for "unknown").
    """

    week_start: datetime
    # When the figures were read (a running job's time is counted up to it).
    taken_at: datetime | None = None
    running: tuple[RunningJob, ...] = ()
    running_total: int = 0
    finished_jobs: int = 0
    measured_jobs: int = 0
    gpu_hours_held: float | None = None
    gpu_hours_used: float | None = None


@dataclass(frozen=True, slots=True)
class Reply:
    """One answer. `first_name` is the sender's Telegram first name (hostile: escaped when shown);
    `person` the directory's name of the linked user (or their e-mail)."""

    kind: ReplyKind
    first_name: str | None = None
    person: str | None = None
    refusal: LinkRefusal | None = None
    until: datetime | None = None
    unknown: str | None = None
    failures_only: bool = False
    muted_until: datetime | None = None
    channels: tuple[str, ...] = ()
    status: StatusFigures | None = None
    # A /mute or /stop that holds every channel (`all`), not only Telegram; for /help, a running
    # mute of every channel.
    everywhere: bool = False
    # The zone times are shown in (the installation's digest.timezone).
    timezone: str = "UTC"


def encode_reply(reply: Reply) -> dict[str, Any]:
    status = reply.status
    return {
        "kind": reply.kind.value,
        "first_name": _cut(reply.first_name, NAME_MAX_CHARS),
        "person": reply.person,
        "refusal": None if reply.refusal is None else reply.refusal.value,
        "until": iso(reply.until),
        "unknown": _cut(reply.unknown, WORD_MAX_CHARS),
        "failures_only": reply.failures_only,
        "muted_until": iso(reply.muted_until),
        "channels": list(reply.channels),
        "everywhere": reply.everywhere,
        "timezone": reply.timezone,
        "status": None
        if status is None
        else {
            "week_start": status.week_start.isoformat(),
            "taken_at": iso(status.taken_at),
            "running": [
                {"namespace": j.namespace, "name": j.name, "started_at": iso(j.started_at), "gpus": j.gpus}
                for j in status.running
            ],
            "running_total": status.running_total,
            "finished_jobs": status.finished_jobs,
            "measured_jobs": status.measured_jobs,
            "gpu_hours_held": status.gpu_hours_held,
            "gpu_hours_used": status.gpu_hours_used,
        },
    }


def decode_reply(payload: Mapping[str, Any]) -> Reply:
    """The reply a `bot_reply` row carries; ValueError when the payload holds none."""
    data = read_message(payload)
    try:
        kind = ReplyKind(read_required_text(data, "kind"))
        refusal = read_text(data, "refusal")
        status = data.get("status")
        channels = data.get("channels") or []
        if not isinstance(channels, list) or not all(isinstance(c, str) for c in channels):
            raise ValueError("channels: expected a list of names")
        return Reply(
            kind=kind,
            first_name=read_text(data, "first_name"),
            person=read_text(data, "person"),
            refusal=None if refusal is None else LinkRefusal(refusal),
            until=read_time(data, "until"),
            unknown=read_text(data, "unknown"),
            failures_only=bool(data.get("failures_only", False)),
            muted_until=read_time(data, "muted_until"),
            channels=tuple(channels),
            everywhere=bool(data.get("everywhere", False)),
            timezone=read_text(data, "timezone") or "UTC",
            status=None if status is None else _decode_status(status),
        )
    except (TypeError, KeyError) as exc:
        raise ValueError(f"not a bot reply: {exc}") from None


def _decode_status(data: object) -> StatusFigures:
    if not isinstance(data, Mapping):
        raise ValueError("status: expected an object")
    running = read_objects(data, "running")
    week_start = read_time(data, "week_start")
    if week_start is None:
        raise ValueError("status.week_start: missing")
    return StatusFigures(
        week_start=week_start,
        taken_at=read_time(data, "taken_at"),
        running=tuple(
            RunningJob(
                namespace=read_required_text(j, "namespace"),
                name=read_required_text(j, "name"),
                started_at=read_time(j, "started_at"),
                gpus=float(read_number(j, "gpus") or 0.0),
            )
            for j in running
        ),
        running_total=int(read_number(data, "running_total") or 0),
        finished_jobs=int(read_number(data, "finished_jobs") or 0),
        measured_jobs=int(read_number(data, "measured_jobs") or 0),
        gpu_hours_held=read_number(data, "gpu_hours_held"),
        gpu_hours_used=read_number(data, "gpu_hours_used"),
    )


def _cut(value: str | None, limit: int) -> str | None:
    return None if value is None else value[:limit]
