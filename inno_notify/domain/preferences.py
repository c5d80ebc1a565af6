"""A person's own notification preferences, laid over what the directory says about them.

The directory (the YAML file, or an admin through the API) says who a person is and where their
summaries go. A person may change some of that themselves, from their Telegram chat (issue 19):
link a chat, unlink it, ask for failed jobs only, mute for a while; and from Slack (Via.SLACK)
with the same commands (domain.chat_commands). Those changes are kept apart
from the directory entry, which the service re-seeds from the YAML file at every start, and
override it for that person. Each field a person (or an admin) set records where the change came
from (`Origin`): the API shows it next to the value.

A field overrides the directory only when it was set, which `origins` records; so "unlinked"
(a chat id set to None by /stop) differs from "never said anything" (the directory's chat id
stands). `muted_until` has no counterpart in the directory: the dispatcher holds a muted
person's messages until then (domain.delivery.hold_muted), on the channels of `muted_channels`
only (None: on every channel). A mute sent from Telegram holds Telegram only unless the person
wrote `all` (issue 29); one set through the API holds every channel. The scope belongs to the
mute: it is set with `muted_until`, shares its origin, and goes when the mute is unset.

`link_epoch` is no preference: the store moves it on whenever the person's chat changes (link,
relink, /stop, an admin's edit), which voids every linking token minted before
(domain.telegram_linking).

`nudges` False turns the live check's idle-GPU nudges off for that person on every channel
(domain.routing).

`emails` False turns e-mail off for that person, whatever else asks for it (a job's annotation, a
team's digest channels): the one-click unsubscribe every e-mail carries (RFC 8058, api/views/
unsubscribe.py) sets it, and so may the API. Unlike the other fields it holds for addresses outside
the directory too: routing reads it as a set of addresses (domain.routing.Directory.email_off).

Pure: times are passed in.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from inno_notify.domain.model import Channel, DirectoryUser, NotifyMode

__all__ = [
    "PREFERENCE_FIELDS",
    "Origin",
    "Preferences",
    "Via",
    "apply_preferences",
    "leave_channel",
    "link_chat",
    "mute",
    "stop_all",
    "unlink_chat",
]

# The fields a person can set; each one a key of `Preferences.origins` once set.
PREFERENCE_FIELDS = ("telegram_chat_id", "channels", "notify", "muted_until", "nudges", "emails")
# What a person may ask for through `notify`: never is an annotation for a job, not a person.
PERSON_NOTIFY_MODES = frozenset({NotifyMode.ALWAYS, NotifyMode.FAILURE})
# Set together with `muted_until` (its scope), never on its own.
MUTE_SCOPE = "muted_channels"


class Via(enum.StrEnum):
    """Where a change came from."""

    TELEGRAM = "telegram"  # the person, in their linked chat
    API = "api"  # PUT /api/v1/users/{email}, by the token named in `Origin.by`
    EMAIL = "email"  # the person, through the one-click unsubscribe link of an e-mail (no `by`)
    SLACK = "slack"  # the person, from Slack (`by`: their Slack user id; docs/selfservice.md)
    PAGE = "page"  # the person, through a form of their personal page (GET /me), opened by its link
    MATTERMOST = "mattermost"  # the person, by the /inno slash command (`by`: their Mattermost user id)


@dataclass(frozen=True, slots=True)
class Origin:
    """Who set a preference, through what, and when; `by` is the chat id or the API token's name."""

    via: Via
    at: datetime
    by: str | None = None

    def encode(self) -> dict[str, Any]:
        return {"via": self.via.value, "at": self.at.isoformat(), "by": self.by}

    @classmethod
    def decode(cls, data: Mapping[str, Any]) -> Origin:
        """Raises ValueError for anything that is not an encoded Origin."""
        try:
            at = datetime.fromisoformat(str(data["at"]))
            by = data.get("by")
            return cls(Via(str(data["via"])), at, None if by is None else str(by))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not an origin: {exc}") from None


@dataclass(frozen=True, slots=True)
class Preferences:
    """What one person set for themselves; a field counts only when it is in `origins`."""

    email: str
    telegram_chat_id: int | None = None
    channels: tuple[str, ...] | None = None
    notify: NotifyMode | None = None
    muted_until: datetime | None = None
    # False: no idle-GPU nudges on any channel (`/nudges off`); the directory has no counterpart.
    nudges: bool | None = None
    # False: no e-mail at all (the one-click unsubscribe); see the module docstring.
    emails: bool | None = None
    origins: Mapping[str, Origin] = field(default_factory=dict)
    # The channels the mute holds (None: every channel); see the module docstring.
    muted_channels: tuple[str, ...] | None = None
    link_epoch: int = 0

    def is_set(self, name: str) -> bool:
        return name in self.origins

    def changed(self, changes: Mapping[str, Any], origin: Origin) -> Preferences:
        """These preferences with `changes` (field → value) set, each recorded as from `origin`.

        A change of `muted_until` without `muted_channels` beside it mutes every channel."""
        unknown = set(changes) - {*PREFERENCE_FIELDS, MUTE_SCOPE}
        if unknown:
            raise ValueError(f"not a preference: {', '.join(sorted(unknown))}")
        if MUTE_SCOPE in changes and "muted_until" not in changes:
            raise ValueError("muted_channels is set with muted_until only")
        notify = changes.get("notify")
        if notify is not None and NotifyMode(notify) not in PERSON_NOTIFY_MODES:
            raise ValueError("notify: always or failure")
        values = dict(changes)
        origins = {**self.origins, **dict.fromkeys((n for n in values if n != MUTE_SCOPE), origin)}
        if "muted_until" in values:
            scope = values.get(MUTE_SCOPE)
            values[MUTE_SCOPE] = None if scope is None or values["muted_until"] is None else tuple(scope)
        if values.get("channels") is not None:
            values["channels"] = tuple(dict.fromkeys(values["channels"]))
        if values.get("notify") is not None:
            values["notify"] = NotifyMode(values["notify"])
        return replace(self, **values, origins=origins)

    def reset(self, names: tuple[str, ...]) -> Preferences:
        """These preferences without the given fields: the directory's values stand again."""
        defaults = Preferences(self.email)
        if "muted_until" in names:
            names = (*names, MUTE_SCOPE)
        values = {name: getattr(defaults, name) for name in names}
        origins = {k: v for k, v in self.origins.items() if k not in names}
        return replace(self, **values, origins=origins)

    @property
    def email_off(self) -> bool:
        """Whether the person turned e-mail off (unsubscribed)."""
        return self.emails is False

    def muted_at(self, now: datetime) -> bool:
        return self.muted_until is not None and self.muted_until > now

    def chat_changed(self, after: Preferences) -> bool:
        """Whether going from these preferences to `after` links, relinks or unlinks a chat (which
        moves the person's link epoch on)."""
        return self.telegram_chat_id != after.telegram_chat_id or (
            self.is_set("telegram_chat_id") != after.is_set("telegram_chat_id")
        )


def apply_preferences(user: DirectoryUser, prefs: Preferences | None) -> DirectoryUser:
    """The directory entry as the person's own preferences change it."""
    if prefs is None:
        return user
    changes: dict[str, Any] = {"link_epoch": prefs.link_epoch}
    if prefs.is_set("telegram_chat_id"):
        changes["telegram_chat_id"] = prefs.telegram_chat_id
        origin = prefs.origins["telegram_chat_id"]
        changes["telegram_stopped"] = prefs.telegram_chat_id is None and origin.via is Via.TELEGRAM
    if prefs.is_set("channels") and prefs.channels is not None:
        changes["channels"] = prefs.channels
    if prefs.is_set("notify") and prefs.notify is not None:
        changes["notify"] = prefs.notify
    if prefs.is_set("nudges") and prefs.nudges is not None:
        changes["nudges"] = prefs.nudges
    return replace(user, **changes)


def link_chat(user: DirectoryUser, chat_id: int) -> dict[str, Any]:
    """The changes that link `chat_id` to `user`: the chat, and Telegram among their channels."""
    channels = tuple(dict.fromkeys((*user.channels, Channel.TELEGRAM.value)))
    return {"telegram_chat_id": chat_id, "channels": channels}


def unlink_chat(user: DirectoryUser) -> dict[str, Any]:
    """The changes that unlink the user's chat: no chat, Telegram off their channels (e-mail stays
    as the last resort, so that unlinking never silences someone by accident)."""
    channels = tuple(c for c in user.channels if c != Channel.TELEGRAM.value) or (Channel.EMAIL.value,)
    return {"telegram_chat_id": None, "channels": channels}


def leave_channel(user: DirectoryUser, channel: Channel) -> dict[str, Any]:
    """The changes of `stop` from a chat on `channel`: that channel off their channels (e-mail stays
    as the last resort); Telegram's chat is unlinked with it (unlink_chat)."""
    if channel is Channel.TELEGRAM:
        return unlink_chat(user)
    channels = tuple(c for c in user.channels if c != channel.value) or (Channel.EMAIL.value,)
    return {"channels": channels}


def stop_all() -> dict[str, Any]:
    """The changes of `/stop all`: the chat unlinked and no channel left; the person asked, in so
    many words, for nothing at all (the admin, or the API, can turn channels on again)."""
    return {"telegram_chat_id": None, "channels": ()}


def mute(until: datetime, channels: tuple[str, ...] | None) -> dict[str, Any]:
    """The changes of a mute until `until` holding `channels` (None: every channel)."""
    return {"muted_until": until, MUTE_SCOPE: channels}
