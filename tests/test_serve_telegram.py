"""`serve` with self-service Telegram: the leader polls the bot, a deep link's /start links the chat,
and the dispatcher answers in it; python-telegram-bot against the fake Bot API server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from inno_notify.adapters.db import Store
from inno_notify.domain.telegram_linking import mint
from inno_notify.runtime import serve
from inno_notify.service.telegram_updates import link_key
from inno_notify.settings import Settings
from inno_notify.sim.kube_api import SimKubeServer
from tests.adapters.channels import fake_telegram
from tests.adapters.channels.conftest import TELEGRAM_TOKEN
from tests.test_serve import free_port
from tests.waiting import eventually

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")


@pytest.fixture
async def telegram() -> AsyncIterator[tuple[fake_telegram.FakeTelegram, str]]:
    fake = fake_telegram.FakeTelegram(token=TELEGRAM_TOKEN, chats={111})
    server = await fake_telegram.start(fake)
    yield fake, str(server.make_url("")).rstrip("/")
    fake.release()
    await server.close()


async def test_serve_links_a_chat_by_deep_link_on_the_leader(
    tmp_path: Path, telegram: tuple[fake_telegram.FakeTelegram, str]
) -> None:
    fake, api_url = telegram
    fake.webhook = {"url": "https://old.example/hook", "secret_token": None, "allowed_updates": None}
    sim = SimKubeServer(bookmark_interval=1.0)
    await sim.start()
    database = f"sqlite+aiosqlite:///{tmp_path / 'serve.db'}"
    settings = Settings.model_validate(
        {
            "database_url": database,
            "probes": {"listen": f"127.0.0.1:{free_port()}"},
            "kubernetes": {"kubeconfig": str(sim.kubeconfig(tmp_path / "kubeconfig")), "kueue": False},
            "prometheus": {"url": "http://127.0.0.1:9"},
            "api": {"listen": ""},
            "channels": {
                "telegram": {
                    "token": TELEGRAM_TOKEN,
                    "api_url": api_url,
                    "bot_username": "inno_notify_bot",
                    "poll_timeout_seconds": 1,
                }
            },
            "directory": {"users": [{"email": "alice@example.com", "name": "Alice", "channels": ["email"]}]},
        }
    )
    key = link_key(settings.channels.telegram)
    assert key is not None
    token = mint(key, "alice@example.com", datetime.now(UTC), timedelta(hours=1), b"\x01" * 8)
    fake.user_says(111, f"/start {token}", first_name="Alice")

    stop = asyncio.Event()
    service = asyncio.create_task(serve(settings, stop))
    try:
        await eventually(lambda: bool(fake.sent()), within=30, what="the bot's answer")
        ((chat, text),) = fake.sent()
        assert chat == 111 and "linked to <b>Alice</b>" in text
        assert fake.webhook is None  # the poller removed the old webhook first
    finally:
        stop.set()
        await asyncio.wait_for(service, timeout=15)
        await sim.stop()

    store = Store.from_url(database)
    try:
        alice = await store.directory.get_user("alice@example.com")
        assert alice is not None and alice.telegram_chat_id == 111 and "telegram" in alice.channels
    finally:
        await store.close()


async def test_serve_takes_updates_by_webhook_with_its_secret(
    tmp_path: Path, telegram: tuple[fake_telegram.FakeTelegram, str]
) -> None:
    import hashlib

    fake, api_url = telegram
    sim = SimKubeServer(bookmark_interval=1.0)
    await sim.start()
    api_port = free_port()
    hook_url = f"http://127.0.0.1:{api_port}/telegram/webhook"
    settings = Settings.model_validate(
        {
            "database_url": f"sqlite+aiosqlite:///{tmp_path / 'serve.db'}",
            "probes": {"listen": f"127.0.0.1:{free_port()}"},
            "kubernetes": {"kubeconfig": str(sim.kubeconfig(tmp_path / "kubeconfig")), "kueue": False},
            "prometheus": {"url": "http://127.0.0.1:9"},
            "api": {
                "listen": f"127.0.0.1:{api_port}",
                "tokens": [{"name": "t", "sha256": hashlib.sha256(b"x").hexdigest(), "role": "admin"}],
            },
            "channels": {
                "telegram": {
                    "token": TELEGRAM_TOKEN,
                    "api_url": api_url,
                    "bot_username": "inno_notify_bot",
                    "updates": "webhook",
                    "webhook_url": hook_url,
                }
            },
            "directory": {"users": [{"email": "alice@example.com", "name": "Alice", "channels": ["email"]}]},
        }
    )
    key = link_key(settings.channels.telegram)
    assert key is not None
    token = mint(key, "alice@example.com", datetime.now(UTC), timedelta(hours=1), b"\x03" * 8)

    stop = asyncio.Event()
    service = asyncio.create_task(serve(settings, stop))
    try:
        await eventually(lambda: fake.webhook is not None, within=30, what="setWebhook")
        assert fake.webhook is not None and fake.webhook["url"] == hook_url and fake.webhook["secret_token"]
        fake.user_says(111, f"/start {token}", first_name="Alice")
        await fake.deliver()
        assert [status for _, status in fake.deliveries] == [200]
        await eventually(lambda: bool(fake.sent()), within=30, what="the bot's answer")
        assert "linked to <b>Alice</b>" in fake.sent()[0][1]
    finally:
        stop.set()
        await asyncio.wait_for(service, timeout=15)
        await sim.stop()
