"""What a person's own page (GET /me) shows: their recent runs, their open nudges, their preferences.

The page is for one person, opened by the signed link every message to them carries (domain.
page_links, kind `me`): the runs they own of the last PERSONAL_DAYS days, of every workload kind
(a workflow's steps are shown by their workflow), each with its status, its GPU-hours held and
used, the advice it got and whether it followed the advice its family's previous run was given
(domain.adoption); the idle-GPU nudges about their workloads that still run; and their preferences
(domain.preferences) as the forms on the page change them.

A form of the page asks for one change (`PageChange`); `changes_of` turns it into the changes of
the preference model, the same ones the Telegram commands and the API make, recorded as from
`Via.PAGE`. Pure: the time is passed in.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from inno_notify.domain.live import IdleFinding
from inno_notify.domain.model import Channel, DirectoryUser, NotifyMode
from inno_notify.domain.preferences import Preferences, mute

__all__ = [
    "MUTE_CHOICES",
    "PAGE_CHANNELS",
    "PERSONAL_DAYS",
    "PERSONAL_RUNS_MAX",
    "PageChange",
    "PageOpening",
    "PersonalPage",
    "PersonalRun",
    "changes_of",
]

PERSONAL_DAYS = 30
# Runs one page lists at most (newest first); more are counted, and the API's job list has them all.
PERSONAL_RUNS_MAX = 200
# The mutes a form offers: label -> hours (the Telegram bot's /mute takes any duration up to a week).
MUTE_CHOICES: Mapping[str, float] = {"1h": 1, "8h": 8, "1d": 24, "3d": 72, "7d": 168}
# The channels the page's form offers (a person's `channels` preference), in the form's order.
PAGE_CHANNELS = (Channel.EMAIL.value, Channel.SLACK.value, Channel.TELEGRAM.value)


@dataclass(frozen=True, slots=True)
class PageOpening:
    """How the page was opened, which decides what it may show: the expiry of the link it was
    opened with (None: a token; its links to run pages then are plain), the query its forms post
    to and their CSRF token (None: no forms, for a viewer's token), and what the last form did."""

    email: str
    expires: int | None = None
    action: str | None = None
    csrf: str | None = None
    notice: str | None = None


@dataclass(frozen=True, slots=True)
class PersonalRun:
    """One run of the person's, as the page lists it."""

    cluster: str
    uid: str
    namespace: str
    name: str
    kind: str
    status: str
    reason: str | None
    created_at: datetime | None
    finished_at: datetime | None
    gpus: float
    gpu_minutes_held: float | None
    gpu_minutes_used: float | None
    advice: tuple[str, ...]
    # Whether the run followed its family's previous advice (domain.adoption.Outcome's value), and
    # the GPU-hours that freed; None: not judged (no earlier run, not measured yet).
    adoption: str | None = None
    gpu_hours_freed: float | None = None


@dataclass(frozen=True, slots=True)
class PersonalPage:
    """Everything the personal page of `email` shows, read at `now`."""

    email: str
    now: datetime
    user: DirectoryUser | None
    preferences: Preferences | None
    runs: tuple[PersonalRun, ...]
    more_runs: bool
    nudges: tuple[IdleFinding, ...]


class PageChange(enum.StrEnum):
    """What one form of the page asks for."""

    NOTIFY = "notify"  # value: always | failure
    MUTE = "mute"  # value: one of MUTE_CHOICES
    UNMUTE = "unmute"
    NUDGES = "nudges"  # value: on | off
    EMAILS = "emails"  # value: on | off
    CHANNELS = "channels"  # the channels ticked


_SWITCH = {"on": True, "off": False}


def changes_of(
    change: PageChange, value: str | None, channels: tuple[str, ...], now: datetime
) -> dict[str, Any]:
    """The preference changes a form asks for; ValueError for a value the form does not offer."""
    if change is PageChange.NOTIFY:
        if value not in (NotifyMode.ALWAYS.value, NotifyMode.FAILURE.value):
            raise ValueError("notify: always or failure")
        return {"notify": NotifyMode(value)}
    if change is PageChange.MUTE:
        if value is None or value not in MUTE_CHOICES:
            raise ValueError(f"mute: one of {', '.join(MUTE_CHOICES)}")
        return mute(now + timedelta(hours=MUTE_CHOICES[value]), None)
    if change is PageChange.UNMUTE:
        return {"muted_until": None}
    if change in (PageChange.NUDGES, PageChange.EMAILS):
        if value not in _SWITCH:
            raise ValueError(f"{change.value}: on or off")
        return {change.value: _SWITCH[value]}
    if not channels or not set(channels) <= set(PAGE_CHANNELS):
        raise ValueError(f"channels: at least one of {', '.join(PAGE_CHANNELS)}")
    return {"channels": tuple(c for c in PAGE_CHANNELS if c in channels)}
