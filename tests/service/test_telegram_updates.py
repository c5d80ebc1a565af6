"""Self-service on Telegram end to end: python-telegram-bot polls the fake Bot API, the handler writes
the database (Postgres and SQLite), the dispatcher sends the answers and the summaries.

A person gets an e-mail summary with a deep link, opens it (the fake queues `/start <token>` from
their chat), and from then on commands in that chat change where and when their summaries go.
"""

from __future__ import annotations

import asyncio
import html
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from html.parser import HTMLParser

import pytest
from prometheus_client import CollectorRegistry

from inno_notify.adapters.channels.base import Sender
from inno_notify.adapters.channels.email import EmailSender
from inno_notify.adapters.channels.telegram import TelegramSender
from inno_notify.adapters.channels.telegram_updates import TelegramUpdates, bot_id_of
from inno_notify.adapters.db import Store
from inno_notify.domain.model import (
    Channel,
    DeliveryStatus,
    DirectoryUser,
    JobStatus,
    NotificationKind,
    RecipientAddress,
)
from inno_notify.domain.telegram_linking import MAX_EPOCH, derive_key, mint
from inno_notify.service.dispatcher import Dispatcher, DispatchOptions
from inno_notify.service.message_composer import MessageParts
from inno_notify.service.planner import DirectoryPlanner
from inno_notify.service.ratelimit import UNLIMITED
from inno_notify.service.telegram_updates import LinkOffer, UpdateHandler, UpdatePoller, WebhookRegistration
from inno_notify.telemetry import Telemetry
from tests import stored
from tests.adapters.channels.conftest import TELEGRAM_TOKEN
from tests.adapters.channels.fake_smtp import RecordingHandler
from tests.adapters.channels.fake_telegram import FakeTelegram
from tests.waiting import eventually

from .support import T0, FakeClock, all_rows, finish, finished_job, renderer

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

BOT = "inno_notify_bot"
KEY = derive_key(TELEGRAM_TOKEN, "telegram-link")
TTL = timedelta(hours=72)
ALICE_CHAT = 111
BOB_CHAT = 222
LINK = re.compile(rf"https://t\.me/{BOT}\?start=([A-Za-z0-9_-]+)")
ENABLED = frozenset({"telegram", "email"})


@dataclass
class Harness:
    store: Store
    fake: FakeTelegram
    smtp: RecordingHandler
    clock: FakeClock
    handler: UpdateHandler
    dispatcher: Dispatcher
    api_url: str
    telemetry: Telemetry

    async def poll(self, until: Callable[[], Awaitable[bool]] | None = None) -> None:
        """Runs a poller (a fresh client: a new term, or a restart) until every update the fake
        holds now is handled (or `until`), then stops it."""
        last = max((u["update_id"] for u in self.fake.updates), default=-1)

        async def handled() -> bool:
            if until is not None:
                return await until()
            return await self.store.directory.telegram_offset(self.handler.bot_id) > last

        client = TelegramUpdates(TELEGRAM_TOKEN, self.api_url, timeout=5.0)
        stop = asyncio.Event()
        task = asyncio.create_task(UpdatePoller(client, self.handler, poll_seconds=5).run(stop))
        try:
            await eventually(handled, what="the poller handled the updates")
        finally:
            stop.set()
            await task
            await client.aclose()

    async def says(self, chat: int, text: str, **kw: object) -> None:
        """A person's message, handled, and the bot's answer sent."""
        self.fake.user_says(chat, text, **kw)  # type: ignore[arg-type]
        await self.poll()
        await self.dispatcher.run_once(self.clock())

    def answers(self, chat: int) -> list[str]:
        return [text for chat_id, text in self.fake.sent() if chat_id == chat]

    async def user(self, email: str = "alice@example.com") -> DirectoryUser:
        found = await self.store.directory.get_user(email)
        assert found is not None
        return found

    async def summarize(self, *uids: str, status: JobStatus = JobStatus.SUCCEEDED) -> None:
        users = {u.email: u for u in await self.store.directory.list_users()}
        jobs = [finished_job(uid, status=status) for uid in uids]
        await finish(self.store, jobs, users, self.clock(), enabled=ENABLED)


@pytest.fixture
async def harness(
    store: Store, telegram_api: tuple[FakeTelegram, str], smtp_server: tuple[RecordingHandler, int]
) -> AsyncIterator[Harness]:
    fake, api_url = telegram_api
    await store.directory.upsert_user(DirectoryUser("alice@example.com", "Alice", channels=("email",)))
    await store.directory.upsert_user(
        DirectoryUser("bob@example.com", "Bob", telegram_chat_id=BOB_CHAT, channels=("telegram", "email"))
    )
    clock = FakeClock()
    telemetry = Telemetry.create(CollectorRegistry())
    handler = UpdateHandler(store, KEY, bot_id_of(TELEGRAM_TOKEN), clock, telemetry=telemetry)
    senders: dict[str, Sender] = {
        "telegram": TelegramSender(TELEGRAM_TOKEN, api_url, timeout=5.0),
        "email": EmailSender("127.0.0.1", "inno@example.com", port=smtp_server[1], starttls=False),
    }
    dispatcher = Dispatcher(
        store,
        senders,
        renderer(),
        DispatchOptions(limits=UNLIMITED, rand=lambda: 0.5),
        clock=clock,
        sleep=clock.sleep,
        parts=MessageParts(telegram_link=LinkOffer(BOT, KEY, TTL)),
    )
    yield Harness(store, fake, smtp_server[0], clock, handler, dispatcher, api_url, telemetry)
    for sender in senders.values():
        await sender.aclose()


async def _emailed_link(h: Harness, uid: str = "j1") -> str:
    """Alice's job finishes; her e-mail summary carries the deep link; its token."""
    await h.summarize(uid)
    h.clock.advance(30)
    await h.dispatcher.run_once(h.clock())
    text = h.smtp.received[-1].message.get_body(("plain",)).get_content()  # type: ignore[union-attr]
    found = LINK.search(text)
    assert found is not None, text
    return found.group(1)


async def test_a_deep_link_from_an_e_mail_summary_links_the_chat(harness: Harness) -> None:
    h = harness
    token = await _emailed_link(h)
    # The HTML part carries it too; Bob, linked in the directory, gets no link.
    html_part = h.smtp.received[-1].message.get_body(("html",)).get_content()  # type: ignore[union-attr]
    assert f"https://t.me/{BOT}?start={token}" in html_part

    await h.says(ALICE_CHAT, f"/start {token}", first_name="Alice")

    alice = await h.user()
    assert (alice.telegram_chat_id, alice.channels) == (ALICE_CHAT, ("email", "telegram"))
    (answer,) = h.answers(ALICE_CHAT)
    assert "linked to <b>Alice</b>" in answer and "/mute" in answer
    prefs = await h.store.directory.get_preferences("alice@example.com")
    assert prefs is not None and prefs.origins["telegram_chat_id"].by == str(ALICE_CHAT)

    # Her next summary goes to the chat as well, and the e-mail offers no more link.
    await _summary_to_both(h, "j2")


async def _summary_to_both(h: Harness, uid: str) -> None:
    mails = len(h.smtp.received)
    await h.summarize(uid)
    h.clock.advance(30)
    await h.dispatcher.run_once(h.clock())
    assert any(f"train-{uid}" in text for text in h.answers(ALICE_CHAT))
    (mail,) = h.smtp.received[mails:]
    assert "t.me" not in mail.message.get_body(("plain",)).get_content()  # type: ignore[union-attr]


async def test_forged_expired_and_reused_tokens_are_refused_and_link_nothing(harness: Harness) -> None:
    h = harness
    token = await _emailed_link(h)
    later = await _emailed_link(h, "j3")
    forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    h.fake.chats.add(333)

    await h.says(ALICE_CHAT, f"/start {forged}")
    assert "not one of our links" in h.answers(ALICE_CHAT)[-1]
    assert (await h.user()).telegram_chat_id is None

    await h.says(ALICE_CHAT, f"/start {token}")
    assert (await h.user()).telegram_chat_id == ALICE_CHAT
    # The same link again, from another chat: used, and the chat stays Alice's.
    await h.says(333, f"/start {token}", first_name="Mallory")
    assert "used already" in h.answers(333)[-1]
    assert (await h.user()).telegram_chat_id == ALICE_CHAT

    # Her second e-mail's link, never used, opened after its time.
    h.clock.advance(TTL.total_seconds() + 1)
    await h.says(333, f"/start {later}")
    assert "expired" in h.answers(333)[-1]
    assert (await h.user()).telegram_chat_id == ALICE_CHAT


async def test_mute_all_holds_summaries_and_releases_them_as_one_message_without_loss(
    harness: Harness,
) -> None:
    h = harness
    await h.says(BOB_CHAT, "/mute all 2", first_name="Bob")
    assert "Muted until" in h.answers(BOB_CHAT)[-1] and "on every channel" in h.answers(BOB_CHAT)[-1]

    users = {u.email: u for u in await h.store.directory.list_users()}
    jobs = [finished_job(f"m{i}", owner="bob@example.com") for i in range(3)]
    await finish(h.store, jobs, users, h.clock(), enabled=ENABLED)
    for _ in range(4):  # group waits pass, the dispatcher runs: nothing reaches Bob
        h.clock.advance(30)
        await h.dispatcher.run_once(h.clock())
    assert len(h.answers(BOB_CHAT)) == 1 and h.smtp.received == []
    pending = [r for r in await all_rows(h.store) if r.kind is NotificationKind.JOB_SUMMARY]
    assert len(pending) == 6 and {r.status for r in pending} == {DeliveryStatus.PENDING}

    h.clock.now = T0 + timedelta(hours=2, seconds=1)
    await h.dispatcher.run_once(h.clock())

    summaries = h.answers(BOB_CHAT)[1:]
    assert len(summaries) == 1 and "3 jobs finished" in summaries[0]
    assert len(h.smtp.received) == 1 and "3 jobs finished" in h.smtp.received[0].message["Subject"]
    rows = [r for r in await all_rows(h.store) if r.kind is NotificationKind.JOB_SUMMARY]
    assert {r.status for r in rows} == {DeliveryStatus.SENT}


async def test_unmute_sends_what_waited_at_once(harness: Harness) -> None:
    h = harness
    await h.says(BOB_CHAT, "/mute 8")
    users = {u.email: u for u in await h.store.directory.list_users()}
    await finish(h.store, [finished_job("u1", owner="bob@example.com")], users, h.clock(), enabled=ENABLED)
    h.clock.advance(60)
    await h.dispatcher.run_once(h.clock())
    assert len(h.answers(BOB_CHAT)) == 1

    await h.says(BOB_CHAT, "/unmute")  # the answer and what waited go out in the same round
    after = h.answers(BOB_CHAT)[1:]
    assert len(after) == 2
    assert any("Unmuted" in text for text in after) and any("train-u1" in text for text in after)


async def test_failures_only_from_now_on(harness: Harness) -> None:
    h = harness
    await h.says(BOB_CHAT, "/failures")
    users = {u.email: u for u in await h.store.directory.list_users()}
    ok = finished_job("ok1", owner="bob@example.com")
    failed = finished_job("bad1", owner="bob@example.com", status=JobStatus.FAILED)
    await finish(h.store, [ok, failed], users, h.clock(), enabled=ENABLED)
    h.clock.advance(30)
    await h.dispatcher.run_once(h.clock())
    texts = h.answers(BOB_CHAT)
    assert any("train-bad1" in t for t in texts) and not any("train-ok1" in t for t in texts)


async def test_stop_unlinks_the_chat(harness: Harness) -> None:
    h = harness
    await h.says(BOB_CHAT, "/stop", first_name="Bob")

    bob = await h.user("bob@example.com")
    assert (bob.telegram_chat_id, bob.channels, bob.telegram_stopped) == (None, ("email",), True)
    assert "Unlinked" in h.answers(BOB_CHAT)[-1]
    # The chat no longer answers to Bob's commands, and his summaries go by e-mail only, without a link.
    await h.says(BOB_CHAT, "/status")
    assert "not linked" in h.answers(BOB_CHAT)[-1]
    users = {u.email: u for u in await h.store.directory.list_users()}
    await finish(h.store, [finished_job("s1", owner="bob@example.com")], users, h.clock(), enabled=ENABLED)
    h.clock.advance(30)
    await h.dispatcher.run_once(h.clock())
    assert len(h.answers(BOB_CHAT)) == 2
    mail = h.smtp.received[-1].message.get_body(("plain",)).get_content()  # type: ignore[union-attr]
    assert "train-s1" in mail and "t.me" not in mail


async def test_status_shows_running_jobs_and_the_week(harness: Harness) -> None:
    h = harness
    running = finished_job("r1", owner="bob@example.com", status=JobStatus.RUNNING, finished_at=None)
    await stored.upsert_jobs(h.store, [running])
    await h.says(BOB_CHAT, "/status")
    answer = h.answers(BOB_CHAT)[-1]
    assert "face-research/train-r1" in answer and "running 1 h" in answer
    # No job of Bob's was measured this week: no figure, not zero.
    assert "n/a (not measured)" in answer


async def test_a_restart_does_not_handle_old_updates_again(harness: Harness) -> None:
    h = harness
    old = h.fake.user_says(BOB_CHAT, "/mute 1")
    await h.poll()
    # The process dies before its next getUpdates told Telegram, which still holds the update and
    # sends it to whoever asks from an earlier offset.
    h.fake.updates.insert(0, old)
    polls = len([c for c in h.fake.calls if c.method == "getUpdates"])

    h.fake.user_says(BOB_CHAT, "/help")
    await h.poll()  # a fresh poller, as after a restart

    first = [c for c in h.fake.calls if c.method == "getUpdates"][polls]
    assert int(first.params["offset"]) == old["update_id"] + 1

    rows = [r for r in await all_rows(h.store) if r.kind is NotificationKind.BOT_REPLY]
    assert len(rows) == 2
    await h.dispatcher.run_once(h.clock())
    answers = h.answers(BOB_CHAT)
    assert len(answers) == 2 and "Muted until" in answers[0] and "/status" in answers[1]
    # Handed the old update anyway (a webhook delivering it twice), the handler changes nothing.
    await h.handler.handle(TelegramUpdates(TELEGRAM_TOKEN, h.api_url).read(old), polled=False)
    assert len([r for r in await all_rows(h.store) if r.kind is NotificationKind.BOT_REPLY]) == 2


async def test_groups_are_ignored_and_an_unreadable_update_is_set_aside(harness: Harness) -> None:
    h = harness
    token = await _emailed_link(h)
    h.fake.user_says(-100777, f"/start {token}", chat_type="group")
    h.fake.push({"message": {"message_id": 1, "chat": "not a chat", "date": "yesterday"}})
    await h.says(ALICE_CHAT, f"/start {token}")
    # An edit is not a new message: editing an old one into /stop does nothing.
    chat = {"id": ALICE_CHAT, "type": "private", "first_name": "Alice"}
    edit = {"message_id": 1, "date": 1_796_000_000, "edit_date": 1_796_000_100, "chat": chat, "text": "/stop"}
    h.fake.push({"edited_message": edit})
    await h.poll()

    assert (await h.user()).telegram_chat_id == ALICE_CHAT
    replies = [r for r in await all_rows(h.store) if r.kind is NotificationKind.BOT_REPLY]
    assert [r.recipient for r in replies] == [f"telegram:{ALICE_CHAT}"]
    rejected = h.telemetry.registry.get_sample_value(
        "inno_notify_rejected_objects_total", {"resource": "TelegramUpdate", "reason": "unreadable"}
    )
    assert rejected == 1.0


async def test_the_poller_removes_a_webhook_before_polling(harness: Harness) -> None:
    h = harness
    client = TelegramUpdates(TELEGRAM_TOKEN, h.api_url, timeout=5.0)
    stop = asyncio.Event()
    registration = asyncio.create_task(
        WebhookRegistration(client, "https://example.org/telegram/webhook", "s3cret").run(stop)
    )
    await eventually(lambda: h.fake.webhook is not None)
    assert h.fake.webhook == {
        "url": "https://example.org/telegram/webhook",
        "secret_token": "s3cret",
        "allowed_updates": ["message"],
    }
    stop.set()
    await registration
    await client.aclose()

    await h.says(BOB_CHAT, "/help")
    assert h.fake.webhook is None and len(h.answers(BOB_CHAT)) == 1


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.open: list[str] = []
        self.seen: set[str] = set()
        self.balanced = True

    def handle_starttag(self, tag: str, attrs: object) -> None:
        self.open.append(tag)
        self.seen.add(tag)

    def handle_endtag(self, tag: str) -> None:
        self.balanced &= bool(self.open) and self.open.pop() == tag


NAMES = ["<b>Al</b> &amp; co", '<a href="https://evil.example">x</a>', "&lt;i&gt;", "</code><pre>", "Ал & <3"]


@pytest.mark.parametrize("name", NAMES)
async def test_a_hostile_first_name_or_text_never_breaks_or_alters_a_reply(
    harness: Harness, name: str
) -> None:
    h = harness
    token = await _emailed_link(h)
    await h.says(ALICE_CHAT, f"/start {token}", first_name=name)
    await h.says(ALICE_CHAT, f"/{name}", first_name=name)
    await h.says(ALICE_CHAT, f"hello {name} <b>bold</b> &amp;", first_name=name)
    await h.says(ALICE_CHAT, "/mute <b>2</b>", first_name=name)

    answers = h.answers(ALICE_CHAT)
    assert len(answers) == 4
    for answer in answers:
        tags = _Tags()
        tags.feed(answer)
        tags.close()
        # Only our own markup, balanced; the name shows exactly as written.
        assert tags.seen <= {"b", "code"} and tags.balanced and not tags.open, answer
    assert f"Hi {' '.join(name.split())}!" in html.unescape(answers[0])
    assert "How long?" in answers[3]
    assert (await h.user()).telegram_chat_id == ALICE_CHAT


LINKABLE = RecipientAddress(telegram_link_epoch=0)


@pytest.mark.parametrize(
    ("channel", "kind", "address", "offered"),
    [
        (Channel.EMAIL, NotificationKind.JOB_SUMMARY, LINKABLE, True),
        (Channel.SLACK, NotificationKind.WORKFLOW_SUMMARY, LINKABLE, True),
        (Channel.EMAIL, NotificationKind.JOB_SUMMARY, RecipientAddress(telegram_link_epoch=MAX_EPOCH), True),
        (Channel.TELEGRAM, NotificationKind.JOB_SUMMARY, LINKABLE, False),
        (Channel.EMAIL, NotificationKind.DIGEST, LINKABLE, False),
        (Channel.EMAIL, NotificationKind.JOB_SUMMARY, RecipientAddress(), False),
        (
            Channel.EMAIL,
            NotificationKind.JOB_SUMMARY,
            RecipientAddress(name="Alice", telegram_chat_id=5),
            False,
        ),
        (Channel.EMAIL, NotificationKind.JOB_SUMMARY, RecipientAddress(telegram_link_epoch=-1), False),
        (
            Channel.EMAIL,
            NotificationKind.JOB_SUMMARY,
            RecipientAddress(telegram_link_epoch=MAX_EPOCH + 1),
            False,
        ),
    ],
)
def test_which_messages_offer_the_link(
    channel: Channel, kind: NotificationKind, address: RecipientAddress, offered: bool
) -> None:
    from inno_notify.domain.model import Notification

    row = Notification("k", kind, channel, "alice@example.com", T0, T0, address=address)
    link = LinkOffer(BOT, KEY, TTL)(row, T0)
    assert (link is not None) is offered
    if link is not None:
        assert LINK.fullmatch(link)


async def test_a_deposed_leader_s_poller_ends_with_its_leadership(
    database_url: str, telegram_api: tuple[FakeTelegram, str]
) -> None:
    from inno_notify.adapters.db.leases import LeaseFence, LostLeadership

    fake, api_url = telegram_api
    deposed = Store.from_url(database_url, LeaseFence("default", "deposed"))
    client = TelegramUpdates(TELEGRAM_TOKEN, api_url, timeout=5.0)
    handler = UpdateHandler(deposed, KEY, bot_id_of(TELEGRAM_TOKEN), FakeClock())
    fake.user_says(BOB_CHAT, "/stop")
    try:
        with pytest.raises(LostLeadership):
            await asyncio.wait_for(UpdatePoller(client, handler, poll_seconds=1).run(asyncio.Event()), 10)
        assert await deposed.directory.telegram_offset(handler.bot_id) == 0
        assert (
            await deposed.outbox.delivery_statuses(
                [f"telegram/{handler.bot_id}/update/{fake.updates[0]['update_id']}"]
            )
            == {}
        )
    finally:
        await client.aclose()
        await deposed.close()


@pytest.mark.parametrize(
    ("telegram", "components", "offers"),
    [
        ({"token": TELEGRAM_TOKEN}, None, False),
        ({"token": TELEGRAM_TOKEN, "bot_username": BOT, "updates": "off"}, None, False),
        ({"bot_username": BOT}, None, False),
        ({"token": TELEGRAM_TOKEN, "bot_username": BOT}, ["telegram-updates"], True),
        (
            {
                "token": TELEGRAM_TOKEN,
                "bot_username": BOT,
                "updates": "webhook",
                "webhook_url": "https://x.example/telegram/webhook",
            },
            ["telegram-webhook"],
            True,
        ),
    ],
)
async def test_the_settings_decide_the_bot_s_parts(
    store: Store, telegram: dict[str, object], components: list[str] | None, offers: bool
) -> None:
    from inno_notify.service.telegram_updates import TelegramBot, link_offer
    from inno_notify.settings import Settings

    settings = Settings.model_validate({"channels": {"telegram": telegram}})
    bot = TelegramBot.build(settings.channels.telegram, "UTC", store, FakeClock())
    try:
        assert (None if bot is None else [name for name, _ in bot.leader_components()]) == components
        assert (link_offer(settings.channels.telegram) is not None) is offers
    finally:
        if bot is not None:
            await bot.aclose()


# --- trust boundaries (issue 29) ---------------------------------------------------------------


async def test_an_older_token_is_void_once_a_newer_link_happened(harness: Harness) -> None:
    """The takeover of issue 29: Alice links with one e-mail's token; an older, unused one (a
    forwarded mail, a shared mailbox) must not move her chat to a stranger's."""
    h = harness
    older = await _emailed_link(h, "j1")
    newer = await _emailed_link(h, "j2")
    await h.says(ALICE_CHAT, f"/start {newer}", first_name="Alice")
    assert (await h.user()).telegram_chat_id == ALICE_CHAT

    h.fake.chats.add(333)
    await h.says(333, f"/start {older}", first_name="Mallory")

    assert "replaced" in h.answers(333)[-1] and "Nothing was linked" in h.answers(333)[-1]
    alice = await h.user()
    assert (alice.telegram_chat_id, alice.channels) == (ALICE_CHAT, ("email", "telegram"))
    # The stranger's chat is not Alice's: /status tells it nothing of hers.
    await h.says(333, "/status")
    assert "not linked" in h.answers(333)[-1]
    assert len(h.answers(ALICE_CHAT)) == 1  # her own chat heard of nothing to worry about


async def test_stop_voids_every_token_minted_before_it(harness: Harness) -> None:
    h = harness
    first = await _emailed_link(h, "j1")
    second = await _emailed_link(h, "j2")
    await h.says(ALICE_CHAT, f"/start {first}")
    await h.says(ALICE_CHAT, "/stop")
    assert (await h.user()).telegram_chat_id is None

    h.fake.chats.add(333)
    await h.says(333, f"/start {second}")
    assert "replaced" in h.answers(333)[-1]
    await h.says(ALICE_CHAT, f"/start {second}")  # from her own chat too: spent for nothing
    assert "Nothing was linked" in h.answers(ALICE_CHAT)[-1]
    alice = await h.user()
    assert (alice.telegram_chat_id, alice.telegram_stopped) == (None, True)


async def test_a_relink_tells_the_old_chat_and_needs_a_token_newer_than_the_link(harness: Harness) -> None:
    h = harness
    older = await _emailed_link(h, "j1")
    newer = await _emailed_link(h, "j2")
    await h.says(ALICE_CHAT, f"/start {newer}", first_name="Alice")
    epoch = (await h.user()).link_epoch
    assert epoch >= 1
    # A token of the current generation (minted after the link) moves the chat, and says so to the
    # chat it moves away from.
    current = mint(KEY, "alice@example.com", h.clock(), TTL, b"\x05" * 8, epoch)
    h.fake.chats.add(333)
    await h.says(333, f"/start {current}", first_name="Alice")

    assert (await h.user()).telegram_chat_id == 333
    assert "linked to <b>Alice</b>" in h.answers(333)[-1]
    notice = h.answers(ALICE_CHAT)[-1]
    assert "now go to another chat" in notice and "if that was not you" in notice
    # The relink started a generation of its own: neither the older token nor the one just used
    # moves the chat again.
    for token, chat in ((older, 444), (current, 555)):
        h.fake.chats.add(chat)
        await h.says(chat, f"/start {token}")
        assert "Nothing was linked" in h.answers(chat)[-1]
    assert (await h.user()).telegram_chat_id == 333
    assert len(h.answers(ALICE_CHAT)) == 2 and len(h.answers(333)) == 1


async def _bob_s_summary(h: Harness, uid: str) -> None:
    users = {u.email: u for u in await h.store.directory.list_users()}
    await finish(h.store, [finished_job(uid, owner="bob@example.com")], users, h.clock(), enabled=ENABLED)
    h.clock.advance(30)
    await h.dispatcher.run_once(h.clock())


async def test_a_mute_from_the_chat_holds_telegram_only_unless_the_person_says_all(harness: Harness) -> None:
    h = harness
    await h.says(BOB_CHAT, "/mute 720", first_name="Bob")
    answer = h.answers(BOB_CHAT)[-1]
    assert "here on Telegram only" in answer and "/mute all" in answer

    await _bob_s_summary(h, "t1")
    # E-mail keeps flowing; the chat's summary waits.
    assert [m.rcpt_tos for m in h.smtp.received] == [["bob@example.com"]]
    assert "train-t1" in h.smtp.received[0].message.get_body(("plain",)).get_content()  # type: ignore[union-attr]
    assert len(h.answers(BOB_CHAT)) == 1
    held = [
        r
        for r in await all_rows(h.store)
        if r.channel is Channel.TELEGRAM and r.kind is NotificationKind.JOB_SUMMARY
    ]
    assert [r.status for r in held] == [DeliveryStatus.PENDING]

    await h.says(BOB_CHAT, "/mute all 720")
    assert "on every channel" in h.answers(BOB_CHAT)[-1]
    await h.says(BOB_CHAT, "/help")
    assert "Muted on every channel" in h.answers(BOB_CHAT)[-1]
    await _bob_s_summary(h, "t2")
    assert len(h.smtp.received) == 1  # the e-mail of t2 is held too
    rows = {
        (r.dedup_key.split("/")[1], r.channel): r.status
        for r in await all_rows(h.store)
        if r.kind is NotificationKind.JOB_SUMMARY
    }
    assert rows[("t2", Channel.EMAIL)] is DeliveryStatus.PENDING


async def test_stop_all_turns_every_channel_off(harness: Harness) -> None:
    h = harness
    await h.says(BOB_CHAT, "/stop all", first_name="Bob")
    assert "no summaries on any channel" in h.answers(BOB_CHAT)[-1]
    bob = await h.user("bob@example.com")
    assert (bob.telegram_chat_id, bob.channels) == (None, ())
    await _bob_s_summary(h, "s1")
    await _bob_s_summary(h, "s2")
    assert h.smtp.received == [] and len(h.answers(BOB_CHAT)) == 1


async def test_a_summary_right_after_start_goes_to_the_new_chat(harness: Harness) -> None:
    """The planner's directory follows a link at once, not after its cache's age (issue 29)."""
    h = harness
    planner = DirectoryPlanner(h.store, ENABLED, 30.0, h.clock)
    token = await _emailed_link(h, "j1")
    # The planner has read the directory (Alice: e-mail only) just before she links.
    before = await planner(finished_job("j2"), h.clock())
    assert [r.channel for r in before] == [Channel.EMAIL]

    await h.says(ALICE_CHAT, f"/start {token}", first_name="Alice")
    job = finished_job("j3")
    await stored.upsert_jobs(h.store, [job])
    rows = await planner(job, h.clock())  # the same instant: no cache has aged

    assert sorted(r.channel.value for r in rows) == ["email", "telegram"]
    assert all(r.address.telegram_chat_id == ALICE_CHAT for r in rows)
    await stored.summarize(h.store, job.cluster, job.uid, rows)
    h.clock.advance(30)
    await h.dispatcher.run_once(h.clock())
    assert any("train-j3" in text for text in h.answers(ALICE_CHAT))
    # A mute and a /stop apply to the next planned message the same way.
    await h.says(ALICE_CHAT, "/stop")
    assert [r.channel for r in await planner(finished_job("j4"), h.clock())] == [Channel.EMAIL]
