"""Posts every message to the service's webhook (`channels.webhook`) as signed JSON, and classifies
failures.

The body is one JSON object in the versioned schema SCHEMA (docs/channels.md documents it): the
envelope (`schema`, `kind`, `key`, `recipient`, `title`, `text`, `links`) and the message's views
under their names (`job`, `items`, `nudges`, `workflow`, `model`, `messages`, `digest`), made by
`body` from a WebhookMessage (webhook_views). A receiver checks that it comes from us with
`X-Inno-Notify-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>`, the
scheme of Slack's and Stripe's signatures: the timestamp is signed with the body, so a receiver
can refuse an old request replayed. `X-Inno-Notify-Key` is the message's key, the same on every
attempt: a receiver that saw it already can drop the repeat (delivery is at least once).

Failures (base.http_failure): 429 is rate limiting, with Retry-After's seconds; 408, 5xx, a
connection that fails or times out are worth another try; any other status is permanent. Redirects
are not followed (a POST redirected is a URL to fix). Only the dispatcher retries.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable
from typing import Any

import aiohttp
import orjson

from inno_notify.adapters.channels.base import (
    ChannelError,
    Recipient,
    RenderedMessage,
    WebhookMessage,
    http_failure,
    redact,
    seconds_header,
    wrong_message,
)

SCHEMA = "inno-notify.message/v1"
SIGNATURE_HEADER = "X-Inno-Notify-Signature"
KEY_HEADER = "X-Inno-Notify-Key"
# The envelope's fields: the views of a message never take one of these names.
ENVELOPE = ("schema", "kind", "key", "recipient", "title", "text", "links")


def body(message: WebhookMessage) -> dict[str, Any]:
    """The JSON object the webhook receives for `message` (the one definition of its shape)."""
    document: dict[str, Any] = {
        "schema": SCHEMA,
        "kind": message.kind,
        "key": message.key,
        "recipient": message.recipient,
        "title": message.title,
        "text": message.text,
        "links": [{"rel": link.rel, "title": link.title, "url": link.url} for link in message.links],
    }
    document.update((name, value) for name, value in message.data.items() if name not in ENVELOPE)
    return document


def signature(secret: str, timestamp: int, payload: bytes) -> str:
    """The X-Inno-Notify-Signature value of `payload` sent at `timestamp` (unix seconds)."""
    mac = hmac.new(secret.encode("utf-8"), f"{timestamp}.".encode() + payload, hashlib.sha256)
    return f"t={timestamp},v1={mac.hexdigest()}"


class WebhookSender:
    """POSTs each message to one URL, signed with the shared secret; one instance per process."""

    def __init__(
        self,
        url: str,
        secret: str,
        *,
        timeout: float = 10.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not url.startswith(("https://", "http://")):
            raise ValueError("webhook url must be an http(s) URL")
        if not secret:
            raise ValueError("webhook secret is empty")
        self._url = url
        self._secret = secret
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._clock = clock
        self._session: aiohttp.ClientSession | None = None

    def __repr__(self) -> str:
        # The URL may carry a token of the receiver's (a query string): only its origin is shown.
        return f"WebhookSender(url={self._url.split('?', 1)[0]!r})"

    async def send(self, recipient: Recipient, message: RenderedMessage) -> str:
        """Posts the message; returns its key (the receiver's answer carries no id of ours)."""
        if not isinstance(message, WebhookMessage):
            raise wrong_message("webhook", message)
        payload = orjson.dumps(body(message))
        headers = {
            "Content-Type": "application/json",
            SIGNATURE_HEADER: signature(self._secret, int(self._clock()), payload),
        }
        if message.key:
            headers[KEY_HEADER] = message.key
        try:
            async with self._client().post(
                self._url, data=payload, headers=headers, allow_redirects=False
            ) as response:
                status = response.status
                retry_after = seconds_header(response.headers.get("Retry-After"))
                await response.read()
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            detail = redact(str(exc) or type(exc).__name__, [self._secret, self._url])
            raise ChannelError(f"webhook: network error: {detail}", retryable=True) from None
        if not 200 <= status < 300:
            raise http_failure("webhook", status, retry_after)
        return message.key or f"HTTP {status}"

    async def check(self) -> str:
        """Reaches the receiver with a HEAD request, which carries no message (for `inno-notify
        check`): any HTTP answer, a 405 included, says that it is there."""
        try:
            async with self._client().head(self._url, allow_redirects=False) as response:
                return f"{self!r} answers HTTP {response.status}"
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            detail = redact(str(exc) or type(exc).__name__, [self._secret, self._url])
            raise ChannelError(f"webhook: network error: {detail}", retryable=True) from None

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
        self._session = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        return self._session
