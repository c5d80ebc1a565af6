"""POST /mattermost/commands: Mattermost's `/inno` slash command, as Mattermost posts it (a form with
the command's token). The right token changes what the command asks for, with the origin
`mattermost`, and answers an ephemeral post; a wrong or missing one is refused with 401 and changes
nothing; someone whose Mattermost e-mail is not in the directory changes nothing either.

The handler is the service's own on the real store (Postgres and SQLite); the Mattermost server it
asks who typed the command (`GET /api/v4/users/{id}`) is the local fake v4 API.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from inno_notify.adapters.channels.render import Renderer
from inno_notify.adapters.db import Store
from inno_notify.api.app import create_app
from inno_notify.api.keys import MattermostRequests
from inno_notify.api.views.mattermost import UNAVAILABLE_TEXT
from inno_notify.domain.model import DirectoryUser, NotifyMode
from inno_notify.domain.preferences import Via
from inno_notify.service.mattermost_commands import MattermostBot
from inno_notify.settings import MattermostSettings
from tests.adapters.channels.fake_mattermost import FakeMattermost, serving

from .support import SETTINGS

BOT_TOKEN = "mm-bot-token"
COMMAND_TOKEN = "xr3j5x3p4pfjpfd3t5fs9ewzkr"
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
BOB = "bobuserid00000000000000000"
EVE = "eveuserid00000000000000000"  # on the Mattermost server, not in the directory


@dataclass
class Served:
    store: Store
    fake: FakeMattermost
    base: str
    session: aiohttp.ClientSession

    async def command(
        self, text: str, *, token: str | None = COMMAND_TOKEN, user_id: str = BOB, **headers: str
    ) -> tuple[int, dict[str, Any]]:
        """The slash command as Mattermost posts it (server/channels/app/command.go)."""
        form = {
            "channel_id": "chan0000000000000000000000",
            "channel_name": "town-square",
            "command": "/inno",
            "response_url": "https://mattermost.example.org/hooks/commands/abc",
            "team_domain": "research",
            "team_id": "team0000000000000000000000",
            "text": text,
            "trigger_id": "trig",
            "user_id": user_id,
            "user_name": "bob",
        }
        if token is not None:
            form["token"] = token
        async with self.session.post(
            self.base + "/mattermost/commands",
            data=urlencode(form).encode(),
            headers={"Content-Type": "application/x-www-form-urlencoded", **headers},
        ) as response:
            body = await response.json(content_type=None)
            return response.status, body

    async def bob(self) -> DirectoryUser:
        found = await self.store.directory.get_user("bob@example.com")
        assert found is not None
        return found


@pytest.fixture
async def served(store: Store) -> AsyncIterator[Served]:
    await store.directory.upsert_user(
        DirectoryUser("Bob@Example.com".lower(), "Bob", channels=("mattermost", "email"))
    )
    fake = FakeMattermost(BOT_TOKEN, users={"bob@example.com": BOB, "eve@example.com": EVE})
    mm_server = contextlib.AsyncExitStack()
    url = await mm_server.enter_async_context(serving(fake))
    # Built as the runtime builds it, from the settings.
    settings = MattermostSettings.model_validate(
        {"url": url, "token": BOT_TOKEN, "command_token": COMMAND_TOKEN}
    )
    bot = MattermostBot.build(settings, "UTC", store, lambda: NOW, Renderer())
    assert bot is not None
    requests = MattermostRequests(bot.command_token, bot.handle)
    app = create_app(store, SETTINGS, mattermost_requests=requests, clock=lambda: NOW)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    session = aiohttp.ClientSession()
    try:
        yield Served(store, fake, str(server.make_url("")).rstrip("/"), session)
    finally:
        await session.close()
        await server.close()
        await bot.aclose()
        await mm_server.aclose()


async def test_a_command_with_the_token_changes_preferences_with_its_origin(served: Served) -> None:
    status, body = await served.command("failures")
    assert status == 200
    assert body["response_type"] == "ephemeral"
    assert "only failed jobs are sent" in body["text"]
    assert (await served.bob()).notify is NotifyMode.FAILURE
    prefs = await served.store.directory.get_preferences("bob@example.com")
    assert prefs is not None
    assert (prefs.origins["notify"].via, prefs.origins["notify"].by) == (Via.MATTERMOST, BOB)
    # The answer is the response: nothing is queued for the dispatcher.
    assert (await served.store.outbox.list_notifications(limit=10))[0] == []
    assert [c.path for c in served.fake.calls_to("/api/v4/users/")] == [f"/api/v4/users/{BOB}"]


@pytest.mark.parametrize(
    ("token", "headers"),
    [
        ("not-the-token", {}),
        ("", {}),
        (None, {}),
        (COMMAND_TOKEN[:-1], {}),
        (None, {"Authorization": "Token not-the-token"}),
        (None, {"Authorization": f"Bearer {COMMAND_TOKEN}"}),  # not how Mattermost sends it
    ],
)
async def test_a_wrong_or_missing_token_is_refused_and_changes_nothing(
    served: Served, token: str | None, headers: dict[str, str]
) -> None:
    status, _ = await served.command("stop all", token=token, **headers)
    assert status == 401
    bob = await served.bob()
    assert (bob.channels, bob.notify) == (("mattermost", "email"), NotifyMode.ALWAYS)
    assert await served.store.directory.get_preferences("bob@example.com") is None
    assert served.fake.calls == []  # the server is not even asked who it was


async def test_the_token_in_the_authorization_header_is_taken_too(served: Served) -> None:
    status, _ = await served.command("nudges off", token=None, Authorization=f"Token {COMMAND_TOKEN}")
    assert status == 200
    assert (await served.bob()).nudges is False


@pytest.mark.parametrize("user_id", [EVE, "nobody0000000000000000000a", "../users/me", "X" * 26])
async def test_someone_not_in_the_directory_gets_a_polite_answer_and_changes_nothing(
    served: Served, user_id: str
) -> None:
    status, body = await served.command("stop all", user_id=user_id)
    assert status == 200
    assert "not in the inno-notify directory" in body["text"]
    assert (await served.bob()).channels == ("mattermost", "email")
    assert await served.store.directory.get_preferences("bob@example.com") is None


async def test_a_server_that_cannot_say_who_it_was_changes_nothing(served: Served) -> None:
    served.fake.scripted.append((503, {}))
    status, body = await served.command("stop all")
    assert (status, body["text"]) == (200, UNAVAILABLE_TEXT)
    assert (await served.bob()).channels == ("mattermost", "email")


async def test_a_form_without_a_user_is_a_bad_request(served: Served) -> None:
    status, _ = await served.command("status", user_id="")
    assert status == 400


async def test_status_answers_the_persons_figures(served: Served) -> None:
    status, body = await served.command("status")
    assert status == 200
    assert "**Bob**" in body["text"] and "No job running." in body["text"]
    assert "GPU-hours held" in body["text"]


# (what follows /inno, what the answer says, what Bob's preferences then are)
COMMANDS: list[tuple[str, str, dict[str, Any]]] = [
    (
        "mute 2",
        "here on Mattermost only",
        {"muted_until": NOW + timedelta(hours=2), "muted_channels": ("mattermost",)},
    ),
    ("mute all 8h", "on every channel", {"muted_until": NOW + timedelta(hours=8), "muted_channels": None}),
    ("mute", "How long?", {"muted_until": None}),
    ("unmute", "Unmuted", {"muted_until": None}),
    ("failures", "only failed jobs", {"notify": NotifyMode.FAILURE}),
    ("all", "every job's summary is sent again", {"notify": NotifyMode.ALWAYS}),
    ("nudges off", "No more messages about idle GPUs", {"nudges": False}),
    ("nudges on", "come again", {"nudges": True}),
    ("nudges maybe", "Say `/inno nudges off`", {"nudges": True}),
    ("stop", "Mattermost gets nothing more", {"channels": ("email",)}),
    ("stop all", "no messages on any channel", {"channels": ()}),
    ("help", "`/inno status`", {"channels": ("mattermost", "email")}),
    ("", "`/inno status`", {"channels": ("mattermost", "email")}),
    ("frobnicate now", "I do not know frobnicate", {"channels": ("mattermost", "email")}),
]


@pytest.mark.parametrize(("text", "said", "expected"), COMMANDS, ids=[c[0] or "(nothing)" for c in COMMANDS])
async def test_each_command(served: Served, text: str, said: str, expected: dict[str, Any]) -> None:
    status, body = await served.command(text)
    assert status == 200 and body["response_type"] == "ephemeral"
    assert said in body["text"]
    bob = await served.bob()
    prefs = await served.store.directory.get_preferences("bob@example.com")
    for name, value in expected.items():
        if name in ("muted_until", "muted_channels"):
            got = getattr(prefs, name) if prefs is not None else None
            got = tuple(got) if isinstance(got, list | tuple) else got
            assert got == value, name
        else:
            assert getattr(bob, name) == value, name
    if prefs is not None:
        assert {o.via for o in prefs.origins.values()} == {Via.MATTERMOST}


def test_the_command_is_off_without_its_token_or_the_bot() -> None:
    for given in (
        {"url": "https://mm.example.org", "token": BOT_TOKEN},
        {},
    ):
        settings = MattermostSettings.model_validate(given)
        assert MattermostBot.build(settings, "UTC", None, lambda: NOW, Renderer()) is None  # type: ignore[arg-type]


async def test_without_a_command_token_there_is_no_open_route(store: Store) -> None:
    await store.directory.upsert_user(DirectoryUser("bob@example.com", "Bob", channels=("mattermost",)))
    server = TestServer(create_app(store, SETTINGS, clock=lambda: NOW), host="127.0.0.1")
    await server.start_server()
    try:
        async with aiohttp.ClientSession() as session:
            form = urlencode({"token": COMMAND_TOKEN, "user_id": BOB, "text": "stop all"})
            async with session.post(
                str(server.make_url("/mattermost/commands")),
                data=form,
                headers={"Content-Type": "application/x-www-form-urlencoded"},
            ) as response:
                assert response.status in (401, 404)
    finally:
        await server.close()
    bob = await store.directory.get_user("bob@example.com")
    assert bob is not None and bob.channels == ("mattermost",)
