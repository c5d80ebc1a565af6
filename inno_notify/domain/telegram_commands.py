"""The bot's side of a private chat: what a message asks for, and what changes and answer follow.

Commands (docs/channels.md):

- `/start <token>`: links the chat to the user the token names (domain.telegram_linking), adds
  Telegram to their channels, and confirms. A forged, expired, used or orphaned token links
  nothing and gets a polite refusal, and so does a token of an older link generation (minted
  before the person's latest link, relink or /stop: the store checks, `link_allowed`). Relinking a
  person who has another chat tells that chat (`previous_chat`). `/start` alone: the help, or how
  to link.
- `/status`: the person's running jobs and this week's GPU-hours held and used.
- `/mute <hours>` and `/unmute`: their Telegram messages wait (none is lost) and go out together
  when the mute ends (domain.delivery.hold_muted); `/mute all <hours>` holds every channel. A
  chat speaks for its own channel unless the person says `all` in so many words (issue 29).
- `/failures`: from now on only failed jobs' summaries; `/all` undoes it.
- `/nudges off` and `/nudges on`: no idle-GPU nudges (on any channel), or nudges again.
- `/stop`: unlinks the chat (summaries go to their other channels, e-mail at least); `/stop all`
  unlinks it and turns every channel off.
- `/help`, and any unknown command or free text: the help.

Only private chats are answered; anything from a group, a channel, or without text is ignored,
since the service has no team chats on Telegram: a group nobody linked must not be able to talk
to the directory. Everything a person writes (text, first name) is data for a template that escapes
it (bot_replies), never markup.

Pure: the caller passes the directory (with preferences applied), the link key and `now`, and gets
a `Decision` to carry out in one transaction (service.telegram_updates).
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from inno_notify.domain.bot_replies import WORD_MAX_CHARS, Reply, ReplyKind
from inno_notify.domain.delivery import Mute
from inno_notify.domain.model import Channel, DirectoryUser, NotifyMode
from inno_notify.domain.preferences import link_chat, mute, stop_all, unlink_chat
from inno_notify.domain.telegram_linking import LinkGrant, LinkRefusal, user_ref, verify

__all__ = [
    "MAX_MUTE_HOURS",
    "Command",
    "CommandName",
    "Decision",
    "IncomingMessage",
    "decide",
    "parse_hours",
    "parse_mute",
    "read_command",
    "resolve_link",
    "user_of_chat",
]

# A mute longer than a month is an unlink in disguise; /stop says that better.
MAX_MUTE_HOURS = 720.0
# The longest text read for a command: a command with its argument fits easily.
_COMMAND_LINE_MAX = 256
_COMMAND = re.compile(r"/([A-Za-z0-9_]{1,32})(?:@[A-Za-z0-9_]{1,64})?")
_HOURS = re.compile(r"([0-9]{1,4}(?:\.[0-9]{1,3})?)\s*(?:h|hours?)?", re.IGNORECASE)
# The word that widens a /mute or /stop from the chat's own channel to every channel.
ALL_WORD = "all"


@dataclass(frozen=True, slots=True)
class IncomingMessage:
    """The part of a Telegram update the bot reads; anything else in the update is ignored."""

    update_id: int
    chat_id: int
    private: bool
    text: str | None = None
    first_name: str | None = None


class CommandName(enum.StrEnum):
    START = "start"
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
    chat as their origin. `grant`: a linking token to record as used (for `link_to`) first; if the
    store has it already, nothing else happens and `used_reply` is the answer; if the person's link
    epoch is no longer the token's (`link_allowed`), nothing happens either and `superseded_reply`
    is the answer. `previous_chat`: the chat the link takes the person away from, told so with
    `previous_reply` once the link holds. `status_of`: the e-mail whose figures /status needs (the
    caller fills them into the reply).
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


def read_command(text: str | None) -> Command:
    """The command a message's text holds: `/name[@bot] [argument]` at its start, else TEXT."""
    if not text:
        return Command(CommandName.TEXT)
    parts = text.strip()[:_COMMAND_LINE_MAX].split(maxsplit=1)
    if not parts or not parts[0].startswith("/"):
        return Command(CommandName.TEXT)
    word, argument = parts[0], parts[1].strip() if len(parts) > 1 else ""
    match = _COMMAND.fullmatch(word)
    name = match.group(1).lower() if match is not None else ""
    if name not in _COMMANDS:
        return Command(CommandName.UNKNOWN, word=word[:WORD_MAX_CHARS])
    return Command(CommandName(name), argument)


def parse_hours(argument: str) -> float | None:
    """The hours of `/mute <hours>` ("2", "1.5", "8h"); None unless within 0 < h <= MAX_MUTE_HOURS."""
    match = _HOURS.fullmatch(argument.strip())
    if match is None:
        return None
    hours = float(match.group(1))
    if not math.isfinite(hours) or not 0 < hours <= MAX_MUTE_HOURS:
        return None
    return hours


def parse_mute(argument: str) -> tuple[float, bool] | None:
    """The hours of `/mute [all] <hours>` and whether it holds every channel (`all`); None when the
    hours do not read (see parse_hours)."""
    words = argument.strip().split(maxsplit=1)
    everywhere = bool(words) and words[0].lower() == ALL_WORD
    hours = parse_hours(words[1] if everywhere and len(words) > 1 else "" if everywhere else argument)
    return None if hours is None else (hours, everywhere)


def user_of_chat(users: Iterable[DirectoryUser], chat_id: int) -> DirectoryUser | None:
    """The directory user whose (effective) Telegram chat this is."""
    for user in users:
        if user.telegram_chat_id == chat_id:
            return user
    return None


def resolve_link(
    key: bytes, payload: str, users: Iterable[DirectoryUser], now: datetime
) -> tuple[DirectoryUser, LinkGrant] | LinkRefusal:
    """The user a `/start` payload links to, with the grant to record as used; or the refusal."""
    grant = verify(key, payload, now)
    if isinstance(grant, LinkRefusal):
        return grant
    for user in users:
        if user_ref(key, user.email) == grant.user_ref:
            return user, grant
    return LinkRefusal.UNKNOWN_USER


def decide(
    message: IncomingMessage,
    users: Iterable[DirectoryUser],
    now: datetime,
    link_key: bytes,
    timezone: str = "UTC",
    *,
    muted_until: Mapping[str, Mute] | None = None,
) -> Decision:
    """What `message` leads to, given the directory as it stands (preferences applied).

    `muted_until` holds the active mutes by e-mail (for /help to tell the person they are muted).
    """
    if not message.private:
        return Decision(None)
    directory = list(users)
    command = read_command(message.text)
    linked = user_of_chat(directory, message.chat_id)

    def reply(kind: ReplyKind, **fields: Any) -> Reply:
        return Reply(kind, first_name=message.first_name, timezone=timezone, **fields)

    if command.name is CommandName.START and command.argument:
        found = resolve_link(link_key, command.argument, directory, now)
        if isinstance(found, LinkRefusal):
            return Decision(reply(ReplyKind.LINK_REFUSED, refusal=found))
        user, grant = found
        changes: dict[str, Mapping[str, Any]] = {}
        if linked is not None and linked.email != user.email:
            # One chat, one person: the chat moves to whoever proved they read this user's mail.
            changes[linked.email] = unlink_chat(linked)
        link = link_chat(user, message.chat_id)
        changes[user.email] = link
        previous = user.telegram_chat_id if user.telegram_chat_id != message.chat_id else None
        person = user.name or user.email
        return Decision(
            reply(ReplyKind.LINKED, person=person, channels=link["channels"]),
            changes,
            grant=grant,
            link_to=user.email,
            used_reply=reply(ReplyKind.LINK_REFUSED, refusal=LinkRefusal.USED),
            superseded_reply=reply(ReplyKind.LINK_REFUSED, refusal=LinkRefusal.SUPERSEDED),
            previous_chat=previous,
            # Said to the old chat, whose reader did not write this message: no first name.
            previous_reply=None
            if previous is None
            else Reply(ReplyKind.RELINKED_AWAY, person=person, timezone=timezone),
        )
    if command.name in (CommandName.HELP, CommandName.UNKNOWN, CommandName.TEXT, CommandName.START):
        if linked is None:
            unknown = command.word if command.name is CommandName.UNKNOWN else None
            return Decision(reply(ReplyKind.NOT_LINKED, unknown=unknown))
        return Decision(_help(reply, command, linked, now, muted_until or {}))
    if linked is None:
        return Decision(reply(ReplyKind.NOT_LINKED))
    person = linked.name or linked.email
    if command.name is CommandName.STATUS:
        return Decision(reply(ReplyKind.STATUS, person=person), status_of=linked.email)
    if command.name is CommandName.MUTE:
        parsed = parse_mute(command.argument)
        if parsed is None:
            return Decision(reply(ReplyKind.MUTE_USAGE, person=person))
        hours, everywhere = parsed
        until = now + timedelta(hours=hours)
        scope = None if everywhere else (Channel.TELEGRAM.value,)
        others = tuple(c for c in linked.channels if c != Channel.TELEGRAM.value)
        return Decision(
            reply(ReplyKind.MUTED, person=person, until=until, everywhere=everywhere, channels=others),
            {linked.email: mute(until, scope)},
        )
    if command.name is CommandName.UNMUTE:
        return Decision(reply(ReplyKind.UNMUTED, person=person), {linked.email: {"muted_until": None}})
    if command.name is CommandName.FAILURES:
        return Decision(
            reply(ReplyKind.FAILURES_ONLY, person=person), {linked.email: {"notify": NotifyMode.FAILURE}}
        )
    if command.name is CommandName.NUDGES:
        wanted = {"off": False, "on": True}.get(command.argument.strip().lower())
        if wanted is None:
            return Decision(reply(ReplyKind.NUDGES_USAGE, person=person))
        kind = ReplyKind.NUDGES_ON if wanted else ReplyKind.NUDGES_OFF
        return Decision(reply(kind, person=person), {linked.email: {"nudges": wanted}})
    if command.name is CommandName.ALL:
        return Decision(
            reply(ReplyKind.ALL_SUMMARIES, person=person), {linked.email: {"notify": NotifyMode.ALWAYS}}
        )
    # STOP
    everywhere = command.argument.strip().lower() == ALL_WORD
    unlink = stop_all() if everywhere else unlink_chat(linked)
    return Decision(
        reply(ReplyKind.STOPPED, person=person, channels=unlink["channels"], everywhere=everywhere),
        {linked.email: unlink},
    )


def _help(
    reply: Any, command: Command, user: DirectoryUser, now: datetime, mutes: Mapping[str, Mute]
) -> Reply:
    found = mutes.get(user.email)
    running = found is not None and found.until > now
    result: Reply = reply(
        ReplyKind.HELP,
        person=user.name or user.email,
        unknown=command.word if command.name is CommandName.UNKNOWN else None,
        failures_only=user.notify is NotifyMode.FAILURE,
        muted_until=found.until if found is not None and running else None,
        everywhere=running and found is not None and found.channels is None,
        channels=user.channels,
    )
    return result
