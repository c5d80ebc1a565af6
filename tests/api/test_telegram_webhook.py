"""POST /telegram/webhook: Telegram posts updates with its secret header; without it nothing happens.

The fake Bot API server registers the webhook (setWebhook, from the service's WebhookRegistration)
and delivers updates to the real app as Telegram does; the handler is the service's own, on the
real store.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from inno_notify.adapters.channels.telegram_updates import TelegramUpdates, bot_id_of
from inno_notify.adapters.db import Store
from inno_notify.api.app import create_app
from inno_notify.api.keys import TelegramWebhook
from inno_notify.domain.model import DirectoryUser, NotificationKind
from inno_notify.domain.telegram_linking import derive_key, mint
from inno_notify.service.telegram_updates import UpdateHandler, WebhookRegistration
from tests.adapters.channels.conftest import TELEGRAM_TOKEN, telegram_api
from tests.adapters.channels.fake_telegram import SECRET_HEADER, FakeTelegram
from tests.waiting import eventually

from .support import ADMIN_TOKEN, SETTINGS

__all__ = ["telegram_api"]  # the fake Bot API's fixture, shared with the channel tests

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

SECRET = "webhook-secret_42"
KEY = derive_key(TELEGRAM_TOKEN, "telegram-link")
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@dataclass
class Hooked:
    store: Store
    fake: FakeTelegram
    url: str


@pytest.fixture
async def hooked(store: Store, telegram_api: tuple[FakeTelegram, str]) -> AsyncIterator[Hooked]:
    fake, api_url = telegram_api
    await store.directory.upsert_user(DirectoryUser("alice@example.com", "Alice", channels=("email",)))
    handler = UpdateHandler(store, KEY, bot_id_of(TELEGRAM_TOKEN), lambda: NOW)
    reader = TelegramUpdates(TELEGRAM_TOKEN, api_url)

    async def handle(body: object) -> None:
        await handler.handle(reader.read(body), polled=False)

    app = create_app(store, SETTINGS, telegram_webhook=TelegramWebhook(SECRET, handle), clock=lambda: NOW)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    url = str(server.make_url("/telegram/webhook"))
    # The leader's registration, as serve runs it.
    client = TelegramUpdates(TELEGRAM_TOKEN, api_url, timeout=5.0)
    stop = asyncio.Event()
    registration = asyncio.create_task(WebhookRegistration(client, url, SECRET).run(stop))
    await eventually(lambda: fake.webhook is not None)
    stop.set()
    await registration
    await client.aclose()
    try:
        yield Hooked(store, fake, url)
    finally:
        await server.close()
        await reader.aclose()


def _token() -> str:
    return mint(KEY, "alice@example.com", NOW, timedelta(hours=1), b"\x02" * 8)


async def _replies(store: Store) -> int:
    page, _ = await store.outbox.list_notifications(limit=50)
    return sum(1 for row in page if row.kind is NotificationKind.BOT_REPLY)


async def test_telegram_s_delivery_with_the_secret_links_the_chat_once(hooked: Hooked) -> None:
    update = hooked.fake.user_says(111, f"/start {_token()}")
    await hooked.fake.deliver()

    assert hooked.fake.deliveries == [(update["update_id"], 200)]
    alice = await hooked.store.directory.get_user("alice@example.com")
    assert alice is not None and alice.telegram_chat_id == 111
    assert await _replies(hooked.store) == 1

    # Telegram sends the same update again (it did not see our answer): nothing changes.
    hooked.fake.updates.append(update)
    await hooked.fake.deliver()
    assert hooked.fake.deliveries[-1] == (update["update_id"], 200)
    assert await _replies(hooked.store) == 1


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {SECRET_HEADER: "wrong"},
        {SECRET_HEADER: SECRET[:-1]},
        {SECRET_HEADER: SECRET + "x"},
        {"Authorization": f"Bearer {ADMIN_TOKEN}"},
        {SECRET_HEADER: "ünïcødé"},
    ],
    ids=["none", "wrong", "prefix", "longer", "api-token", "non-ascii"],
)
async def test_a_request_without_the_secret_is_refused_and_changes_nothing(
    hooked: Hooked, headers: dict[str, str]
) -> None:
    update = hooked.fake.user_says(111, f"/start {_token()}")
    async with (
        aiohttp.ClientSession() as session,
        session.post(hooked.url, json=update, headers=headers) as response,
    ):
        assert response.status == 401
        assert (await response.json())["error"]["code"] == "unauthorized"
    alice = await hooked.store.directory.get_user("alice@example.com")
    assert alice is not None and alice.telegram_chat_id is None
    assert await _replies(hooked.store) == 0


@pytest.mark.parametrize(("body", "status"), [(b"{not json", 400), (b"[1, 2]", 400), (b"x" * 300_000, 413)])
async def test_a_bad_body_with_the_secret_is_refused(hooked: Hooked, body: bytes, status: int) -> None:
    async with aiohttp.ClientSession() as session:
        headers = {SECRET_HEADER: SECRET, "Content-Type": "application/json"}
        async with session.post(hooked.url, data=body, headers=headers) as response:
            assert response.status == status
    assert await _replies(hooked.store) == 0


async def test_without_a_webhook_the_path_is_no_open_route(store: Store) -> None:
    app = create_app(store, SETTINGS)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        async with aiohttp.ClientSession() as session:
            url = str(server.make_url("/telegram/webhook"))
            async with session.post(url, json={"update_id": 1}, headers={SECRET_HEADER: SECRET}) as response:
                assert response.status == 401  # like any path: a token first
            auth = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
            async with session.post(url, json={"update_id": 1}, headers=auth) as response:
                assert response.status in (404, 405)
    finally:
        await server.close()
