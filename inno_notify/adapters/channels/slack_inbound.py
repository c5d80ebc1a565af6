"""What the Slack app hears: slash commands, DMs, Home tab opens and button presses, read into
domain.slack_commands.SlackRequest; and Socket Mode, the transport that needs no public endpoint.

Slack delivers the same payloads over both transports: a Socket Mode envelope's `payload` is what
the Events API, the slash command or the interactivity request would have POSTed (the form fields
of a slash command, the JSON of an event callback, the parsed `payload` field of an interaction).
So `read_request(kind, payload)` reads both; `kind` is the envelope type (`slash_commands`,
`events_api`, `interactive`). Everything in a payload is hostile until read here: a payload that
is not what we act on (a bot's own message, an edit, a channel message, a `message_changed`, an
unknown interaction) reads as None and is acknowledged without anything done.

Socket Mode (`SocketTransport`) uses slack-sdk's aiohttp `SocketModeClient`: `apps.connections.open`
with the app-level token (`xapp-…`, scope `connections:write`) hands out a WebSocket URL, Slack
sends `hello` and then envelopes, each acknowledged with its `envelope_id` within 3 s. An
envelope is acknowledged after it was handled, so one whose handling failed (the database away) is
not acknowledged and Slack delivers it again; its key makes a second handling change nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from slack_sdk.web.async_client import AsyncWebClient

from inno_notify.adapters.channels.slack import DEFAULT_API_URL
from inno_notify.domain.slack_commands import SlackRequest, SlackRequestKind

__all__ = ["COMMANDS", "EVENTS", "INTERACTIVE", "SocketTransport", "read_request"]

log = logging.getLogger(__name__)

# The envelope types of Socket Mode (and the HTTP routes that carry the same payloads).
COMMANDS = "slash_commands"
EVENTS = "events_api"
INTERACTIVE = "interactive"
# Slack's ids are short words of letters, digits and a few marks; anything else is not Slack's.
_ID = re.compile(r"[A-Za-z0-9._-]{1,80}")
# The longest text read from a request: commands are short (chat_commands reads 256 characters).
_TEXT_MAX = 1024

# Handles one request's payload (`kind`: an envelope type); raises when it could not be handled.
PayloadHandler = Callable[[str, Mapping[str, Any]], Awaitable[None]]


def read_request(kind: str, payload: Mapping[str, Any]) -> SlackRequest | None:
    """The request a payload holds, or None for anything the app does not act on."""
    if kind == COMMANDS:
        return _command(payload)
    if kind == EVENTS:
        return _event(payload)
    if kind == INTERACTIVE:
        return _interaction(payload)
    return None


def _command(payload: Mapping[str, Any]) -> SlackRequest | None:
    team, user, trigger = (
        _id(payload.get("team_id")),
        _id(payload.get("user_id")),
        _id(payload.get("trigger_id")),
    )
    if team is None or user is None or trigger is None:
        return None
    return SlackRequest(
        SlackRequestKind.COMMAND, team, user, f"command/{trigger}", text=_text(payload.get("text"))
    )


def _event(payload: Mapping[str, Any]) -> SlackRequest | None:
    if payload.get("type") != "event_callback":
        return None
    event = payload.get("event")
    team, event_id = _id(payload.get("team_id")), _id(payload.get("event_id"))
    if not isinstance(event, Mapping) or team is None or event_id is None:
        return None
    user = _id(event.get("user"))
    if user is None:
        return None
    if event.get("type") == "app_home_opened":
        if event.get("tab", "home") != "home":
            return None
        return SlackRequest(SlackRequestKind.HOME, team, user, f"event/{event_id}")
    if event.get("type") != "message" or event.get("channel_type") != "im":
        return None
    # Our own posts, other bots', edits, deletions, joins: every one carries a subtype or a bot id.
    if event.get("subtype") is not None or event.get("bot_id") is not None or event.get("bot_profile"):
        return None
    return SlackRequest(
        SlackRequestKind.MESSAGE, team, user, f"event/{event_id}", text=_text(event.get("text"))
    )


def _interaction(payload: Mapping[str, Any]) -> SlackRequest | None:
    if payload.get("type") != "block_actions":
        return None
    user, team = payload.get("user"), payload.get("team")
    user_id = _id(user.get("id")) if isinstance(user, Mapping) else None
    team_id = _id(team.get("id")) if isinstance(team, Mapping) else None
    trigger = _id(payload.get("trigger_id"))
    actions = payload.get("actions")
    first = actions[0] if isinstance(actions, list) and actions else None
    action = _id(first.get("action_id")) if isinstance(first, Mapping) else None
    if user_id is None or team_id is None or trigger is None or action is None:
        return None
    return SlackRequest(SlackRequestKind.ACTION, team_id, user_id, f"action/{trigger}", action=action)


def _id(value: object) -> str | None:
    return value if isinstance(value, str) and _ID.fullmatch(value) else None


def _text(value: object) -> str:
    return value[:_TEXT_MAX] if isinstance(value, str) else ""


class SocketTransport:
    """One Socket Mode connection (a leader component: `run` until its term's stop is set)."""

    def __init__(
        self, app_token: str, bot_token: str, handler: PayloadHandler, api_url: str = DEFAULT_API_URL
    ) -> None:
        if not app_token:
            raise ValueError("slack app token is empty")
        self._app_token = app_token
        self._bot_token = bot_token
        self._handler = handler
        self._api_url = api_url if api_url.endswith("/") else api_url + "/"

    async def run(self, stop: asyncio.Event) -> None:
        web = AsyncWebClient(token=self._bot_token, base_url=self._api_url, retry_handlers=[])
        client = SocketModeClient(self._app_token, web_client=web, logger=log)
        client.socket_mode_request_listeners.append(self._on_request)
        try:
            connecting = asyncio.ensure_future(client.connect())  # type: ignore[no-untyped-call]
            stopping = asyncio.ensure_future(stop.wait())
            try:
                # connect() retries by itself until it holds a session; a stop ends the wait.
                await asyncio.wait({connecting, stopping}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                stopping.cancel()
                if not connecting.done():
                    connecting.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await connecting
            if connecting.done() and not connecting.cancelled():
                connecting.result()
                log.info("slack: socket mode connected")
            await stop.wait()
        finally:
            await client.close()  # type: ignore[no-untyped-call]

    async def _on_request(self, client: Any, request: SocketModeRequest) -> None:
        kind, payload = request.type, request.payload
        if not isinstance(payload, Mapping):
            payload = {}
        try:
            await self._handler(kind, payload)
        except Exception as exc:
            # Not acknowledged: Slack delivers it again (an event) or tells the person it failed.
            log.warning("slack: %s envelope not handled: %s: %s", kind, type(exc).__name__, exc)
            return
        await client.send_socket_mode_response(SocketModeResponse(envelope_id=request.envelope_id))
