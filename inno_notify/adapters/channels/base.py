"""What every channel shares: the recipient, the rendered message per channel, the failure type.

The dispatcher (service layer) is the only place that retries. A channel therefore never retries
by itself; it turns every failure into one `ChannelError` that says whether a retry can help and
after how long, with a message that is safe to store in the outbox and to log (no token, no
password).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

TELEGRAM_MAX_CHARS = 4096
# A photo's caption, counted after the HTML markup is parsed.
TELEGRAM_MAX_CAPTION_CHARS = 1024
SLACK_MAX_BLOCKS = 50
SLACK_MAX_SECTION_CHARS = 3000
# Slack truncates a too-long `text` itself, but 40,000 is the documented ceiling; keep well below.
SLACK_MAX_TEXT_CHARS = 3000
# Mattermost's default MaxPostSize (runes); a longer post is refused with 400.
MATTERMOST_MAX_CHARS = 16383

_REDACTED = "[redacted]"


class ChannelError(Exception):
    """A send that did not go through, classified for the dispatcher.

    ``retryable`` says whether sending the same message later can succeed; ``retry_after`` is the
    provider's own wait (Retry-After, Telegram's ``retry_after``) in seconds, else ``None`` and
    the dispatcher picks its backoff. The message never contains a secret.
    """

    def __init__(self, message: str, *, retryable: bool, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.retryable = retryable
        self.retry_after = retry_after

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.message!r}, retryable={self.retryable}, "
            f"retry_after={self.retry_after})"
        )


def redact(text: str, secrets: Iterable[str | None]) -> str:
    """Removes every secret from a library's error text before it becomes ours."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, _REDACTED)
    return text


@dataclass(frozen=True, slots=True)
class Recipient:
    """Where one person (or a team channel) can be reached; each channel reads its own field."""

    email: str | None = None
    name: str | None = None
    telegram_chat_id: int | None = None
    slack_user_id: str | None = None
    # A channel post (a team digest) instead of a DM: "#face-gpu" or a channel id.
    slack_channel: str | None = None


@dataclass(frozen=True, slots=True)
class TelegramMessage:
    """Telegram text in parse mode HTML, already escaped and at most TELEGRAM_MAX_CHARS long."""

    html: str
    # A picture for the message (a job's chart): sent as a photo with the text as its caption when
    # the text fits a caption, else as a second message replying to the text.
    images: tuple[InlineImage, ...] = ()


@dataclass(frozen=True, slots=True)
class SlackMessage:
    """Block Kit blocks plus the plain `text` fallback Slack shows in notifications."""

    text: str
    blocks: tuple[Mapping[str, Any], ...] = ()
    # Pictures uploaded into the post's thread (the digest's chart, a job's chart).
    images: tuple[InlineImage, ...] = ()
    # What the message is (the dispatcher's key of its outbox rows) and the rows it carries: posted
    # as the message's metadata, so that a new leader can find it in the conversation's history
    # (SentLookup) instead of posting it again. None: no metadata.
    key: str | None = None
    rows: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class InlineImage:
    """A PNG shown inside the HTML part, referenced there as ``<img src="cid:{cid}">``."""

    cid: str
    png: bytes
    filename: str = "chart.png"
    # Alt text for readers that cannot see the picture (Slack shows it; e-mail has it in the HTML).
    alt_text: str = ""


@dataclass(frozen=True, slots=True)
class MailMessage:
    """A multipart e-mail: plain text, HTML alternative, and inline images related to the HTML."""

    subject: str
    text: str
    html: str
    images: tuple[InlineImage, ...] = field(default=())
    # What the message is, stably (hex; the dispatcher's digest of its outbox rows): the same key
    # gives the same Message-ID, so a resend after a crash collapses into the first in mail
    # clients. None: a Message-ID of its own.
    key: str | None = None
    # The recipient's signed one-click unsubscribe link (domain.page_links; stamped by the
    # dispatcher's composer like `key`), for the List-Unsubscribe headers. None: none.
    unsubscribe_url: str | None = None


@dataclass(frozen=True, slots=True)
class MattermostMessage:
    """A Mattermost post's `message`: Markdown, values escaped, at most MATTERMOST_MAX_CHARS long."""

    markdown: str


@dataclass(frozen=True, slots=True)
class WebLink:
    """A link a message carries, for the webhook's `links`: what it opens (`rel`: page, logs,
    grafana, team_page, or link for one its owner annotated), its label and its URL."""

    rel: str
    title: str
    url: str


@dataclass(frozen=True, slots=True)
class WebhookMessage:
    """A message for the webhook (adapters.channels.webhook), before its envelope is added: its kind
    (the template set it was rendered with), the e-mail's subject and plain text without its footer,
    its links, and `data`: the views it was rendered from, as JSON (one object per view name)."""

    kind: str
    title: str
    text: str
    links: tuple[WebLink, ...] = ()
    data: Mapping[str, Any] = field(default_factory=dict)
    # Stamped by the dispatcher's composer like MailMessage.key: the message's stable key (the
    # X-Inno-Notify-Key header) and the outbox row's recipient (an e-mail, or "#face-gpu").
    key: str | None = None
    recipient: str | None = None


RenderedMessage = TelegramMessage | SlackMessage | MailMessage | WebhookMessage | MattermostMessage


class Sender(Protocol):
    """One channel: sends a message it rendered for, returns the provider's message id."""

    async def send(self, recipient: Recipient, message: RenderedMessage) -> str:
        """Raises ChannelError when the provider did not accept the message."""
        ...

    async def aclose(self) -> None:
        """Releases connections; the sender is not used afterwards."""
        ...


@runtime_checkable
class SentLookup(Protocol):
    """A channel that can tell whether a message already arrived (Slack: its metadata, read back
    from the conversation's history). Asked before sending rows whose previous claim ended with
    their outcome unknown (a leader killed or frozen between the provider's answer and its record)."""

    async def find_sent(self, recipient: Recipient, rows: Collection[int], since: datetime) -> str | None:
        """The provider's id of a message posted at or after `since` that carried all of `rows`,
        or None. Raises ChannelError when the provider could not be asked."""
        ...


def wrong_message(channel: str, message: object) -> TypeError:
    """A dispatcher bug (a message rendered for another channel), not a delivery failure."""
    return TypeError(f"{channel} cannot send a {type(message).__name__}")


def http_failure(what: str, status: int, retry_after: float | None = None) -> ChannelError:
    """An HTTP answer that is no success, for channels that speak plain HTTP (webhook, Mattermost):
    429 is rate limiting (with the provider's wait), 408 and 5xx are worth another try, every other
    status (a 3xx not followed, a 4xx) says the request itself is wrong and is permanent."""
    if status == 429:
        return ChannelError(f"{what}: HTTP 429 rate limited", retryable=True, retry_after=retry_after)
    if status == 408 or status >= 500:
        return ChannelError(f"{what}: HTTP {status}", retryable=True, retry_after=retry_after)
    return ChannelError(f"{what}: HTTP {status}", retryable=False)


def seconds_header(value: str | None) -> float | None:
    """A header that gives a wait in seconds (Retry-After's delta-seconds, X-Ratelimit-Reset), or
    None when absent or not a number a wait can be (negative, not finite, over a day)."""
    if value is None:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    return seconds if 0 <= seconds <= 86400 else None
