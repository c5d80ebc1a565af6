"""`serve` with self-service Slack: the leader holds the Socket Mode connection (slack-sdk against
the local server), a `/inno failures` changes the person's preferences and the dispatcher answers
in their DM; with a signing secret the API answers Slack's signed requests."""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import aiohttp
import pytest
from slack_sdk.signature import SignatureVerifier

from inno_notify.adapters.db import Store
from inno_notify.domain.model import NotifyMode
from inno_notify.runtime import serve
from inno_notify.settings import Settings
from inno_notify.sim.kube_api import SimKubeServer
from tests.adapters.channels import fake_slack
from tests.adapters.channels.conftest import SLACK_TOKEN
from tests.test_serve import free_port
from tests.waiting import eventually

APP_TOKEN = "xapp-1-A0SERVE"
SECRET = "serve-signing-secret"


@pytest.fixture
async def slack() -> AsyncIterator[tuple[fake_slack.FakeSlack, str]]:
    fake = fake_slack.FakeSlack(token=SLACK_TOKEN, users={"bob@example.com": "U0BOB"}, app_token=APP_TOKEN)
    server = await fake_slack.start(fake)
    yield fake, str(server.make_url("/api/"))
    await server.close()


def _settings(tmp_path: Path, sim: SimKubeServer, slack: dict[str, Any], api: dict[str, Any]) -> Settings:
    return Settings.model_validate(
        {
            "database_url": f"sqlite+aiosqlite:///{tmp_path / 'serve.db'}",
            "probes": {"listen": f"127.0.0.1:{free_port()}"},
            "kubernetes": {"kubeconfig": str(sim.kubeconfig(tmp_path / "kubeconfig")), "kueue": False},
            "prometheus": {"url": "http://127.0.0.1:9"},
            "api": api,
            "channels": {"slack": slack},
            "directory": {"users": [{"email": "bob@example.com", "name": "Bob", "channels": ["slack"]}]},
        }
    )


async def _notify_of_bob(database_url: str) -> NotifyMode:
    store = Store.from_url(database_url)
    try:
        bob = await store.directory.get_user("bob@example.com")
        assert bob is not None
        return bob.notify
    finally:
        await store.close()


async def test_serve_answers_a_slash_command_over_socket_mode_on_the_leader(
    tmp_path: Path, slack: tuple[fake_slack.FakeSlack, str]
) -> None:
    fake, api_url = slack
    sim = SimKubeServer(bookmark_interval=1.0)
    await sim.start()
    settings = _settings(
        tmp_path, sim, {"token": SLACK_TOKEN, "api_url": api_url, "app_token": APP_TOKEN}, {"listen": ""}
    )
    stop = asyncio.Event()
    service = asyncio.create_task(serve(settings, stop))
    try:
        payload = {
            "team_id": "T0",
            "user_id": "U0BOB",
            "command": "/inno",
            "text": "failures",
            "trigger_id": "1.1",
        }
        envelope = await fake.send_envelope("slash_commands", payload)
        await fake.wait_ack(envelope)
        await eventually(lambda: bool(fake.accepted_posts()), within=30, what="the app's answer")
        ((channel, params),) = fake.accepted_posts()
        assert channel == "U0BOB" and "only failed jobs" in str(params.get("blocks"))
    finally:
        stop.set()
        await asyncio.wait_for(service, timeout=15)
        await sim.stop()
    assert await _notify_of_bob(settings.database_url) is NotifyMode.FAILURE


async def test_serve_answers_signed_requests_over_http(
    tmp_path: Path, slack: tuple[fake_slack.FakeSlack, str]
) -> None:
    fake, api_url = slack
    sim = SimKubeServer(bookmark_interval=1.0)
    await sim.start()
    port = free_port()
    api = {
        "listen": f"127.0.0.1:{port}",
        "tokens": [{"name": "t", "sha256": hashlib.sha256(b"x").hexdigest(), "role": "admin"}],
    }
    settings = _settings(
        tmp_path, sim, {"token": SLACK_TOKEN, "api_url": api_url, "signing_secret": SECRET}, api
    )
    stop = asyncio.Event()
    service = asyncio.create_task(serve(settings, stop))
    body = urlencode({"team_id": "T0", "user_id": "U0BOB", "text": "failures", "trigger_id": "2.2"}).encode()
    try:
        async with aiohttp.ClientSession() as session:

            async def post(signed_with: str) -> int:
                timestamp = str(int(time.time()))
                signature = SignatureVerifier(signed_with).generate_signature(timestamp=timestamp, body=body)
                headers = {
                    "Content-Type": "application/x-www-form-urlencoded",
                    "X-Slack-Request-Timestamp": timestamp,
                    "X-Slack-Signature": str(signature),
                }
                url = f"http://127.0.0.1:{port}/slack/commands"
                async with session.post(url, data=body, headers=headers) as response:
                    return response.status

            async def up() -> bool:
                try:
                    return await post("wrong-secret") == 401
                except aiohttp.ClientConnectionError:
                    return False

            await eventually(up, within=30, what="the API refusing a wrong signature")
            assert await post(SECRET) == 200
    finally:
        stop.set()
        await asyncio.wait_for(service, timeout=15)
        await sim.stop()
    assert await _notify_of_bob(settings.database_url) is NotifyMode.FAILURE
    assert fake.calls_to("apps.connections.open") == []  # no app token: no Socket Mode
