"""Mattermost's side of self-service: which person typed the `/inno` slash command, and what it asks.

The commands are every chat's (domain.chat_commands): `/inno mute 2` arrives as the text "mute 2".
A Mattermost command speaks for Mattermost: `mute 2` holds Mattermost only, unless the person
writes `all`.

Mattermost sends the user id of whoever typed the command; the person is the directory user whose
e-mail that account has (the server's own record, `GET /api/v4/users/{id}`, read by the caller), the
same e-mail the bot finds them by to send. Never by a username, which its owner may change. Anyone
else gets a polite "not known" and changes nothing.

Pure: the caller passes the directory (with preferences applied) and `now`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

from inno_notify.domain.chat_commands import Decision, answer_in_zone, read_command
from inno_notify.domain.delivery import Mute
from inno_notify.domain.model import Channel, DirectoryUser

__all__ = ["decide", "user_of_mattermost"]


def user_of_mattermost(users: Iterable[DirectoryUser], email: str | None) -> DirectoryUser | None:
    """The directory user of `email` (the e-mail of the Mattermost account; case does not matter)."""
    if not email:
        return None
    wanted = email.strip().lower()
    return next((user for user in users if user.email.lower() == wanted), None)


def decide(
    text: str,
    person: DirectoryUser | None,
    now: datetime,
    timezone: str = "UTC",
    *,
    muted_until: Mapping[str, Mute] | None = None,
) -> Decision:
    """What the slash command's `text` from `person` (None: not in the directory) leads to."""
    # Mattermost sends what follows `/inno`; nothing at all is the help (chat_commands.answer).
    command = read_command(text, bare=True)
    return answer_in_zone(command, person, Channel.MATTERMOST, now, timezone, muted_until)
