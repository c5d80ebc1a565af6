"""Telegram's side of a private chat: which person a chat is, and `/start` linking.

The commands themselves are every chat's (domain.chat_commands: status, mute, failures, nudges,
stop, help); what only Telegram has is here:

- `/start <token>`: links the chat to the user the token names (domain.telegram_linking), adds
  Telegram to their channels, and confirms. A forged, expired, used or orphaned token links
  nothing and gets a polite refusal, and so does a token of an older link generation (minted
  before the person's latest link, relink or /stop: the store checks, `link_allowed`). Relinking a
  person who has another chat tells that chat (`previous_chat`). `/start` alone: the help, or how
  to link.
- `/stop` unlinks the chat; `/stop all` unlinks it and turns every channel off.

Only private chats are answered; anything from a group, a channel, or without text is ignored,
since the service has no team chats on Telegram: a group nobody linked must not be able to talk
to the directory. Everything a person writes (text, first name) is data for a template that escapes
it (bot_replies), never markup.

Pure: the caller passes the directory (with preferences applied), the link key and `now`, and gets
a `Decision` to carry out in one transaction (service.telegram_updates).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from inno_notify.domain.bot_replies import Reply, ReplyKind
from inno_notify.domain.chat_commands import CommandName, Decision, answer, read_command
from inno_notify.domain.delivery import Mute
from inno_notify.domain.model import Channel, DirectoryUser
from inno_notify.domain.preferences import link_chat, unlink_chat
from inno_notify.domain.telegram_linking import LinkGrant, LinkRefusal, user_ref, verify

__all__ = ["IncomingMessage", "decide", "resolve_link", "user_of_chat"]


@dataclass(frozen=True, slots=True)
class IncomingMessage:
    """The part of a Telegram update the bot reads; anything else in the update is ignored."""

    update_id: int
    chat_id: int
    private: bool
    text: str | None = None
    first_name: str | None = None


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
    return answer(command, linked, Channel.TELEGRAM, now, reply, muted_until or {})
