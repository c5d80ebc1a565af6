"""Weekly digests through the dispatcher: planned by the scheduler, rendered from the database's
figures, sent once per row over the real clients to the fake Bot API, Web API and aiosmtpd.

Runs on SQLite and Postgres (the `store` fixture). The e-mail must carry the chart as an inline
image that the HTML part references by Content-ID; Slack gets the post and the chart uploaded
into its thread (files_upload_v2) with alt text; Telegram the text.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from inno_notify.adapters.channels.base import Sender
from inno_notify.adapters.channels.digest_views import CHART_CID
from inno_notify.adapters.db import Store
from inno_notify.domain.model import (
    Channel,
    DeliveryStatus,
    DirectoryUser,
    Notification,
    NotificationKind,
    Team,
    Usage,
)
from inno_notify.service.digest import DigestScheduler
from inno_notify.service.dispatcher import Dispatcher, DispatchOptions
from inno_notify.service.ratelimit import UNLIMITED
from tests import stored
from tests.adapters.channels.fake_slack import FakeSlack
from tests.adapters.channels.fake_smtp import RecordingHandler
from tests.adapters.channels.fake_telegram import FakeTelegram

from .support import FakeClock, all_rows, finish, finished_job, renderer, week_job

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

# Monday 30 Nov 2026, 08:00 UTC: the schedule fires and plans ISO week 2026-W48 (23-29 Nov).
MONDAY = datetime(2026, 11, 30, 8, tzinfo=UTC)
WEEK = "2026-W48"
LEAD = DirectoryUser("alice@example.com", "Alice", slack_user_id="U0ALICE", telegram_chat_id=111)
FACE = Team(
    "face",
    namespaces=("face-research",),
    leads=("alice@example.com",),
    digest_channels=("email", "slack", "telegram"),
    slack_channel="#face-gpu",
)


async def seed_week(store: Store) -> None:
    """The team, its lead, and one 2-GPU job of the week: 4 GPU-hours held, 1 used, 2 idle."""
    await store.directory.replace_teams([FACE])
    await store.directory.upsert_user(LEAD)
    job = week_job("w48-1", "bob@example.com", name="train-digest")
    await stored.upsert_jobs(store, [job])
    await stored.save_usage(
        store, "default", "w48-1", Usage(gpu_minutes=240, used_gpu_minutes=60, idle_gpu_minutes=120)
    )


def scheduler(store: Store, clock: FakeClock) -> DigestScheduler:
    return DigestScheduler(
        store, schedule="0 8 * * MON", timezone="UTC", channels={"email", "slack", "telegram"}, clock=clock
    )


def dispatcher(store: Store, senders: dict[str, Sender], clock: FakeClock) -> Dispatcher:
    return Dispatcher(
        store,
        senders,
        renderer(),
        DispatchOptions(limits=UNLIMITED, rand=lambda: 0.5),
        clock=clock,
        sleep=clock.sleep,
    )


async def test_each_digest_row_is_sent_once_with_the_chart_inline_in_the_mail(
    store: Store,
    senders: dict[str, Sender],
    telegram_api: tuple[FakeTelegram, str],
    slack_api: tuple[FakeSlack, str],
    smtp_server: tuple[RecordingHandler, int],
) -> None:
    telegram, slack, smtp = telegram_api[0], slack_api[0], smtp_server[0]
    clock = FakeClock(now=MONDAY)
    await seed_week(store)
    assert await scheduler(store, clock).run_once(MONDAY) == 3
    d = dispatcher(store, senders, clock)

    assert await d.run_once(MONDAY) == 3
    # Later rounds, a second scheduler (replica or restart): nothing new is planned or sent.
    assert await d.run_once(clock.advance(3600)) == 0
    assert await scheduler(store, clock).run_once(clock.now) == 0
    assert await d.run_once(clock.advance(60)) == 0

    (mail,) = smtp.received
    assert mail.rcpt_tos == ["alice@example.com"]
    assert WEEK in mail.message["Subject"] and "face" in mail.message["Subject"]
    html = mail.message.get_body(preferencelist=("html",))
    assert html is not None
    assert f'src="cid:{CHART_CID}"' in html.get_content()
    # The chart sits next to the HTML in its multipart/related, found by Content-ID.
    (related,) = [p for p in mail.message.walk() if p.get_content_type() == "multipart/related"]
    parts = list(related.iter_parts())
    assert [p.get_content_type() for p in parts] == ["text/html", "image/png"]
    assert parts[1]["Content-ID"] == f"<{CHART_CID}>"
    assert sum(p.get_content_type() == "image/png" for p in mail.message.walk()) == 1
    png = parts[1].get_content()
    assert isinstance(png, bytes) and png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 1000
    text = mail.message.get_body(preferencelist=("plain",))
    assert text is not None and "4 h of GPU held, 25 % used, 2 h idle, over 1 jobs." in text.get_content()

    ((channel, post),) = slack.posted()
    assert channel == "#face-gpu"
    assert "bob@example.com" in str(post["blocks"])
    ((asked,),) = [[c.params] for c in slack.calls_to("files.getUploadURLExternal")]
    assert asked["filename"] == f"digest-face-{WEEK}.png" and asked.get("alt_txt")
    ((uploaded,),) = [list(slack.uploads.values())]
    assert uploaded.startswith(b"\x89PNG\r\n\x1a\n") and int(asked["length"]) == len(uploaded)
    ((completed,),) = [[c.params] for c in slack.calls_to("files.completeUploadExternal")]
    assert completed["channel_id"] == "#face-gpu" and completed["thread_ts"] == "1796000000.000001"
    ((chat, message),) = telegram.sent()
    assert chat == 111 and WEEK in message and "face" in message

    rows = await all_rows(store)
    assert {(r.kind, r.channel, r.recipient) for r in rows} == {
        (NotificationKind.DIGEST, Channel.EMAIL, "alice@example.com"),
        (NotificationKind.DIGEST, Channel.SLACK, "#face-gpu"),
        (NotificationKind.DIGEST, Channel.TELEGRAM, "alice@example.com"),
    }
    assert all(r.status is DeliveryStatus.SENT and r.attempts == 1 for r in rows)
    assert all(r.sent_at == MONDAY for r in rows)
    by_channel = {r.channel: r.provider_message_id for r in rows}
    assert by_channel[Channel.EMAIL] == mail.message["Message-ID"]
    assert by_channel[Channel.SLACK] == "#face-gpu:1796000000.000001"


async def test_a_digest_and_a_summary_to_the_same_chat_are_separate_messages(
    store: Store, senders: dict[str, Sender], telegram_api: tuple[FakeTelegram, str]
) -> None:
    telegram = telegram_api[0]
    clock = FakeClock(now=MONDAY)
    await seed_week(store)
    users = {LEAD.email: DirectoryUser(LEAD.email, "Alice", telegram_chat_id=111, channels=("telegram",))}
    await finish(store, [finished_job("s1")], users, MONDAY - timedelta(minutes=1), group_wait_seconds=0)
    await DigestScheduler(
        store, schedule="0 8 * * MON", timezone="UTC", channels={"telegram"}, clock=clock
    ).run_once(MONDAY)

    assert await dispatcher(store, senders, clock).run_once(MONDAY) == 2
    texts = sorted(text for chat, text in telegram.sent() if chat == 111)
    assert len(texts) == 2
    assert sum("train-s1" in t for t in texts) == 1
    assert sum(WEEK in t for t in texts) == 1
    assert {r.status for r in await all_rows(store)} == {DeliveryStatus.SENT}


def digest_row(payload: dict[str, object], channel: Channel = Channel.EMAIL) -> Notification:
    return Notification(
        dedup_key=f"digest/broken/{channel.value}/{sorted(payload)}",
        kind=NotificationKind.DIGEST,
        channel=channel,
        recipient="alice@example.com",
        due_at=MONDAY,
        created_at=MONDAY,
        payload=payload,
    )


UNUSABLE = [
    ({"week": WEEK, "timezone": "UTC"}, "digest row cannot be rendered: digest row"),
    ({"team": "face", "timezone": "UTC"}, "digest row cannot be rendered: digest row"),
]


@pytest.mark.parametrize(("payload", "reason"), UNUSABLE, ids=["no team", "no week"])
async def test_a_digest_row_that_cannot_be_rendered_fails_at_once(
    store: Store,
    senders: dict[str, Sender],
    smtp_server: tuple[RecordingHandler, int],
    payload: dict[str, object],
    reason: str,
) -> None:
    clock = FakeClock(now=MONDAY)
    await store.outbox.enqueue([digest_row(payload)])
    d = dispatcher(store, senders, clock)

    assert await d.run_once(MONDAY) == 1
    (row,) = await all_rows(store)
    assert row.status is DeliveryStatus.FAILED
    assert row.last_error is not None and row.last_error.startswith(reason)
    assert smtp_server[0].received == []
    assert await d.run_once(clock.advance(3600)) == 0
