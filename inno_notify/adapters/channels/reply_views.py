"""The view model of the answers to chat commands, on Telegram, Slack and Mattermost (domain.bot_replies).

Like views.py for a job: every time and figure already spelt for humans, so that the templates
(`telegram/bot_reply.html.j2`, `slack/bot_reply.mrkdwn.j2`, overridable) need no arithmetic.
Strings are NOT escaped here: the template's environment escapes each one, which is what keeps a
first name like `<b>` or `&amp;` from changing a reply.
"""

from __future__ import annotations

import zoneinfo
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo

from inno_notify.adapters.channels import figures
from inno_notify.domain.bot_replies import Reply, StatusFigures
from inno_notify.domain.telegram_linking import LinkRefusal

__all__ = ["BotReplyView", "StatusView", "channel_names", "when"]

_REFUSAL_TEXT = {
    LinkRefusal.FORGED: "it is not one of our links (perhaps it was copied incompletely).",
    LinkRefusal.EXPIRED: "it has expired.",
    LinkRefusal.USED: "it has been used already.",
    LinkRefusal.SUPERSEDED: "a newer link or /stop for this person has replaced it.",
    LinkRefusal.UNKNOWN_USER: "it belongs to someone who is no longer in the directory.",
}
_CHANNEL_NAMES = {"email": "e-mail", "slack": "Slack", "telegram": "Telegram", "mattermost": "Mattermost"}


@dataclass(frozen=True, slots=True)
class RunningJobView:
    ref: str  # namespace/name
    since: str  # "running 3 h 12 min"
    gpus: str  # "4 GPUs"


@dataclass(frozen=True, slots=True)
class StatusView:
    week_start: str
    running: tuple[RunningJobView, ...]
    more_running: int
    finished_jobs: int
    gpu_hours_held: str
    gpu_hours_used: str
    measured_note: str  # "" when every finished job was measured


@dataclass(frozen=True, slots=True)
class BotReplyView:
    kind: str
    first_name: str | None
    person: str | None
    refusal: str
    until: str
    unknown: str | None
    failures_only: bool
    muted_until: str | None
    channels: str
    status: StatusView | None
    everywhere: bool = False

    @classmethod
    def of(cls, reply: Reply) -> BotReplyView:
        zone = _zone(reply.timezone)
        first_name = " ".join(reply.first_name.split()) if reply.first_name else None
        return cls(
            kind=reply.kind.value,
            first_name=first_name or None,
            person=reply.person,
            refusal=_REFUSAL_TEXT.get(reply.refusal, "") if reply.refusal is not None else "",
            until=_when(reply.until, zone) if reply.until is not None else "",
            unknown=reply.unknown,
            failures_only=reply.failures_only,
            muted_until=_when(reply.muted_until, zone) if reply.muted_until is not None else None,
            channels=channel_names(reply.channels),
            status=None if reply.status is None else _status(reply.status, zone),
            everywhere=reply.everywhere,
        )


def _status(status: StatusFigures, zone: tzinfo) -> StatusView:
    now = status.taken_at
    measured = status.measured_jobs
    note = ""
    if status.finished_jobs and measured < status.finished_jobs:
        note = f"{measured} of {status.finished_jobs} finished jobs measured"
    return StatusView(
        week_start=_when(status.week_start, zone),
        running=tuple(
            RunningJobView(
                ref=f"{job.namespace}/{job.name}",
                since=f"running {figures.duration((now - job.started_at).total_seconds())}"
                if now is not None and job.started_at is not None and job.started_at <= now
                else "running",
                gpus=figures.gpus(job.gpus) if job.gpus else "no GPU",
            )
            for job in status.running
        ),
        more_running=max(0, status.running_total - len(status.running)),
        finished_jobs=status.finished_jobs,
        gpu_hours_held=_hours(status.gpu_hours_held),
        gpu_hours_used=_hours(status.gpu_hours_used),
        measured_note=note,
    )


def channel_names(channels: tuple[str, ...]) -> str:
    """ "e-mail, Slack": channels as a person reads them."""
    return ", ".join(_CHANNEL_NAMES.get(c, c) for c in channels)


def when(moment: datetime, timezone: str) -> str:
    """A moment as the bot says it, in the zone named `timezone` (UTC when it is no zone)."""
    return _when(moment, _zone(timezone))


def _hours(value: float | None) -> str:
    return figures.not_available(None) if value is None else f"{figures.number(value)} GPU-h"


def _when(moment: datetime, zone: tzinfo) -> str:
    local = moment.astimezone(zone)
    return f"{local:%a %d %b, %H:%M} ({getattr(zone, 'key', 'UTC')})"


def _zone(name: str) -> tzinfo:
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return UTC
