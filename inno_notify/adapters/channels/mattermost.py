"""Sends Mattermost direct messages from a bot through the REST API v4 (aiohttp), and classifies failures.

A person is reached by e-mail: `GET /api/v4/users/email/{email}` gives their user id, the bot's own
comes from `GET /api/v4/users/me`, `POST /api/v4/channels/direct` with both ids gives the DM
channel (the same one every time), and `POST /api/v4/posts {channel_id, message}` posts the
Markdown (render.py, from the same views and templates as Slack). The ids are cached for the life
of the process, as Slack's user look-up is, so a second message to a person is one request.

Failures: 429 is rate limiting and waits `X-Ratelimit-Reset` seconds (Mattermost's header; a
`Retry-After` when a proxy sends one instead); 408, 5xx and connection trouble are worth another
try; 401, 403, 404 (no such user: nobody with that e-mail on the server) and every other status
are permanent. Only the dispatcher retries; the token never appears in an error.

The other way round, for the `/inno` slash command (service.mattermost_commands): `email_of` reads
the account of the user id Mattermost sent (`GET /api/v4/users/{user_id}`) for its e-mail.
"""

from __future__ import annotations

import asyncio
import re
from collections import defaultdict
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import aiohttp

from inno_notify.adapters.channels.base import (
    ChannelError,
    MattermostMessage,
    Recipient,
    RenderedMessage,
    http_failure,
    redact,
    seconds_header,
    wrong_message,
)

# Mattermost's ids: 26 characters of lower-case base32 (model.NewId).
_USER_ID = re.compile(r"[a-z0-9]{26}")


class MattermostSender:
    """A bot account that DMs people on one Mattermost server; one instance per process."""

    def __init__(self, url: str, token: str, *, timeout: float = 10.0) -> None:
        if not url.startswith(("https://", "http://")):
            raise ValueError("mattermost url must be an http(s) URL")
        if not token:
            raise ValueError("mattermost token is empty")
        self._api = url.rstrip("/") + "/api/v4"
        self._token = token
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None
        self._bot_id: str | None = None
        # lower-case e-mail -> user id; user id -> the bot's direct channel with them.
        self._user_ids: dict[str, str] = {}
        self._channels: dict[str, str] = {}
        # One lookup at a time per user: two messages to a new recipient sent at once (a summary and
        # a digest) ask the server once, not twice.
        self._lookups: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)

    def __repr__(self) -> str:
        return f"MattermostSender(api={self._api!r})"

    async def send(self, recipient: Recipient, message: RenderedMessage) -> str:
        """Posts the message into the bot's DM with the recipient; returns the post's id."""
        if not isinstance(message, MattermostMessage):
            raise wrong_message("mattermost", message)
        if not recipient.email:
            raise ChannelError("mattermost: the recipient has no e-mail to find them by", retryable=False)
        channel = await self.direct_channel(await self.user_id(recipient.email))
        post = await self._call("POST", "/posts", {"channel_id": channel, "message": message.markdown})
        return _id(post, "posts")

    async def user_id(self, email: str) -> str:
        """The Mattermost user id of an e-mail address, from the cache or the server."""
        key = email.strip().lower()
        cached = self._user_ids.get(key)
        if cached is not None:
            return cached
        async with self._lookups[f"email:{key}"]:
            cached = self._user_ids.get(key)
            if cached is None:
                path = f"/users/email/{quote(key, safe='@')}"
                cached = self._user_ids[key] = _id(
                    await self._call("GET", path, not_found=f"no user {key}"), "users/email"
                )
        return cached

    async def email_of(self, user_id: str) -> str | None:
        """The e-mail of the Mattermost account `user_id` (`GET /api/v4/users/{user_id}`), for the
        slash command to find the person by: None for an id that is no user's, a deactivated
        account, or one whose e-mail the server hides from the bot (privacy settings). Not cached:
        an account's e-mail may change, and a command is rare."""
        if not _USER_ID.fullmatch(user_id):
            return None
        user = await self._call("GET", f"/users/{user_id}", quiet_404=True)
        email = user.get("email")
        if not user or user.get("delete_at") or not isinstance(email, str) or "@" not in email:
            return None
        return email.strip()

    async def direct_channel(self, user_id: str) -> str:
        """The id of the bot's direct channel with `user_id` (Mattermost makes it on first use)."""
        cached = self._channels.get(user_id)
        if cached is not None:
            return cached
        bot = await self.bot_id()
        async with self._lookups[f"dm:{user_id}"]:
            cached = self._channels.get(user_id)
            if cached is None:
                channel = await self._call("POST", "/channels/direct", [bot, user_id])
                cached = self._channels[user_id] = _id(channel, "channels/direct")
        return cached

    async def bot_id(self) -> str:
        """The bot's own user id (`users/me`)."""
        if self._bot_id is None:
            self._bot_id = _id(await self._call("GET", "/users/me"), "users/me")
        return self._bot_id

    async def check(self) -> str:
        """`users/me`: the bot the token belongs to (for `inno-notify check`)."""
        me = await self._call("GET", "/users/me")
        return f"{self._api} as @{me.get('username', '?')}"

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
        self._session = None

    async def _call(
        self,
        method: str,
        path: str,
        payload: Any = None,
        *,
        not_found: str | None = None,
        quiet_404: bool = False,
    ) -> Mapping[str, Any]:
        """The answer's JSON object; with `quiet_404`, a 404 is an empty one instead of an error."""
        what = f"mattermost {method} {path.split('/email/')[0]}"
        try:
            async with self._client().request(
                method, self._api + path, json=payload, allow_redirects=False
            ) as response:
                status = response.status
                headers = response.headers
                try:
                    data = await response.json(content_type=None)
                except ValueError:
                    data = None
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            detail = redact(str(exc) or type(exc).__name__, [self._token])
            raise ChannelError(f"{what}: network error: {detail}", retryable=True) from None
        if 200 <= status < 300:
            return data if isinstance(data, Mapping) else {}
        if status == 404 and quiet_404:
            return {}
        if status == 404 and not_found is not None:
            raise ChannelError(f"mattermost: {not_found} (HTTP 404)", retryable=False)
        wait = seconds_header(headers.get("X-Ratelimit-Reset")) or seconds_header(headers.get("Retry-After"))
        error = http_failure(what, status, wait)
        error_id = data.get("id") if isinstance(data, Mapping) else None
        if isinstance(error_id, str) and error_id:
            # Mattermost's error id (api.context.session_expired.app_error, …): no user data in it.
            error.message = f"{error.message} ({redact(error_id, [self._token])})"
            error.args = (error.message,)
        raise error

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                timeout=self._timeout, headers={"Authorization": f"Bearer {self._token}"}
            )
        return self._session


def _id(data: Mapping[str, Any], what: str) -> str:
    value = data.get("id")
    if not isinstance(value, str) or not value:
        raise ChannelError(f"mattermost {what}: the answer has no id", retryable=False)
    return value
