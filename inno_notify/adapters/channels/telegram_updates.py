"""What the bot hears: Telegram updates by long polling (`getUpdates`) or by webhook, as domain messages.

python-telegram-bot reads each update (`Update.de_json`); we keep what the bot acts on, the text of
a message, its chat, and the sender's first name (domain.telegram_commands.IncomingMessage).
Edited messages, channel posts, member changes and the rest are answered by nobody.

`getUpdates` goes through `Bot.do_api_request` rather than `Bot.get_updates`, which parses the
whole batch at once: a single update PTB cannot read would fail every poll from then on, and the
bot would go deaf. Here each update is read on its own; one that cannot be read is handed on with
no message, so the caller moves its offset past it and counts it. Only message updates are asked
for (`allowed_updates`), on polling and on the webhook alike.

Requests use our aiohttp transport (telegram_transport); a long poll's read timeout is the poll's
own timeout plus the transport's. Failures are ChannelErrors, classified like a send's.
"""

from __future__ import annotations

import hashlib
import logging
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from telegram import Update
from telegram.constants import ChatType
from telegram.error import TelegramError
from telegram.warnings import PTBUserWarning

from inno_notify.adapters.channels.base import ChannelError
from inno_notify.adapters.channels.telegram import DEFAULT_API_URL, bot_client, classify
from inno_notify.domain.telegram_commands import IncomingMessage

__all__ = ["ALLOWED_UPDATES", "IncomingUpdate", "TelegramUpdates", "bot_id_of"]

log = logging.getLogger(__name__)

ALLOWED_UPDATES = ("message",)
# Telegram returns at most 100 updates per call.
BATCH_LIMIT = 100


@dataclass(frozen=True, slots=True)
class IncomingUpdate:
    """One update: its id (what the offset moves past) and the message the bot acts on, if any.
    `unreadable` says why an update could not be read (it is set aside, never retried)."""

    update_id: int
    message: IncomingMessage | None = None
    unreadable: str | None = None


def bot_id_of(token: str) -> str:
    """The bot's id: the number before the token's colon (a token's public part); else a digest."""
    head = token.partition(":")[0]
    return head if head.isdigit() else hashlib.sha256(token.encode()).hexdigest()[:16]


class TelegramUpdates:
    """The bot's getUpdates / setWebhook / deleteWebhook, and the reading of one update."""

    def __init__(self, token: str, api_url: str = DEFAULT_API_URL, *, timeout: float = 10.0) -> None:
        self._request, self._bot = bot_client(token, api_url, timeout=timeout, pool_size=2)
        self._token = token
        self._timeout = timeout
        self.bot_id = bot_id_of(token)

    def __repr__(self) -> str:
        return f"TelegramUpdates(bot_id={self.bot_id!r})"

    async def get_updates(self, offset: int, poll_seconds: int) -> list[IncomingUpdate]:
        """The updates from `offset` on, waiting up to `poll_seconds` for the first one."""
        kwargs: dict[str, Any] = {
            "offset": offset,
            "timeout": poll_seconds,
            "limit": BATCH_LIMIT,
            "allowed_updates": list(ALLOWED_UPDATES),
        }
        try:
            with warnings.catch_warnings():
                # PTB suggests get_updates for this endpoint; the module docstring says why not.
                warnings.simplefilter("ignore", PTBUserWarning)
                raw = await self._bot.do_api_request(
                    "getUpdates", api_kwargs=kwargs, read_timeout=self._timeout + poll_seconds
                )
        except TelegramError as exc:
            raise classify(exc, self._token) from None
        if not isinstance(raw, list):
            raise ChannelError("telegram: getUpdates answered something that is no list", retryable=True)
        return [self.read(item) for item in raw]

    def read(self, data: object) -> IncomingUpdate:
        """One update as the Bot API sends it (a polled item, a webhook's body)."""
        if not isinstance(data, Mapping):
            return IncomingUpdate(-1, unreadable="not an object")
        update_id = data.get("update_id")
        if not isinstance(update_id, int) or isinstance(update_id, bool):
            return IncomingUpdate(-1, unreadable="no update_id")
        try:
            update = Update.de_json(dict(data), self._bot)
        except Exception as exc:  # PTB's readers raise whatever a malformed field makes them
            return IncomingUpdate(update_id, unreadable=f"{type(exc).__name__}: {exc}"[:300])
        return IncomingUpdate(update_id, _message_of(update))

    async def set_webhook(self, url: str, secret_token: str) -> None:
        """Asks Telegram to post updates to `url` with `secret_token` in each request's header."""
        try:
            await self._bot.set_webhook(url, allowed_updates=list(ALLOWED_UPDATES), secret_token=secret_token)
        except TelegramError as exc:
            raise classify(exc, self._token) from None

    async def delete_webhook(self) -> None:
        """Removes any webhook (getUpdates is refused while one is set); pending updates stay."""
        try:
            await self._bot.delete_webhook(drop_pending_updates=False)
        except TelegramError as exc:
            raise classify(exc, self._token) from None

    async def aclose(self) -> None:
        await self._request.shutdown()


def _message_of(update: Update) -> IncomingMessage | None:
    message = update.message
    if message is None:
        return None
    sender = message.from_user
    return IncomingMessage(
        update_id=update.update_id,
        chat_id=message.chat.id,
        private=message.chat.type == ChatType.PRIVATE,
        text=message.text,
        first_name=sender.first_name if sender is not None else None,
    )
