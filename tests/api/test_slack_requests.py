"""POST /slack/events, /slack/commands, /slack/interactive: Slack's requests over HTTP, signed with the
app's signing secret. A valid signature changes what the request asks for; a wrong, missing or
stale one (over 5 minutes, by the API's clock) is refused with 401 and changes nothing.

The handler is the service's own on the real store (Postgres and SQLite); the Web API it asks
(users.info, views.publish) is the local fake.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import aiohttp
import pytest
from aiohttp.test_utils import TestServer
from slack_sdk.signature import SignatureVerifier

from inno_notify.adapters.channels.slack import SlackSender
from inno_notify.adapters.db import Store
from inno_notify.api.app import create_app
from inno_notify.api.keys import SlackRequests
from inno_notify.domain.model import DirectoryUser, NotificationKind, NotifyMode
from inno_notify.domain.preferences import Via
from inno_notify.service.slack_bot import SlackHandler
from tests.adapters.channels.conftest import SLACK_TOKEN, slack_api
from tests.adapters.channels.fake_slack import FakeSlack

from .support import SETTINGS

__all__ = ["slack_api"]  # the fake Web API's fixture, shared with the channel tests

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
BOB = "U0BOB"


@dataclass
class Served:
    store: Store
    fake: FakeSlack
    base: str
    session: aiohttp.ClientSession

    async def post(
        self,
        path: str,
        body: bytes,
        *,
        content_type: str,
        at: datetime = NOW,
        secret: str = SECRET,
        signature: str | None = None,
    ) -> tuple[int, bytes]:
        timestamp = str(int(at.timestamp()))
        signed = SignatureVerifier(secret).generate_signature(timestamp=timestamp, body=body)
        headers = {
            "Content-Type": content_type,
            "X-Slack-Request-Timestamp": timestamp,
            "X-Slack-Signature": signature if signature is not None else str(signed),
        }
        async with self.session.post(self.base + path, data=body, headers=headers) as response:
            return response.status, await response.read()

    async def command(self, text: str, **kw: Any) -> int:
        body = urlencode(
            {"team_id": "T0", "user_id": BOB, "command": "/inno", "text": text, "trigger_id": "1.2.3"}
        ).encode()
        status, _ = await self.post(
            "/slack/commands", body, content_type="application/x-www-form-urlencoded", **kw
        )
        return status

    async def bob(self) -> DirectoryUser:
        found = await self.store.directory.get_user("bob@example.com")
        assert found is not None
        return found


@pytest.fixture
async def served(store: Store, slack_api: tuple[FakeSlack, str]) -> AsyncIterator[Served]:
    fake, api_url = slack_api
    await store.directory.upsert_user(
        DirectoryUser("bob@example.com", "Bob", slack_user_id=BOB, channels=("slack", "email"))
    )
    workspace = SlackSender(SLACK_TOKEN, api_url, timeout=5.0)
    handler = SlackHandler(store, workspace, lambda: NOW)

    async def handle(kind: str, payload: Any) -> None:
        await handler.handle(kind, payload, fenced=False)

    app = create_app(store, SETTINGS, slack_requests=SlackRequests(SECRET, handle), clock=lambda: NOW)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    session = aiohttp.ClientSession()
    try:
        yield Served(store, fake, str(server.make_url("")).rstrip("/"), session)
    finally:
        await session.close()
        await server.close()
        await workspace.aclose()


async def test_a_signed_slash_command_changes_preferences_and_plans_the_answer(served: Served) -> None:
    assert await served.command("failures") == 200
    assert (await served.bob()).notify is NotifyMode.FAILURE
    prefs = await served.store.directory.get_preferences("bob@example.com")
    assert prefs is not None and (prefs.origins["notify"].via, prefs.origins["notify"].by) == (Via.SLACK, BOB)
    rows, _ = await served.store.outbox.list_notifications(limit=10)
    assert [(r.kind, r.recipient) for r in rows] == [(NotificationKind.BOT_REPLY, f"slack:{BOB}")]


@pytest.mark.parametrize(
    "kw",
    [
        {"secret": "not-the-secret"},  # signed with another secret
        {"at": NOW - timedelta(minutes=5, seconds=30)},  # stale: a replay
        {"at": NOW + timedelta(minutes=6)},  # from the future
        {"signature": ""},
        {"signature": "v0=" + "0" * 64},
        {"signature": "v1=abc"},
    ],
)
async def test_a_wrong_or_stale_signature_is_refused_and_changes_nothing(
    served: Served, kw: dict[str, Any]
) -> None:
    assert await served.command("stop all", **kw) == 401
    bob = await served.bob()
    assert (bob.channels, bob.notify) == (("slack", "email"), NotifyMode.ALWAYS)
    assert (await served.store.outbox.list_notifications(limit=10))[0] == []


async def test_a_body_changed_after_signing_is_refused(served: Served) -> None:
    body = urlencode({"team_id": "T0", "user_id": BOB, "text": "failures", "trigger_id": "1.2.3"}).encode()
    timestamp = str(int(NOW.timestamp()))
    signature = SignatureVerifier(SECRET).generate_signature(timestamp=timestamp, body=body)
    tampered = body.replace(b"failures", b"stop+all")
    status, _ = await served.post(
        "/slack/commands", tampered, content_type="application/x-www-form-urlencoded", signature=signature
    )
    assert status == 401
    assert (await served.bob()).channels == ("slack", "email")


@pytest.mark.parametrize("timestamp", ["", "soon", "-1", "9" * 40, "1e9"])
async def test_a_hostile_timestamp_is_refused(served: Served, timestamp: str) -> None:
    headers = {"X-Slack-Request-Timestamp": timestamp, "X-Slack-Signature": "v0=00"}
    async with served.session.post(served.base + "/slack/events", data=b"{}", headers=headers) as response:
        assert response.status == 401


async def test_the_url_verification_challenge_is_answered(served: Served) -> None:
    body = json.dumps(
        {
            "type": "url_verification",
            "token": "x",
            "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P",
        }
    )
    status, answer = await served.post("/slack/events", body.encode(), content_type="application/json")
    assert status == 200
    assert json.loads(answer) == {"challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}


async def test_a_signed_dm_event_and_a_button_change_preferences(served: Served) -> None:
    event = {
        "type": "event_callback",
        "team_id": "T0",
        "event_id": "Ev0HTTP1",
        "event": {"type": "message", "channel_type": "im", "user": BOB, "text": "nudges off", "ts": "1.1"},
    }
    status, _ = await served.post(
        "/slack/events", json.dumps(event).encode(), content_type="application/json"
    )
    assert status == 200 and (await served.bob()).nudges is False

    action = {
        "type": "block_actions",
        "user": {"id": BOB},
        "team": {"id": "T0"},
        "trigger_id": "7.7.7",
        "actions": [{"action_id": "inno_nudges_on"}],
    }
    body = urlencode({"payload": json.dumps(action)}).encode()
    status, _ = await served.post(
        "/slack/interactive", body, content_type="application/x-www-form-urlencoded"
    )
    assert status == 200 and (await served.bob()).nudges is True
    assert "Idle-GPU nudges: on" in str(served.fake.homes[BOB])


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/slack/events", b"not json"),
        ("/slack/events", b"[1, 2]"),
        ("/slack/interactive", b"nothing=here"),
        ("/slack/interactive", b"payload=%7Bbroken"),
    ],
)
async def test_a_signed_but_unreadable_body_is_a_bad_request(served: Served, path: str, body: bytes) -> None:
    status, _ = await served.post(path, body, content_type="application/x-www-form-urlencoded")
    assert status == 400
