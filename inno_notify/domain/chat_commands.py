"""The self-service commands a person gives from a chat, on any chat channel (Telegram, Slack).

One interpreter for every chat surface (docs/selfservice.md): `read_command` reads what was typed,
`answer` decides what a command of a known person changes and what the answer says. Which person
a chat belongs to, and anything only one surface has (Telegram's `/start` linking), is the
surface's own module's (domain.telegram_commands, domain.slack_commands).

- `status`: the person's running jobs and this week's GPU-hours held and used.
- `mute [all] <hours>` and `unmute`: their messages on this chat's channel wait (none is lost) and
  go out together when the mute ends (domain.delivery.hold_muted); `all` holds every channel. A
  chat speaks for its own channel unless the person says `all` in so many words (issue 29).
- `failures`: from now on only failed jobs' summaries; `all` undoes it.
- `nudges off` and `nudges on`: no idle-GPU nudges (on any channel), or nudges again.
- `stop`: this channel off for them (their other channels go on, e-mail at least); `stop all`:
  every channel off.
- `help`, and any unknown command or free text: the help.

Everything a person writes is data for a template that escapes it (bot_replies), never markup.
Pure: the caller passes the person (with preferences applied) and `now`, and gets a `Decision` to
carry out in one transaction (service.self_service).
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from inno_notify.domain.bot_replies import WORD_MAX_CHARS, Reply, ReplyKind
from inno_notify.domain.delivery import Mute
from inno_notify.domain.model import Channel, DirectoryUser, NotifyMode
from inno_notify.domain.preferences import leave_channel, mute, stop_all
from inno_notify.domain.telegram_linking import LinkGrant

__all__ = [
    "ALL_WORD",
    "MAX_MUTE_HOURS",
    "Command",
    "CommandName",
    "Decision",
    "answer",
    "answer_in_zone",
    "parse_hours",
    "parse_mute",
    "read_command",
]

# A mute longer than a month is an unlink in disguise; `stop` says that better.
MAX_MUTE_HOURS = 720.0
# The longest text read for a command: a command with its argument fits easily.
_COMMAND_LINE_MAX = 256
_COMMAND = re.compile(r"/?([A-Za-z0-9_]{1,32})(?:@[A-Za-z0-9_]{1,64})?")
_HOURS = re.compile(r"([0-9]{1,4}(?:\.[0-9]{1,3})?)\s*(?:h|hours?)?", re.IGNORECASE)
# The word that widens a mute or stop from the chat's own channel to every channel.
ALL_WORD = "all"


class CommandName(enum.StrEnum):
    START = "start"  # Telegram's linking; elsewhere the help
    STATUS = "status"
    MUTE = "mute"
    UNMUTE = "unmute"
    FAILURES = "failures"
    ALL = "all"
    NUDGES = "nudges"
    STOP = "stop"
    HELP = "help"
    UNKNOWN = "unknown"  # a command we do not have
    TEXT = "text"  # no command at all


_COMMANDS = frozenset(
    name.value for name in CommandName if name not in (CommandName.UNKNOWN, CommandName.TEXT)
)


@dataclass(frozen=True, slots=True)
class Command:
    name: CommandName
    argument: str = ""
    # The command as typed (for "I do not know /foo"), only for UNKNOWN.
    word: str | None = None


@dataclass(frozen=True, slots=True)
class Decision:
    """What a message leads to.

    `reply`: the answer (None: say nothing). `changes`: preference changes by e-mail, made with the
    chat as their origin. `status_of`: the e-mail whose figures `status` needs (the caller fills
    them into the reply). The rest is Telegram's linking (domain.telegram_commands): `grant`: a
    linking token to record as used (for `link_to`) first; if the store has it already, nothing
    else happens and `used_reply` is the answer; if the person's link epoch is no longer the
    token's (`link_allowed`), nothing happens either and `superseded_reply` is the answer.
    `previous_chat`: the chat the link takes the person away from, told so with `previous_reply`
    once the link holds.
    """

    reply: Reply | None
    changes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    grant: LinkGrant | None = None
    link_to: str | None = None
    used_reply: Reply | None = None
    superseded_reply: Reply | None = None
    previous_chat: int | None = None
    previous_reply: Reply | None = None
    status_of: str | None = None


def read_command(text: str | None, *, bare: bool = False) -> Command:
    """The command a message's text holds: `/name[@bot] [argument]` at its start, else TEXT.

    With `bare` (Slack: `/inno mute 2` arrives as "mute 2", a DM may say "status") the slash may be
    left out, and any first word that is no command is UNKNOWN."""
    if not text:
        return Command(CommandName.TEXT)
    parts = text.strip()[:_COMMAND_LINE_MAX].split(maxsplit=1)
    if not parts or not (bare or parts[0].startswith("/")):
        return Command(CommandName.TEXT)
    word, argument = parts[0], parts[1].strip() if len(parts) > 1 else ""
    match = _COMMAND.fullmatch(word)
    name = match.group(1).lower() if match is not None and (bare or word.startswith("/")) else ""
    if name not in _COMMANDS:
        return Command(CommandName.UNKNOWN, word=word[:WORD_MAX_CHARS])
    return Command(CommandName(name), argument)


def parse_hours(argument: str) -> float | None:
    """The hours of `mute <hours>` ("2", "1.5", "8h"); None unless within 0 < h <= MAX_MUTE_HOURS."""
    match = _HOURS.fullmatch(argument.strip())
    if match is None:
        return None
    hours = float(match.group(1))
    if not math.isfinite(hours) or not 0 < hours <= MAX_MUTE_HOURS:
        return None
    return hours


def parse_mute(argument: str) -> tuple[float, bool] | None:
    """The hours of `mute [all] <hours>` and whether it holds every channel (`all`); None when the
    hours do not read (see parse_hours)."""
    words = argument.strip().split(maxsplit=1)
    everywhere = bool(words) and words[0].lower() == ALL_WORD
    hours = parse_hours(words[1] if everywhere and len(words) > 1 else "" if everywhere else argument)
    return None if hours is None else (hours, everywhere)


# Builds a reply with the fields every reply of one message shares (first name, time zone).
ReplyMaker = Callable[..., Reply]


def answer(
    command: Command,
    person: DirectoryUser | None,
    channel: Channel,
    now: datetime,
    reply: ReplyMaker,
    mutes: Mapping[str, Mute],
) -> Decision:
    """What `command` from `person`'s chat on `channel` changes and answers (every command but
    Telegram's `/start <token>`, which is linking, not a preference). Someone the directory does
    not know (`person` None) changes nothing and is told so, with the word they used if it was no
    command."""
    if person is None:
        unknown = command.word if command.name is CommandName.UNKNOWN else None
        return Decision(reply(ReplyKind.NOT_LINKED, unknown=unknown))
    name = person.name or person.email
    if command.name in (CommandName.HELP, CommandName.UNKNOWN, CommandName.TEXT, CommandName.START):
        return Decision(_help(reply, command, person, now, mutes))
    if command.name is CommandName.STATUS:
        return Decision(reply(ReplyKind.STATUS, person=name), status_of=person.email)
    if command.name is CommandName.MUTE:
        parsed = parse_mute(command.argument)
        if parsed is None:
            return Decision(reply(ReplyKind.MUTE_USAGE, person=name))
        hours, everywhere = parsed
        until = now + timedelta(hours=hours)
        scope = None if everywhere else (channel.value,)
        others = tuple(c for c in person.channels if c != channel.value)
        return Decision(
            reply(ReplyKind.MUTED, person=name, until=until, everywhere=everywhere, channels=others),
            {person.email: mute(until, scope)},
        )
    if command.name is CommandName.UNMUTE:
        return Decision(reply(ReplyKind.UNMUTED, person=name), {person.email: {"muted_until": None}})
    if command.name is CommandName.FAILURES:
        return Decision(
            reply(ReplyKind.FAILURES_ONLY, person=name), {person.email: {"notify": NotifyMode.FAILURE}}
        )
    if command.name is CommandName.NUDGES:
        wanted = {"off": False, "on": True}.get(command.argument.strip().lower())
        if wanted is None:
            return Decision(reply(ReplyKind.NUDGES_USAGE, person=name))
        kind = ReplyKind.NUDGES_ON if wanted else ReplyKind.NUDGES_OFF
        return Decision(reply(kind, person=name), {person.email: {"nudges": wanted}})
    if command.name is CommandName.ALL:
        return Decision(
            reply(ReplyKind.ALL_SUMMARIES, person=name), {person.email: {"notify": NotifyMode.ALWAYS}}
        )
    # STOP
    everywhere = command.argument.strip().lower() == ALL_WORD
    left = stop_all() if everywhere else leave_channel(person, channel)
    return Decision(
        reply(ReplyKind.STOPPED, person=name, channels=left["channels"], everywhere=everywhere),
        {person.email: left},
    )


def answer_in_zone(
    command: Command,
    person: DirectoryUser | None,
    channel: Channel,
    now: datetime,
    timezone: str,
    muted_until: Mapping[str, Mute] | None,
) -> Decision:
    """`answer` on a chat whose replies carry nothing of the sender but the time zone they are
    shown in (Slack, Mattermost: no first name, unlike Telegram's)."""

    def reply(kind: ReplyKind, **fields: Any) -> Reply:
        return Reply(kind, timezone=timezone, **fields)

    return answer(command, person, channel, now, reply, muted_until or {})


def _help(
    reply: ReplyMaker, command: Command, user: DirectoryUser, now: datetime, mutes: Mapping[str, Mute]
) -> Reply:
    found = mutes.get(user.email)
    running = found is not None and found.until > now
    return reply(
        ReplyKind.HELP,
        person=user.name or user.email,
        unknown=command.word if command.name is CommandName.UNKNOWN else None,
        failures_only=user.notify is NotifyMode.FAILURE,
        muted_until=found.until if found is not None and running else None,
        everywhere=running and found is not None and found.channels is None,
        channels=user.channels,
    )
