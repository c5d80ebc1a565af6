"""Slack's side of self-service: which person a Slack user is, and what they asked for.

The commands are every chat's (domain.chat_commands). A person reaches them on Slack as a slash
command (`/inno mute 2`: the text "mute 2"), as a direct message to the app ("status", "/status"),
or with a button of the app's Home tab (`ACTIONS`: each button is one command, so it changes
exactly what typing it would). A Slack chat speaks for Slack: `mute 2` holds Slack only, unless
the person writes `all`.

The Slack user is the directory user whose (effective) `slack_user_id` it is; a directory user
with none is found by the e-mail Slack's own profile gives for that user id (what delivery looks
them up by: `users.lookupByEmail`), and only while they have no other id. Never by a display name,
which anyone can choose. Anyone else gets a polite "not known" and changes nothing.

Pure: the caller passes the directory (with preferences applied) and `now`.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from inno_notify.domain.chat_commands import Command, CommandName, Decision, answer_in_zone, read_command
from inno_notify.domain.delivery import Mute
from inno_notify.domain.model import Channel, DirectoryUser

__all__ = ["ACTIONS", "SlackRequest", "SlackRequestKind", "decide", "user_of_slack"]

# The App Home buttons (action_id → the command it gives).
ACTIONS: Mapping[str, Command] = {
    "inno_failures": Command(CommandName.FAILURES),
    "inno_all": Command(CommandName.ALL),
    "inno_nudges_off": Command(CommandName.NUDGES, "off"),
    "inno_nudges_on": Command(CommandName.NUDGES, "on"),
    "inno_mute_8": Command(CommandName.MUTE, "8"),
    "inno_mute_all_8": Command(CommandName.MUTE, "all 8"),
    "inno_unmute": Command(CommandName.UNMUTE),
}


class SlackRequestKind(enum.StrEnum):
    COMMAND = "command"  # the slash command
    MESSAGE = "message"  # a direct message to the app
    HOME = "home"  # the person opened the app's Home tab
    ACTION = "action"  # a button of the Home tab


@dataclass(frozen=True, slots=True)
class SlackRequest:
    """What the service acts on from one Slack request (adapters.channels.slack_inbound reads it).

    `key`: what makes the request unique (an event id, a trigger id): its answer's outbox key, so a
    request Slack delivers twice changes nothing the second time. `action`: a button's action_id."""

    kind: SlackRequestKind
    team_id: str
    user_id: str
    key: str
    text: str = ""
    action: str | None = None


def user_of_slack(
    users: Iterable[DirectoryUser], user_id: str, email: str | None = None
) -> DirectoryUser | None:
    """The directory user this Slack user is: by `slack_user_id`; else, for `email` (the one Slack's
    profile of `user_id` holds), the directory user of that e-mail who has no Slack id of their own."""
    directory = list(users)
    for user in directory:
        if user.slack_user_id == user_id:
            return user
    if email:
        for user in directory:
            if user.slack_user_id is None and user.email.lower() == email.strip().lower():
                return user
    return None


def command_of(request: SlackRequest) -> Command:
    """The command a request gives: a button's, or the text's (the slash may be left out)."""
    if request.kind is SlackRequestKind.ACTION:
        return ACTIONS.get(request.action or "", Command(CommandName.HELP))
    return read_command(request.text, bare=True)


def decide(
    request: SlackRequest,
    person: DirectoryUser | None,
    now: datetime,
    timezone: str = "UTC",
    *,
    muted_until: Mapping[str, Mute] | None = None,
) -> Decision:
    """What `request` from `person` (None: a Slack user not in the directory) leads to."""
    if request.kind is SlackRequestKind.HOME:
        return Decision(None)
    return answer_in_zone(command_of(request), person, Channel.SLACK, now, timezone, muted_until)
