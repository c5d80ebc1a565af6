"""The dispatcher end to end: outbox rows in the database, the real channel clients, local servers.

python-telegram-bot and slack-sdk talk HTTP to the fake Bot API and Web API servers, aiosmtplib
talks SMTP to aiosmtpd; the clock is injected, and its sleep moves it instead of waiting.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta

import pytest

from inno_notify.adapters.channels.base import Sender
from inno_notify.adapters.db import Store
from inno_notify.domain.model import Channel, DeliveryStatus, DirectoryUser, Team
from inno_notify.domain.routing import Directory, plan_summary
from inno_notify.service.dispatcher import Dispatcher, DispatchOptions
from inno_notify.service.message_composer import message_key
from inno_notify.service.ratelimit import UNLIMITED, ChannelLimits
from tests.adapters.channels import fake_slack, fake_telegram
from tests.adapters.channels.fake_slack import FakeSlack
from tests.adapters.channels.fake_smtp import RecordingHandler
from tests.adapters.channels.fake_telegram import FakeTelegram

from .support import T0, FakeClock, all_rows, finish, finished_job, renderer

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

USERS = {
    "alice@example.com": DirectoryUser(
        "alice@example.com",
        "Alice",
        slack_user_id="U0ALICE",
        telegram_chat_id=111,
        channels=("telegram", "slack", "email"),
    ),
    "bob@example.com": DirectoryUser("bob@example.com", "Bob", telegram_chat_id=222, channels=("telegram",)),
    # Not in the fake Slack workspace and no user id: users.lookupByEmail answers users_not_found.
    "carol@example.com": DirectoryUser("carol@example.com", "Carol", channels=("slack",)),
    "blocked@example.com": DirectoryUser("blocked@example.com", telegram_chat_id=666, channels=("telegram",)),
    "gone@example.com": DirectoryUser("gone@example.com", channels=("email",)),
}
Servers = tuple[FakeTelegram, FakeSlack, RecordingHandler]


@pytest.fixture
def servers(
    telegram_api: tuple[FakeTelegram, str],
    slack_api: tuple[FakeSlack, str],
    smtp_server: tuple[RecordingHandler, int],
) -> Servers:
    return telegram_api[0], slack_api[0], smtp_server[0]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def dispatcher(store: Store, senders: dict[str, Sender], clock: FakeClock, **kw: object) -> Dispatcher:
    options: dict[str, object] = {"group_wait_seconds": 30.0, "limits": UNLIMITED, "rand": lambda: 0.5}
    options.update(kw)
    return Dispatcher(store, senders, renderer(), DispatchOptions(**options), clock=clock, sleep=clock.sleep)  # type: ignore[arg-type]


async def test_each_recipient_gets_each_summary_once_on_each_channel(
    store: Store, senders: dict[str, Sender], servers: Servers, clock: FakeClock
) -> None:
    telegram, slack, smtp = servers
    await finish(store, [finished_job("a1")], USERS, T0)
    await finish(store, [finished_job("b1", owner="bob@example.com")], USERS, T0)
    d = dispatcher(store, senders, clock)

    assert await d.run_once(T0 + timedelta(seconds=29)) == 0
    assert telegram.sent() == []
    clock.now = T0 + timedelta(seconds=30)
    assert await d.run_once(clock.now) == 4
    assert await d.run_once(clock.now) == 0
    # Later than the window of the first: a message of its own.
    await finish(store, [finished_job("a2")], USERS, T0 + timedelta(minutes=5))
    clock.now = T0 + timedelta(minutes=5, seconds=30)
    assert await d.run_once(clock.now) == 3

    assert [(chat, "train-a1" in text, "train-a2" in text) for chat, text in telegram.sent()] == [
        (111, True, False),
        (222, False, False),
        (111, False, True),
    ]
    assert "train-b1" in telegram.sent()[1][1]
    assert [channel for channel, _ in slack.posted()] == ["U0ALICE", "U0ALICE"]
    assert [(m.rcpt_tos, "train-a1" in m.message["Subject"]) for m in smtp.received] == [
        (["alice@example.com"], True),
        (["alice@example.com"], False),
    ]
    rows = await all_rows(store)
    assert len(rows) == 7
    assert all(r.status is DeliveryStatus.SENT and r.attempts == 1 and r.provider_message_id for r in rows)
    assert {r.sent_at for r in rows} == {T0 + timedelta(seconds=30), T0 + timedelta(minutes=5, seconds=30)}
    by_key = {r.dedup_key: r.provider_message_id for r in rows}
    assert by_key["default/a1/job_summary/slack/alice@example.com"] == "D0ALICE:1796000000.000001"

    # A replay of the same jobs (relist, restart) writes nothing new and sends nothing.
    assert await finish(store, [finished_job("a1"), finished_job("a2")], USERS, clock.now) != []
    assert len(await all_rows(store)) == 7
    assert await d.run_once(clock.advance(3600)) == 0
    assert len(telegram.sent()) == 3


async def test_a_sweep_of_200_jobs_is_one_message_per_channel(
    store: Store, senders: dict[str, Sender], servers: Servers, clock: FakeClock
) -> None:
    telegram, slack, smtp = servers
    uids = [f"sweep-{i:03d}" for i in range(200)]
    # The jobs finish over 20 s, all within the 30 s window of the first.
    for i, uid in enumerate(uids):
        await finish(store, [finished_job(uid)], USERS, T0 + timedelta(seconds=i * 0.1))
    d = dispatcher(store, senders, clock, batch_size=50)

    clock.now = T0 + timedelta(seconds=30)
    assert await d.run_once(clock.now) == 600
    assert await d.run_once(clock.advance(60)) == 0

    assert len(telegram.sent()) == len(slack.posted()) == len(smtp.received) == 1
    assert telegram.sent()[0][1].startswith("<b>200 jobs finished</b>")
    assert "200" in smtp.received[0].message["Subject"]
    rows = await all_rows(store)
    assert len(rows) == 600 and {r.status for r in rows} == {DeliveryStatus.SENT}
    for channel in (Channel.TELEGRAM, Channel.SLACK, Channel.EMAIL):
        ids = {r.provider_message_id for r in rows if r.channel is channel}
        assert len(ids) == 1, channel
        assert {r.job_uid for r in rows if r.channel is channel} == set(uids)


async def test_an_inno_notify_group_waits_for_its_last_member_within_the_cap(
    store: Store, senders: dict[str, Sender], servers: Servers, clock: FakeClock
) -> None:
    telegram = servers[0]
    users = {"bob@example.com": USERS["bob@example.com"]}
    d = dispatcher(store, senders, clock)
    # A never-ending sweep: one job every 20 s, each extending the 30 s window, until the cap
    # (10 × 30 s after the first) forces a message.
    for i in range(20):
        now = T0 + timedelta(seconds=20 * i)
        job = finished_job(f"g{i:02d}", owner="bob@example.com", group_key="sweep-9")
        await finish(store, [job], users, now)
        clock.now = now
        await d.run_once(now)
        if telegram.sent():
            break
    sent_at = clock.now
    assert sent_at == T0 + timedelta(seconds=300)
    (message,) = telegram.sent()
    assert message[1].startswith("<b>16 jobs finished</b>")
    rows = await all_rows(store)
    assert sum(r.status is DeliveryStatus.SENT for r in rows) == 16
    assert all(r.attempts == 1 for r in rows if r.status is DeliveryStatus.SENT)


async def test_telegram_429_waits_as_long_as_the_server_says(
    store: Store, senders: dict[str, Sender], servers: Servers, clock: FakeClock
) -> None:
    telegram = servers[0]
    telegram.scripted.append(fake_telegram.too_many_requests(7))
    await finish(store, [finished_job("b1", owner="bob@example.com")], USERS, T0, group_wait_seconds=0)
    d = dispatcher(store, senders, clock)

    assert await d.run_once(T0) == 1
    (row,) = await all_rows(store)
    assert (row.status, row.next_attempt_at) == (DeliveryStatus.PENDING, T0 + timedelta(seconds=7))
    assert row.last_error is not None and "retry" in row.last_error.lower()

    assert await d.run_once(clock.advance(6.9)) == 0
    assert await d.run_once(clock.advance(0.1)) == 1
    (row,) = await all_rows(store)
    assert (row.status, row.attempts, row.sent_at) == (DeliveryStatus.SENT, 2, T0 + timedelta(seconds=7))
    assert len(telegram.sent()) == 2  # the refused call and the accepted one
    assert [c.method for c in telegram.calls] == ["sendMessage", "sendMessage"]


async def test_slack_429_honours_retry_after(
    store: Store, senders: dict[str, Sender], servers: Servers, clock: FakeClock
) -> None:
    slack = servers[1]
    slack.scripted.append(fake_slack.rate_limited(12))
    job = finished_job("a1", channels=("slack",))
    await finish(store, [job], USERS, T0, group_wait_seconds=0)
    d = dispatcher(store, senders, clock)

    await d.run_once(T0)
    assert await d.run_once(clock.advance(11.5)) == 0
    assert await d.run_once(clock.advance(0.5)) == 1
    (row,) = await all_rows(store)
    assert row.status is DeliveryStatus.SENT
    assert len(slack.posted()) == 2


PERMANENT = [
    ("blocked@example.com", None, "telegram: forbidden: Forbidden: bot was blocked by the user"),
    ("carol@example.com", None, "slack users_lookupByEmail: users_not_found"),
    ("gone@example.com", None, "email: recipient refused: gone@example.com: 550"),
]


@pytest.mark.parametrize(("owner", "channels", "reason"), PERMANENT, ids=["telegram", "slack", "email"])
async def test_permanent_rejections_fail_at_once_with_the_reason(
    store: Store,
    senders: dict[str, Sender],
    servers: Servers,
    clock: FakeClock,
    owner: str,
    channels: tuple[str, ...] | None,
    reason: str,
) -> None:
    await finish(store, [finished_job("x1", owner=owner)], USERS, T0, group_wait_seconds=0)
    d = dispatcher(store, senders, clock)

    assert await d.run_once(T0) == 1
    (row,) = await all_rows(store)
    assert row.status is DeliveryStatus.FAILED
    assert row.last_error is not None and row.last_error.startswith(reason)
    assert await d.run_once(clock.advance(3600)) == 0


async def test_5xx_is_retried_with_backoff_then_sent(
    store: Store, senders: dict[str, Sender], servers: Servers, clock: FakeClock
) -> None:
    telegram = servers[0]
    telegram.scripted.extend([(502, fake_telegram.BAD_GATEWAY_HTML)] * 3)
    await finish(store, [finished_job("b1", owner="bob@example.com")], USERS, T0, group_wait_seconds=0)
    d = dispatcher(store, senders, clock)

    waits = []
    assert await d.run_once(T0) == 1
    for _ in range(3):
        (row,) = await all_rows(store)
        assert row.status is DeliveryStatus.PENDING and row.next_attempt_at is not None
        waits.append((row.next_attempt_at - clock.now).total_seconds())
        clock.now = row.next_attempt_at
        assert await d.run_once(clock.now) == 1
    (row,) = await all_rows(store)
    # rand() = 0.5: no jitter, so the schedule is exactly 0.5 s × 1.5^n.
    assert waits == [0.5, 0.75, 1.125]
    assert (row.status, row.attempts) == (DeliveryStatus.SENT, 4)


async def test_a_send_failing_past_give_up_after_seconds_fails(
    store: Store, senders: dict[str, Sender], servers: Servers, clock: FakeClock
) -> None:
    telegram = servers[0]
    telegram.scripted.extend([(500, {"ok": False, "error_code": 500, "description": "Internal"})] * 100)
    await finish(store, [finished_job("b1", owner="bob@example.com")], USERS, T0, group_wait_seconds=0)
    d = dispatcher(store, senders, clock, give_up_after_seconds=120.0)

    rounds = 0
    while rounds < 100:
        rounds += 1
        assert await d.run_once(clock.now) == 1
        (row,) = await all_rows(store)
        if row.status is not DeliveryStatus.PENDING:
            break
        assert row.next_attempt_at is not None
        clock.now = row.next_attempt_at
    assert row.status is DeliveryStatus.FAILED
    assert row.last_error is not None and row.last_error.startswith("gave up after 2 min")
    assert clock.now >= T0 + timedelta(seconds=120)
    # Retries wait 0.5, 0.75, 1.125, ... (× 1.5, no jitter); the try that starts at or after 120 s
    # finds the deadline passed: 0.5 × (1.5^12 − 1) / 0.5 ≈ 128.7 s after 12 waits, so try 13.
    elapsed, tries = 0.0, 1
    while elapsed < 120:
        elapsed += min(60.0, 0.5 * 1.5 ** (tries - 1))
        tries += 1
    assert tries == 13
    assert rounds == row.attempts == len(telegram.sent()) == tries
    assert clock.now == T0 + timedelta(seconds=elapsed)


async def test_rows_without_a_sender_or_a_job_fail_with_a_reason(
    store: Store, senders: dict[str, Sender], clock: FakeClock
) -> None:
    await finish(store, [finished_job("a1", channels=("telegram",))], USERS, T0, group_wait_seconds=0)
    orphan = plan_summary(
        finished_job("ghost", owner="bob@example.com"), Directory(USERS, {}), frozenset({"telegram"}), T0, 0
    ).notifications
    await store.outbox.enqueue(orphan)
    d = dispatcher(store, {"email": senders["email"]}, clock)

    assert await d.run_once(T0) == 2
    reasons = sorted(r.last_error or "" for r in await all_rows(store))
    assert reasons == ["channel telegram is not configured", "channel telegram is not configured"]

    d = dispatcher(store, senders, clock)
    for row in await all_rows(store):
        assert row.id is not None
        await store.outbox.retry_notification(row.id, clock.now)
    assert await d.run_once(clock.now) == 2
    by_job = {r.job_uid: (r.status, r.last_error) for r in await all_rows(store)}
    assert by_job["a1"] == (DeliveryStatus.SENT, "channel telegram is not configured")
    assert by_job["ghost"] == (DeliveryStatus.FAILED, "job record not found")


async def test_unowned_jobs_reach_the_team_leads(
    store: Store, senders: dict[str, Sender], servers: Servers, clock: FakeClock
) -> None:
    telegram, _, smtp = servers
    teams = {"face": Team("face", leads=("bob@example.com", "outside@example.org"), notify_unowned=True)}
    await finish(store, [finished_job("u1", owner=None)], USERS, T0, teams=teams, group_wait_seconds=0)
    await Dispatcher(
        store, senders, renderer(), DispatchOptions(limits=UNLIMITED), clock=clock, sleep=clock.sleep
    ).run_once(T0)
    assert [chat for chat, _ in telegram.sent()] == [222]
    assert [m.rcpt_tos for m in smtp.received] == [["outside@example.org"]]


async def test_rate_limits_space_messages_to_one_chat(
    store: Store, senders: dict[str, Sender], servers: Servers, clock: FakeClock
) -> None:
    telegram = servers[0]
    users = {
        f"u{i}@example.com": DirectoryUser(f"u{i}@example.com", telegram_chat_id=111, channels=("telegram",))
        for i in range(3)
    }
    for i in range(3):
        await finish(
            store, [finished_job(f"r{i}", owner=f"u{i}@example.com")], users, T0, group_wait_seconds=0
        )
    limits = {"telegram": ChannelLimits(per_recipient_per_second=1.0, overall_per_second=25.0)}
    d = dispatcher(store, senders, clock, limits=limits, concurrency=1)

    assert await d.run_once(T0) == 3
    assert len(telegram.sent()) == 3
    # Three people share one chat: the second and third message each wait a second for it.
    assert clock.slept == [1.0, 1.0]
    sent_at = sorted(r.sent_at for r in await all_rows(store) if r.sent_at is not None)
    assert sent_at == [T0 + timedelta(seconds=s) for s in (0, 1, 2)]


async def test_run_sends_until_stopped(
    store: Store, senders: dict[str, Sender], servers: Servers, clock: FakeClock
) -> None:
    telegram = servers[0]
    await finish(store, [finished_job("b1", owner="bob@example.com")], USERS, T0)
    stop = asyncio.Event()

    async def sleep(seconds: float) -> None:
        await clock.sleep(seconds)
        if telegram.sent():
            stop.set()

    d = Dispatcher(
        store,
        senders,
        renderer(),
        DispatchOptions(limits=UNLIMITED, poll_seconds=5.0),
        clock=clock,
        sleep=sleep,
    )
    await asyncio.wait_for(d.run(stop), timeout=30)

    assert len(telegram.sent()) == 1
    # Idle rounds sleep until the row is due (30 s), never longer than one poll.
    assert clock.slept[:6] == [5.0] * 6
    assert (await all_rows(store))[0].sent_at == T0 + timedelta(seconds=30)


async def test_an_email_carries_a_message_id_made_of_its_rows(
    store: Store, senders: dict[str, Sender], servers: Servers, clock: FakeClock
) -> None:
    """Issue 32: the same outbox rows give the same Message-ID, so a message sent again after a crash
    between the provider's acceptance and our record collapses into the first in mail clients."""
    _, _, smtp = servers
    await finish(store, [finished_job("a1")], USERS, T0)
    clock.now = T0 + timedelta(seconds=30)
    await dispatcher(store, senders, clock).run_once(clock.now)
    rows = [r for r in await all_rows(store) if r.channel is Channel.EMAIL]
    [mail] = smtp.received
    assert mail.message["Message-ID"] == f"<inno-notify.{message_key(rows)}@example.com>"
    assert rows[0].provider_message_id == mail.message["Message-ID"]
    assert message_key(list(reversed(rows))) == message_key(rows)
    others = [replace(r, id=(r.id or 0) + 1000) for r in rows]
    assert message_key(others) != message_key(rows)
