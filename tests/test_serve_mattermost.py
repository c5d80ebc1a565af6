"""`serve` with Mattermost's `/inno` slash command: the API answers it at POST /mattermost/commands
(the command's token checked), finds the person through the bot's account look-up and changes their
preferences; without the right token it refuses with 401."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from pathlib import Path
from urllib.parse import urlencode

import aiohttp

from inno_notify.adapters.db import Store
from inno_notify.domain.model import NotifyMode
from inno_notify.runtime import serve
from inno_notify.settings import Settings
from inno_notify.sim.kube_api import SimKubeServer
from tests.adapters.channels import fake_mattermost
from tests.test_serve import free_port
from tests.waiting import eventually

BOT_TOKEN = "mm-serve-bot-token"
COMMAND_TOKEN = "serve0command0token0000000"
BOB = "bobuserid00000000000000000"


async def test_serve_answers_the_mattermost_slash_command(tmp_path: Path) -> None:
    fake = fake_mattermost.FakeMattermost(BOT_TOKEN, users={"bob@example.com": BOB})
    mm_server = contextlib.AsyncExitStack()
    mm_url = await mm_server.enter_async_context(fake_mattermost.serving(fake))
    sim = SimKubeServer(bookmark_interval=1.0)
    await sim.start()
    port = free_port()
    settings = Settings.model_validate(
        {
            "database_url": f"sqlite+aiosqlite:///{tmp_path / 'serve.db'}",
            "probes": {"listen": f"127.0.0.1:{free_port()}"},
            "kubernetes": {"kubeconfig": str(sim.kubeconfig(tmp_path / "kubeconfig")), "kueue": False},
            "prometheus": {"url": "http://127.0.0.1:9"},
            "api": {
                "listen": f"127.0.0.1:{port}",
                "tokens": [{"name": "t", "sha256": hashlib.sha256(b"x").hexdigest(), "role": "admin"}],
            },
            "channels": {"mattermost": {"url": mm_url, "token": BOT_TOKEN, "command_token": COMMAND_TOKEN}},
            "directory": {"users": [{"email": "bob@example.com", "name": "Bob", "channels": ["mattermost"]}]},
        }
    )
    stop = asyncio.Event()
    service = asyncio.create_task(serve(settings, stop))
    try:
        async with aiohttp.ClientSession() as session:

            async def post(token: str) -> tuple[int, str]:
                form = urlencode({"token": token, "user_id": BOB, "command": "/inno", "text": "failures"})
                url = f"http://127.0.0.1:{port}/mattermost/commands"
                headers = {"Content-Type": "application/x-www-form-urlencoded"}
                async with session.post(url, data=form, headers=headers) as response:
                    return response.status, await response.text()

            async def up() -> bool:
                try:
                    return (await post("wrong-token"))[0] == 401
                except aiohttp.ClientConnectionError:
                    return False

            await eventually(up, within=30, what="the API refusing a wrong token")
            status, text = await post(COMMAND_TOKEN)
            assert status == 200 and "only failed jobs" in text
    finally:
        stop.set()
        await asyncio.wait_for(service, timeout=15)
        await sim.stop()
        await mm_server.aclose()
    store = Store.from_url(settings.database_url)
    try:
        bob = await store.directory.get_user("bob@example.com")
        assert bob is not None and bob.notify is NotifyMode.FAILURE
    finally:
        await store.close()
