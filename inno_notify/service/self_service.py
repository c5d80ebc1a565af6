"""Carries out what a person asked for from a chat (domain.chat_commands), on any chat channel.

Telegram (service.telegram_updates) and Slack (service.slack_bot) each read their own requests and
find the person; from the decision on, it is the same: the preference changes are made with the
chat as their origin, `status` gets its figures, and the answer is an outbox row of kind
`bot_reply` on the chat's channel (the dispatcher sends it, retried and rate-limited like any
message), all in the caller's one transaction of the store (adapters/db/telegram_bot.py), so that
a crash loses everything or nothing. The answer's key is made from the request's own id: a request
delivered twice finds its answer planned (`tx.handled`) and changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from inno_notify.adapters.db.telegram_bot import BotTransaction
from inno_notify.domain.bot_replies import Reply, encode_reply
from inno_notify.domain.delivery import Mute
from inno_notify.domain.model import Channel, Notification, NotificationKind, RecipientAddress
from inno_notify.domain.preferences import Origin, Preferences
from inno_notify.domain.weeks import week_bounds, week_of

__all__ = ["carry_out", "mutes_of", "reply_row"]


def mutes_of(prefs: Preferences | None) -> dict[str, Mute]:
    """The person's running mute by e-mail (for `help` to say so), from their preferences."""
    if prefs is None or prefs.muted_until is None:
        return {}
    scope = None if prefs.muted_channels is None else frozenset(prefs.muted_channels)
    return {prefs.email: Mute(prefs.muted_until, scope)}


async def carry_out(
    tx: BotTransaction,
    reply: Reply | None,
    changes: Mapping[str, Mapping[str, Any]],
    origin: Origin,
    now: datetime,
    timezone: str,
    *,
    status_of: str | None = None,
    new_link: str | None = None,
) -> Reply | None:
    """Makes `changes` (by e-mail) as from `origin` and returns `reply` with the figures `status`
    asks for filled in. `new_link`: the person a linking token was spent for (Telegram)."""
    for email, change in changes.items():
        await tx.change_preferences(email, change, origin, now, new_link=email == new_link)
    if reply is not None and status_of is not None:
        week_start = week_bounds(week_of(now, timezone), timezone)[0]
        reply = replace(reply, status=await tx.owner_status(status_of, week_start, now))
    return reply


def reply_row(
    key: str, channel: Channel, address: RecipientAddress, reply: Reply, now: datetime
) -> Notification:
    """The outbox row of an answer on `channel` to the chat `address` names."""
    if channel is Channel.TELEGRAM:
        recipient = f"telegram:{address.telegram_chat_id}"
    elif channel is Channel.SLACK:
        recipient = f"slack:{address.slack_user_id}"
    else:
        raise ValueError(f"no chat commands on {channel.value}")
    return Notification(
        dedup_key=key,
        kind=NotificationKind.BOT_REPLY,
        channel=channel,
        recipient=recipient,
        due_at=now,
        created_at=now,
        address=address,
        payload={"message": encode_reply(reply)},
    )
