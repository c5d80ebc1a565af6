"""Sends Telegram messages through python-telegram-bot's `Bot`, and classifies what went wrong.

`api_url` is the Bot API server root (CONTRACT.md §2): requests go to
`{api_url}/bot{token}/{method}`, which is PTB's `base_url=f"{api_url}/bot"` (PTB appends the
token). The HTTP transport is ours (telegram_transport: aiohttp, a third of httpx's CPU per send);
like PTB's it does not retry, and we create it ourselves so that `aclose` can shut it down without
`Bot.initialize`, which would cost a `getMe` per start.

A message with a picture (a job's chart) is one photo with the summary as its caption when the
summary fits a caption (1,024 characters once the HTML is parsed); a longer one goes as the text
message, then the photo as a reply to it, captioned with the picture's alt text as plain text
(nothing parses it). A photo that fails after the text was accepted is logged; the text stands
and is not sent twice.
"""

from __future__ import annotations

import html
import logging
import re
import warnings
from datetime import timedelta

from telegram import Bot, InputFile, LinkPreviewOptions, ReplyParameters
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
from telegram.warnings import PTBDeprecationWarning

from inno_notify.adapters.channels.base import (
    TELEGRAM_MAX_CAPTION_CHARS,
    ChannelError,
    InlineImage,
    Recipient,
    RenderedMessage,
    TelegramMessage,
    redact,
    wrong_message,
)
from inno_notify.adapters.channels.telegram_transport import AiohttpRequest

log = logging.getLogger(__name__)

DEFAULT_API_URL = "https://api.telegram.org"
# Connections to the Bot API: the dispatcher's concurrent sends (16) each get one.
DEFAULT_POOL_SIZE = 16


def bot_client(token: str, api_url: str, *, timeout: float, pool_size: int) -> tuple[AiohttpRequest, Bot]:
    """A Bot API client for `token` on our aiohttp transport (telegram_transport), one connection
    pool for every call; the caller shuts the transport down when done."""
    if not token:
        raise ValueError("telegram token is empty")
    request = AiohttpRequest(timeout=timeout, pool_size=pool_size)
    bot = Bot(token, base_url=f"{api_url.rstrip('/')}/bot", request=request, get_updates_request=request)
    return request, bot


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
        self._request, self._bot = bot_client(token, api_url, timeout=timeout, pool_size=pool_size)
        self._token = token
        self._api_url = api_url

    def __repr__(self) -> str:
        return f"TelegramSender(api_url={self._api_url!r})"

    async def send(self, recipient: Recipient, message: RenderedMessage) -> str:
        if not isinstance(message, TelegramMessage):
            raise wrong_message("telegram", message)
        if recipient.telegram_chat_id is None:
            raise ChannelError(f"{_who(recipient)} has no telegram chat id", retryable=False)
        chat = recipient.telegram_chat_id
        image = message.images[0] if message.images else None
        try:
            if image is not None and caption_length(message.html) <= TELEGRAM_MAX_CAPTION_CHARS:
                sent = await self._bot.send_photo(
                    chat_id=chat, photo=_photo(image), caption=message.html, parse_mode=ParseMode.HTML
                )
                return str(sent.message_id)
            sent = await self._bot.send_message(
                chat_id=chat,
                text=message.html,
                parse_mode=ParseMode.HTML,
                link_preview_options=LinkPreviewOptions(is_disabled=True),
            )
        except TelegramError as exc:
            raise self._classify(exc) from None
        if image is not None:
            try:
                await self._bot.send_photo(
                    chat_id=chat,
                    photo=_photo(image),
                    caption=image.alt_text[:TELEGRAM_MAX_CAPTION_CHARS] or None,
                    reply_parameters=ReplyParameters(message_id=sent.message_id),
                )
            except TelegramError as exc:
                log.warning(
                    "telegram: the message went out, its picture %s did not: %s",
                    image.filename,
                    self._classify(exc),
                )
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
        return classify(exc, self._token)


def classify(exc: TelegramError, token: str) -> ChannelError:
    """A Bot API failure as a ChannelError: retryable or not, the provider's wait, no token in it."""
    # Order matters: BadRequest and TimedOut are NetworkError subclasses in PTB.
    text = redact(exc.message, [token])
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


_TAG = re.compile(r"<[^>]*>")


def caption_length(text_html: str) -> int:
    """Characters Telegram counts in an HTML text: without the tags, entities as one character,
    in UTF-16 code units (as Telegram counts)."""
    visible = html.unescape(_TAG.sub("", text_html))
    return len(visible.encode("utf-16-le")) // 2


def _photo(image: InlineImage) -> InputFile:
    return InputFile(image.png, filename=image.filename)


def _who(recipient: Recipient) -> str:
    return recipient.email or recipient.name or "recipient"
