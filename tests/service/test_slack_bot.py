"""Self-service on Slack over Socket Mode, end to end: slack-sdk's aiohttp SocketModeClient connects
to a local server that speaks Slack's protocol (apps.connections.open → a ws:// URL, `hello`,
envelopes with an `envelope_id`, acks), the handler writes the database (Postgres and SQLite), the
dispatcher sends the answers as DMs through the fake Web API, and the Home tab is published.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest

from inno_notify.adapters.channels.slack import SlackSender
from inno_notify.adapters.db import Store
from inno_notify.domain.model import (
    DirectoryUser,
    NotificationKind,
    NotifyMode,
    Recommendation,
    RecommendationKind,
    Severity,
    Unit,
)
from inno_notify.domain.preferences import Via
from inno_notify.service.dispatcher import Dispatcher, DispatchOptions
from inno_notify.service.ratelimit import UNLIMITED
from inno_notify.service.slack_bot import SlackBot
from inno_notify.settings import SlackSettings
from tests import stored
from tests.adapters.channels.conftest import SLACK_TOKEN
from tests.adapters.channels.fake_slack import FakeSlack

from .support import T0, FakeClock, all_rows, finished_job, renderer

APP_TOKEN = "xapp-1-A0TEST-socket"
TEAM = "T0RESEARCH"
BOB = "U0BOB"
ALICE = "U0ALICE"
MALLORY = "U0MALLORY"


@dataclass
class Socket:
    store: Store
    fake: FakeSlack
    clock: FakeClock
    dispatcher: Dispatcher
    count: int = 0

    async def envelope(self, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        """Sends one envelope and waits for its ack (which comes after the handling)."""
        envelope = await self.fake.send_envelope(kind, payload)
        return await self.fake.wait_ack(envelope)

    async def command(self, user: str, text: str) -> None:
        self.count += 1
        payload = {
            "token": "verification-token-unused",
            "team_id": TEAM,
            "user_id": user,
            "user_name": "Alice Impostor",  # a display name: never read
            "command": "/inno",
            "text": text,
            "channel_id": "C0GENERAL",
            "trigger_id": f"13345224609.738474920.{self.count}",
            "response_url": "https://hooks.slack.com/commands/T0/1/x",
        }
        ack = await self.envelope("slash_commands", payload)
        assert set(ack) == {"envelope_id"}  # an empty ack: nothing posted in the channel
        await self.dispatcher.run_once(self.clock())

    async def dm(self, user: str, text: str, event_id: str, **event: Any) -> None:
        payload = {
            "token": "x",
            "team_id": TEAM,
            "api_app_id": "A0TEST",
            "type": "event_callback",
            "event_id": event_id,
            "event_time": 1796000000,
            "event": {
                "type": "message",
                "channel_type": "im",
                "channel": "D0" + user[2:],
                "user": user,
                "text": text,
                "ts": "1796000000.000100",
                **event,
            },
        }
        await self.envelope("events_api", payload)
        await self.dispatcher.run_once(self.clock())

    async def press(self, user: str, action: str) -> None:
        self.count += 1
        payload = {
            "type": "block_actions",
            "user": {"id": user, "username": "bob", "team_id": TEAM},
            "team": {"id": TEAM, "domain": "research"},
            "api_app_id": "A0TEST",
            "trigger_id": f"99.{self.count}",
            "view": {"type": "home", "id": "V1"},
            "actions": [{"type": "button", "action_id": action, "block_id": "b", "action_ts": "1.2"}],
        }
        await self.envelope("interactive", payload)

    async def open_home(self, user: str, event_id: str) -> None:
        payload = {
            "team_id": TEAM,
            "type": "event_callback",
            "event_id": event_id,
            "event": {"type": "app_home_opened", "user": user, "channel": "D0X", "tab": "home"},
        }
        await self.envelope("events_api", payload)

    def answers(self, user: str) -> list[str]:
        texts = []
        for channel, params in self.fake.posted():
            if channel == user:
                blocks = params.get("blocks")
                if isinstance(blocks, str):
                    blocks = json.loads(blocks)
                texts.append("\n".join(b["text"]["text"] for b in blocks or [] if b.get("type") == "section"))
        return texts

    async def user(self, email: str) -> DirectoryUser:
        found = await self.store.directory.get_user(email)
        assert found is not None
        return found


@pytest.fixture
async def socket(store: Store, slack_api: tuple[FakeSlack, str]) -> AsyncIterator[Socket]:
    fake, api_url = slack_api
    fake.app_token = APP_TOKEN
    fake.users["mallory@elsewhere.example"] = MALLORY
    # Bob's id is in the directory; Alice's is not (her Slack profile's e-mail finds her).
    await store.directory.upsert_user(
        DirectoryUser("bob@example.com", "Bob", slack_user_id=BOB, channels=("slack", "email"))
    )
    await store.directory.upsert_user(
        DirectoryUser("alice@example.com", "Alice", channels=("email", "slack"))
    )
    clock = FakeClock()
    settings = SlackSettings.model_validate(
        {"token": SLACK_TOKEN, "api_url": api_url, "app_token": APP_TOKEN}
    )
    bot = SlackBot.build(settings, "UTC", store, clock)
    assert bot is not None and bot.signing_secret is None
    ((name, component),) = bot.leader_components()
    assert name == "slack-socket"
    sender = SlackSender(SLACK_TOKEN, api_url, timeout=5.0)
    dispatcher = Dispatcher(
        store,
        {"slack": sender},
        renderer(),
        DispatchOptions(limits=UNLIMITED, rand=lambda: 0.5),
        clock=clock,
        sleep=clock.sleep,
    )
    stop = asyncio.Event()
    task = asyncio.create_task(component(stop))
    try:
        await fake.wait_connected()
        yield Socket(store, fake, clock, dispatcher)
    finally:
        stop.set()
        await task
        await sender.aclose()
        await bot.aclose()


async def test_a_slash_command_changes_preferences_and_is_answered_by_dm(socket: Socket) -> None:
    s = socket
    await s.command(BOB, "failures")

    bob = await s.user("bob@example.com")
    assert bob.notify is NotifyMode.FAILURE
    prefs = await s.store.directory.get_preferences("bob@example.com")
    assert prefs is not None
    origin = prefs.origins["notify"]
    assert (origin.via, origin.by) == (Via.SLACK, BOB)
    (answer,) = s.answers(BOB)
    assert "only failed jobs" in answer and "/inno all" in answer
    # The answer is a bot reply in the outbox, sent to the person's DM.
    (row,) = [r for r in await all_rows(s.store) if r.kind is NotificationKind.BOT_REPLY]
    assert (row.channel.value, row.recipient) == ("slack", f"slack:{BOB}")

    await s.command(BOB, "status")
    assert "No job running" in s.answers(BOB)[-1]
    await s.command(BOB, "frobnicate <!channel>")
    assert "I do not know frobnicate" in s.answers(BOB)[-1] and "`/inno mute 8`" in s.answers(BOB)[-1]


async def test_a_dm_speaks_for_slack_only_and_a_redelivered_event_changes_nothing(socket: Socket) -> None:
    s = socket
    # Alice has no Slack id in the directory: her profile's e-mail (users.info) finds her.
    await s.dm(ALICE, "mute 2", "Ev0001")
    prefs = await s.store.directory.get_preferences("alice@example.com")
    assert prefs is not None and prefs.muted_channels == ("slack",)
    assert prefs.muted_until == s.clock() + timedelta(hours=2)
    first_until = prefs.muted_until
    (answer,) = s.answers(ALICE)
    assert "here on Slack only" in answer and "e-mail" in answer

    # Slack delivers the same event again (a retry): same event id, nothing new.
    s.clock.advance(60)
    await s.dm(ALICE, "mute 2", "Ev0001")
    prefs = await s.store.directory.get_preferences("alice@example.com")
    assert prefs is not None and prefs.muted_until == first_until
    assert len(s.answers(ALICE)) == 1

    # "all" widens it; the slash may be typed too.
    await s.dm(ALICE, "/mute all 3", "Ev0002")
    prefs = await s.store.directory.get_preferences("alice@example.com")
    assert prefs is not None and prefs.muted_channels is None
    await s.dm(ALICE, "unmute", "Ev0003")
    prefs = await s.store.directory.get_preferences("alice@example.com")
    assert prefs is not None and prefs.muted_until is None


@pytest.mark.parametrize(
    "event",
    [
        {"subtype": "message_changed"},
        {"bot_id": "B0OURS"},
        {"subtype": "bot_message", "bot_id": "B0OTHER"},
        {"channel_type": "channel"},
    ],
)
async def test_edits_bots_and_channel_messages_are_acked_and_ignored(
    socket: Socket, event: dict[str, Any]
) -> None:
    s = socket
    await s.dm(BOB, "stop all", "Ev0100", **event)
    assert (await s.user("bob@example.com")).channels == ("slack", "email")
    assert s.answers(BOB) == []


async def test_an_unknown_slack_user_is_told_politely_and_changes_nothing(socket: Socket) -> None:
    s = socket
    before = {u.email: u for u in await s.store.directory.list_users()}
    await s.command(MALLORY, "stop all")
    await s.dm(MALLORY, "nudges off", "Ev0200")
    assert {u.email: u for u in await s.store.directory.list_users()} == before
    assert all("not in the inno-notify directory" in text for text in s.answers(MALLORY))
    assert len(s.answers(MALLORY)) == 2
    await s.open_home(MALLORY, "Ev0201")
    assert "not in the inno-notify directory" in str(s.fake.homes[MALLORY])


async def test_stop_takes_slack_off_and_keeps_the_other_channels(socket: Socket) -> None:
    s = socket
    await s.command(BOB, "stop")
    assert (await s.user("bob@example.com")).channels == ("email",)
    assert "Your messages go to e-mail" in s.answers(BOB)[-1]


async def test_the_home_tab_shows_runs_advice_and_buttons_that_change_preferences(socket: Socket) -> None:
    s = socket
    await stored.upsert_jobs(
        s.store,
        [
            finished_job(
                f"b{i}",
                owner="bob@example.com",
                name=f"train-<b{i}>",
                finished_at=T0 - timedelta(minutes=30 - i),
            )
            for i in range(12)
        ],
    )
    advice = Recommendation(
        RecommendationKind.GPU_COUNT,
        Severity.WARNING,
        4,
        2,
        Unit.GPUS,
        "Request 2 GPUs instead of 4 <!channel>",
        waste_gpu_minutes=120.0,
    )
    await stored.save_recommendations(s.store, "default", "b11", [advice])
    await s.open_home(BOB, "Ev0300")
    home = s.fake.homes[BOB]
    text = str(home)
    # The 10 newest runs (b2 … b11, not b0 and b1), and the advice of b11, escaped.
    assert text.count("train-&lt;b") == 11 and "train-&lt;b1&gt;" not in text
    assert "Request 2 GPUs instead of 4 &lt;!channel&gt;" in text and "<!channel>" not in text
    buttons = [e["action_id"] for b in home["blocks"] if b["type"] == "actions" for e in b["elements"]]
    assert "inno_nudges_off" in buttons and "inno_failures" in buttons

    await s.press(BOB, "inno_nudges_off")
    assert (await s.user("bob@example.com")).nudges is False
    prefs = await s.store.directory.get_preferences("bob@example.com")
    assert prefs is not None and prefs.origins["nudges"].via is Via.SLACK
    home = s.fake.homes[BOB]
    buttons = [e["action_id"] for b in home["blocks"] if b["type"] == "actions" for e in b["elements"]]
    assert "inno_nudges_on" in buttons and "Idle-GPU nudges: off" in str(home)
    # A button answers on the tab, not with a message.
    assert s.answers(BOB) == []

    await s.press(BOB, "inno_mute_8")
    prefs = await s.store.directory.get_preferences("bob@example.com")
    assert prefs is not None and prefs.muted_channels == ("slack",)
    assert "inno_unmute" in str(s.fake.homes[BOB])
