"""POST /slack/events, /slack/commands, /slack/interactive: the Slack app's requests over HTTP,
when `channels.slack.signing_secret` is set (docs/selfservice.md).

Not resources of the API and no bearer token: Slack signs each request, `X-Slack-Signature` =
`v0=` + HMAC-SHA256(signing secret, `v0:{X-Slack-Request-Timestamp}:{body}`), checked with
slack-sdk's `SignatureVerifier` against the API's clock. A request without a valid signature, or
one whose timestamp is more than 5 minutes away (a replay), is refused (401) and nothing is read
from it. The body is then read by its route:

- /slack/events: the Events API's JSON; the `url_verification` handshake is answered with its
  challenge; an event callback goes to the service's handler as `events_api`.
- /slack/commands: the slash command's form fields, as `slash_commands`.
- /slack/interactive: the form field `payload` (JSON), as `interactive`.

The handler (service.slack_bot, passed in by the runtime: the API does not import the service)
carries the request out in one transaction; 200 (an empty body: nothing is posted in the channel
the command was typed in, the answer comes as a DM) tells Slack it is done, an error makes Slack
deliver an event again, and an event handled before changes nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime

from aiohttp import web
from slack_sdk.signature import Clock, SignatureVerifier

from inno_notify.api import keys
from inno_notify.api.errors import ApiError, bad_request
from inno_notify.api.params import bounded_body, json_object, provider_form
from inno_notify.api.views.respond import json

EVENTS_PATH = "/slack/events"
COMMANDS_PATH = "/slack/commands"
INTERACTIVE_PATH = "/slack/interactive"
OPEN_PATHS = frozenset({EVENTS_PATH, COMMANDS_PATH, INTERACTIVE_PATH})
TIMESTAMP_HEADER = "X-Slack-Request-Timestamp"
SIGNATURE_HEADER = "X-Slack-Signature"
# A slash command, an event or an interaction with its view: tens of kilobytes at most.
MAX_BODY = 256 * 1024


class _ApiClock(Clock):
    """slack-sdk's clock, read from the API's own (a test's fake clock decides what is stale)."""

    def __init__(self, clock: Callable[[], datetime]) -> None:
        self._clock = clock

    def now(self) -> float:
        return self._clock().timestamp()


def add_routes(app: web.Application) -> None:
    app.router.add_post(EVENTS_PATH, slack_events)
    app.router.add_post(COMMANDS_PATH, slack_commands)
    app.router.add_post(INTERACTIVE_PATH, slack_interactive)


async def _verified_body(request: web.Request) -> bytes:
    """The body, once its signature holds (401 otherwise, 413 when too large)."""
    raw = await bounded_body(request, MAX_BODY)
    timestamp = request.headers.get(TIMESTAMP_HEADER, "")
    signature = request.headers.get(SIGNATURE_HEADER, "")
    hooks = request.app[keys.SLACK_REQUESTS]
    verifier = SignatureVerifier(hooks.signing_secret, clock=_ApiClock(request.app[keys.CLOCK]))
    try:
        # slack-sdk reads the timestamp as an integer and the body as UTF-8: both hostile here.
        valid = timestamp.isdigit() and len(timestamp) <= 12 and verifier.is_valid(raw, timestamp, signature)
    except (ValueError, UnicodeDecodeError):
        valid = False
    if not valid:
        raise ApiError(401, "unauthorized", f"the {SIGNATURE_HEADER} signature is missing, wrong or too old")
    return raw


def _form(raw: bytes) -> dict[str, str]:
    fields = provider_form(raw)
    if fields is None:
        raise bad_request("the body is not a form", code="invalid_body")
    return fields


def _handler(request: web.Request) -> Callable[[str, dict[str, object]], Awaitable[None]]:
    return request.app[keys.SLACK_REQUESTS].handle


async def slack_events(request: web.Request) -> web.Response:
    body = json_object(await _verified_body(request))
    if body.get("type") == "url_verification":
        challenge = body.get("challenge")
        if not isinstance(challenge, str) or len(challenge) > 200:
            raise bad_request("the challenge is missing", code="invalid_body")
        return json({"challenge": challenge})
    await _handler(request)("events_api", body)
    return json({})


async def slack_commands(request: web.Request) -> web.Response:
    fields = _form(await _verified_body(request))
    await _handler(request)("slash_commands", dict(fields))
    return web.Response(status=200)


async def slack_interactive(request: web.Request) -> web.Response:
    fields = _form(await _verified_body(request))
    payload = fields.get("payload")
    if payload is None:
        raise bad_request("the form has no payload", code="invalid_body")
    await _handler(request)("interactive", json_object(payload))
    return web.Response(status=200)


__all__ = ["OPEN_PATHS", "add_routes"]
