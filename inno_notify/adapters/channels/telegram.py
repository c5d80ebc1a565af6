"""Sends Telegram messages through python-telegram-bot's `Bot`, and classifies what went wrong.

`api_url` is the Bot API server root (CONTRACT.md §2): requests go to
`{api_url}/bot{token}/{method}`, which is PTB's `base_url=f"{api_url}/bot"` (PTB appends the
token). PTB's httpx request object does not retry; we create it ourselves so that `aclose` can
shut it down without `Bot.initialize`, which would cost a `getMe` per start.
"""

from __future__ import annotations

import warnings
from datetime import timedelta

from telegram import Bot, LinkPreviewOptions
from telegram.constants import ParseMode
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
    TimedOut,
)
from telegram.request import HTTPXRequest
from telegram.warnings import PTBDeprecationWarning

from inno_notify.adapters.channels.base import (
    ChannelError,
    Recipient,
    RenderedMessage,
    TelegramMessage,
    redact,
    wrong_message,
)

DEFAULT_API_URL = "https://api.telegram.org"
# httpx connections. More is not faster here: httpcore checks every pooled connection (a poll() of its
# socket) on each request start and end. Measured with bench/dispatch.py (no rate limits, the
# dispatcher's 16 sends at once, 2-core machine under load 4.5-5.9): 8 gave 115-144 rows/s, 16
# gave 106-124; CPU per row equal. Under the Telegram limits (25/s) a few sends are in flight.
DEFAULT_POOL_SIZE = 8


class TelegramSender:
    """A bot that DMs people who pressed START; one instance per process."""

    def __init__(
        self,
        token: str,
        api_url: str = DEFAULT_API_URL,
        *,
        timeout: float = 10.0,
        pool_size: int = DEFAULT_POOL_SIZE,
    ) -> None:
        if not token:
            raise ValueError("telegram token is empty")
        self._token = token
        self._request = HTTPXRequest(
            connection_pool_size=pool_size,
            read_timeout=timeout,
            write_timeout=timeout,
            connect_timeout=timeout,
            pool_timeout=timeout,
        )
        self._bot = Bot(
            token,
            base_url=f"{api_url.rstrip('/')}/bot",
            request=self._request,
            get_updates_request=self._request,
        )
        self._api_url = api_url

    def __repr__(self) -> str:
        return f"TelegramSender(api_url={self._api_url!r})"

    async def send(self, recipient: Recipient, message: RenderedMessage) -> str:
        if not isinstance(message, TelegramMessage):
            raise wrong_message("telegram", message)
        if recipient.telegram_chat_id is None:
            raise ChannelError(f"{_who(recipient)} has no telegram chat id", retryable=False)
        try:
            sent = await self._bot.send_message(
                chat_id=recipient.telegram_chat_id,
                text=message.html,
                parse_mode=ParseMode.HTML,
                link_preview_options=LinkPreviewOptions(is_disabled=True),
            )
        except TelegramError as exc:
            raise self._classify(exc) from None
        return str(sent.message_id)

    async def check(self) -> str:
        """Reaches the Bot API with `getMe`; returns the bot's username (for `inno-notify check`)."""
        try:
            me = await self._bot.get_me()
        except TelegramError as exc:
            raise self._classify(exc) from None
        return f"@{me.username}"

    async def aclose(self) -> None:
        await self._request.shutdown()

    def _classify(self, exc: TelegramError) -> ChannelError:
        # Order matters: BadRequest and TimedOut are NetworkError subclasses in PTB.
        text = redact(exc.message, [self._token])
        if isinstance(exc, RetryAfter):
            return ChannelError(f"telegram: {text}", retryable=True, retry_after=_retry_after(exc))
        if isinstance(exc, Forbidden):
            return ChannelError(f"telegram: forbidden: {text}", retryable=False)
        if isinstance(exc, InvalidToken):
            return ChannelError("telegram: the bot token was rejected", retryable=False)
        if isinstance(exc, BadRequest):
            return ChannelError(f"telegram: bad request: {text}", retryable=False)
        if isinstance(exc, ChatMigrated):
            return ChannelError(
                f"telegram: chat moved to {exc.new_chat_id}; update the directory", retryable=False
            )
        if isinstance(exc, TimedOut):
            return ChannelError(f"telegram: timed out: {text}", retryable=True)
        if isinstance(exc, NetworkError):
            # PTB maps 5xx (and any status it does not know) to NetworkError.
            return ChannelError(f"telegram: {text}", retryable=True)
        return ChannelError(f"telegram: {type(exc).__name__}: {text}", retryable=False)


def _retry_after(exc: RetryAfter) -> float:
    # PTB 22 gives an int and warns that it will become a timedelta; both are handled, so the
    # warning says nothing to us.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PTBDeprecationWarning)
        value = exc.retry_after
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


def _who(recipient: Recipient) -> str:
    return recipient.email or recipient.name or "recipient"
