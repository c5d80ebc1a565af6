"""Sends Slack DMs and channel posts through slack-sdk's `AsyncWebClient`, and classifies failures.

A person is reached by `chat.postMessage(channel=<user id>)`, which posts into the app's DM with
them; a user id missing from the directory is looked up by e-mail once and cached for the life of
the process. The client is built with no retry handlers at all (slack-sdk otherwise retries
connection errors once): only the dispatcher retries.

Cluster data reaches Slack only escaped: message text is mrkdwn from render.py (every text object
`verbatim`, values escaped by markup.escape_mrkdwn), and a chart's alt text and file name, which
are not mrkdwn, are made inert here (markup.inert_slack_text).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from datetime import datetime
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from inno_notify.adapters.channels.base import (
    ChannelError,
    Recipient,
    RenderedMessage,
    SentLookup,
    SlackMessage,
    redact,
    wrong_message,
)
from inno_notify.adapters.channels.markup import inert_slack_text

log = logging.getLogger(__name__)

DEFAULT_API_URL = "https://slack.com/api/"

# The metadata every post carries (`chat.postMessage` `metadata`): its event type, and in its
# payload the outbox key and rows of the message, read back by `find_sent`.
EVENT_TYPE = "inno_notify_message"
# How far back `find_sent` reads a conversation: pages of history since the rows were written.
HISTORY_PAGE = 200
HISTORY_PAGES_MAX = 5

# Web API `error` values that a later attempt can cure; every other ok:false is permanent
# (users_not_found, channel_not_found, invalid_auth, not_authed, account_inactive, ...).
_TRANSIENT_ERRORS = frozenset(
    {"ratelimited", "rate_limited", "internal_error", "fatal_error", "service_unavailable", "request_timeout"}
)


class SlackSender(SentLookup):
    """A Slack app that DMs people and posts to team channels, and finds its own posts again."""

    def __init__(self, token: str, api_url: str = DEFAULT_API_URL, *, timeout: float = 10.0) -> None:
        if not token:
            raise ValueError("slack token is empty")
        self._token = token
        self._api_url = api_url if api_url.endswith("/") else api_url + "/"
        self._timeout = timeout
        self._session: aiohttp.ClientSession | None = None
        self._client: AsyncWebClient | None = None
        self._user_ids: dict[str, str] = {}

    def __repr__(self) -> str:
        return f"SlackSender(api_url={self._api_url!r})"

    async def send(self, recipient: Recipient, message: RenderedMessage) -> str:
        """Posts the message; returns `"{channel}:{ts}"`, what Slack needs to find it again."""
        if not isinstance(message, SlackMessage):
            raise wrong_message("slack", message)
        channel = recipient.slack_channel or recipient.slack_user_id
        if channel is None:
            if not recipient.email:
                raise ChannelError("slack: recipient has neither a user id nor an e-mail", retryable=False)
            channel = await self.user_id(recipient.email)
        response = await self._call(
            "chat_postMessage",
            channel=channel,
            text=message.text,
            blocks=list(message.blocks),
            metadata=_metadata(message),
        )
        posted_in, ts = str(response.get("channel", channel)), str(response.get("ts", ""))
        for image in message.images:
            # Into the post's thread: the picture stays with the text it illustrates. A failed upload
            # after an accepted post is reported but the post stands (it is not sent twice).
            try:
                await self._call(
                    "files_upload_v2",
                    channel=posted_in,
                    thread_ts=ts or None,
                    file=image.png,
                    filename=inert_slack_text(image.filename),
                    title=inert_slack_text(image.filename),
                    alt_txt=inert_slack_text(image.alt_text) if image.alt_text else None,
                )
            except ChannelError as exc:
                log.warning("slack: the post went out, its picture %s did not: %s", image.filename, exc)
        return f"{posted_in}:{ts}"

    async def find_sent(self, recipient: Recipient, rows: Collection[int], since: datetime) -> str | None:
        """`"{channel}:{ts}"` of a post since `since` whose metadata carries all of `rows`, read from
        the conversation's history (`conversations.history` with `include_all_metadata`; a DM's
        conversation found by `conversations.open`; scope `im:history`, `channels:history` for a
        team channel). A channel named, not given by id ("#face-gpu"), cannot be read: None."""
        wanted = set(rows)
        channel = await self._conversation(recipient)
        if channel is None or not wanted:
            return None
        cursor: str | None = None
        for _ in range(HISTORY_PAGES_MAX):
            response = await self._call(
                "conversations_history",
                channel=channel,
                oldest=f"{since.timestamp():.6f}",
                include_all_metadata=True,
                limit=HISTORY_PAGE,
                cursor=cursor,
            )
            messages = response.get("messages")
            for posted in messages if isinstance(messages, list) else ():
                if isinstance(posted, Mapping) and wanted <= _rows_of(posted):
                    return f"{channel}:{posted.get('ts', '')}"
            meta = response.get("response_metadata")
            cursor = meta.get("next_cursor") if isinstance(meta, Mapping) else None
            if not response.get("has_more") or not cursor:
                return None
        return None

    async def _conversation(self, recipient: Recipient) -> str | None:
        """The id of the conversation a post to `recipient` lands in."""
        if recipient.slack_channel:
            return None if recipient.slack_channel.startswith("#") else recipient.slack_channel
        user = recipient.slack_user_id
        if user is None:
            if not recipient.email:
                return None
            user = await self.user_id(recipient.email)
        response = await self._call("conversations_open", users=user)
        opened = response.get("channel")
        found = opened.get("id") if isinstance(opened, Mapping) else None
        return found if isinstance(found, str) and found else None

    async def user_id(self, email: str) -> str:
        """The Slack user id of an e-mail address, from the cache or `users.lookupByEmail`."""
        cached = self._user_ids.get(email.lower())
        if cached is not None:
            return cached
        response = await self._call("users_lookupByEmail", email=email)
        user = response.get("user")
        if not isinstance(user, Mapping) or not isinstance(user.get("id"), str):
            raise ChannelError("slack: users.lookupByEmail answered without a user id", retryable=False)
        self._user_ids[email.lower()] = user["id"]
        return str(user["id"])

    async def email_of(self, user_id: str) -> str | None:
        """The e-mail Slack's profile of `user_id` holds (`users.info`, scope `users:read.email`),
        or None (no such user, a bot, no e-mail); cached like `user_id` both ways."""
        for cached, known in self._user_ids.items():
            if known == user_id:
                return cached
        response = await self._call("users_info", user=user_id)
        user = response.get("user")
        if not isinstance(user, Mapping) or user.get("is_bot") or user.get("deleted"):
            return None
        profile = user.get("profile")
        email = profile.get("email") if isinstance(profile, Mapping) else None
        if not isinstance(email, str) or "@" not in email:
            return None
        self._user_ids[email.lower()] = user_id
        return email.lower()

    async def publish_home(self, user_id: str, view: Mapping[str, Any]) -> None:
        """Shows `view` as the person's App Home tab (`views.publish`)."""
        await self._call("views_publish", user_id=user_id, view=dict(view))

    async def check(self) -> str:
        """`auth.test`: the workspace and bot the token belongs to (for `inno-notify check`)."""
        response = await self._call("auth_test")
        return f"{response.get('team', '?')} as {response.get('user', '?')}"

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
        self._session = None
        self._client = None

    def _web_client(self) -> AsyncWebClient:
        if self._client is None:
            # A session of our own: slack-sdk otherwise opens and closes one per call.
            self._session = aiohttp.ClientSession()
            self._client = AsyncWebClient(
                token=self._token,
                base_url=self._api_url,
                timeout=int(max(1, round(self._timeout))),
                session=self._session,
                retry_handlers=[],
            )
        return self._client

    async def _call(self, method: str, **kwargs: Any) -> Mapping[str, Any]:
        call = getattr(self._web_client(), method)
        try:
            response = await call(**kwargs)
        except SlackApiError as exc:
            raise self._classify_api_error(method, exc) from None
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            detail = redact(str(exc) or type(exc).__name__, [self._token])
            raise ChannelError(f"slack {method}: network error: {detail}", retryable=True) from None
        except SlackClientError as exc:
            detail = redact(str(exc), [self._token])
            raise ChannelError(f"slack {method}: {detail}", retryable=False) from None
        data = response.data
        return data if isinstance(data, Mapping) else {}

    def _classify_api_error(self, method: str, exc: SlackApiError) -> ChannelError:
        status = int(getattr(exc.response, "status_code", 0) or 0)
        data = getattr(exc.response, "data", None)
        error = str(data.get("error")) if isinstance(data, Mapping) and data.get("error") else None
        retry_after = _retry_after(getattr(exc.response, "headers", None))
        what = redact(error or f"HTTP {status}", [self._token])
        if status == 429 or status >= 500 or error in _TRANSIENT_ERRORS:
            return ChannelError(f"slack {method}: {what}", retryable=True, retry_after=retry_after)
        return ChannelError(f"slack {method}: {what}", retryable=False)


def _metadata(message: SlackMessage) -> dict[str, Any] | None:
    if message.key is None:
        return None
    return {"event_type": EVENT_TYPE, "event_payload": {"key": message.key, "rows": list(message.rows)}}


def _rows_of(posted: Mapping[str, Any]) -> set[int]:
    """The outbox rows a post of ours carried (its metadata), none for anything else."""
    metadata = posted.get("metadata")
    if not isinstance(metadata, Mapping) or metadata.get("event_type") != EVENT_TYPE:
        return set()
    payload = metadata.get("event_payload")
    rows = payload.get("rows") if isinstance(payload, Mapping) else None
    if not isinstance(rows, list):
        return set()
    return {row for row in rows if isinstance(row, int) and not isinstance(row, bool)}


def _retry_after(headers: Any) -> float | None:
    if not headers:
        return None
    value = headers.get("Retry-After") or headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None
