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
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from inno_notify.domain.message_json import MESSAGE_KEY, decode, encode, read_message
from inno_notify.domain.telegram_linking import LinkRefusal

__all__ = [
    "MESSAGE_KEY",
    "NAME_MAX_CHARS",
    "HomeAdvice",
    "HomeRun",
    "HomeSnapshot",
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
# Runs and pieces of open advice a Slack App Home tab shows at most.
HOME_RUNS_MAX = 10
HOME_ADVICE_MAX = 5


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


@dataclass(frozen=True, slots=True)
class HomeRun:
    """One of the person's latest runs, as their Slack App Home tab lists it."""

    namespace: str
    name: str
    status: str
    finished_at: datetime | None
    gpu_hours_held: float | None
    gpu_hours_used: float | None


@dataclass(frozen=True, slots=True)
class HomeAdvice:
    """Open advice (domain.rightsizing) for the next run of one of the person's jobs."""

    namespace: str
    name: str
    message: str


@dataclass(frozen=True, slots=True)
class HomeSnapshot:
    """What a person's Slack App Home tab shows: their latest runs (newest first), open advice,
    and their preferences as they stand (the directory entry with their own changes)."""

    person: str
    runs: tuple[HomeRun, ...]
    advice: tuple[HomeAdvice, ...]
    channels: tuple[str, ...]
    failures_only: bool
    nudges: bool
    muted_until: datetime | None = None
    muted_everywhere: bool = False
    timezone: str = "UTC"


def encode_reply(reply: Reply) -> dict[str, Any]:
    # What a person typed is kept only as long as it is ever shown.
    cut = replace(
        reply,
        first_name=_cut(reply.first_name, NAME_MAX_CHARS),
        unknown=_cut(reply.unknown, WORD_MAX_CHARS),
    )
    encoded: dict[str, Any] = encode(cut)
    return encoded


def decode_reply(payload: Mapping[str, Any]) -> Reply:
    """The reply a `bot_reply` row carries; ValueError when the payload holds none."""
    try:
        return decode(Reply, read_message(payload))
    except (TypeError, KeyError) as exc:
        raise ValueError(f"not a bot reply: {exc}") from None


def _cut(value: str | None, limit: int) -> str | None:
    return None if value is None else value[:limit]
