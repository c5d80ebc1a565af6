"""The digest scheduler: cron firings in a zone, the rows planned per team, exactly once per team and
week across rounds, restarts and replicas, and rendering of a planned row for the dispatcher."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from inno_notify.adapters.channels.base import MailMessage, SlackMessage
from inno_notify.adapters.channels.digest_views import DigestRenderer
from inno_notify.adapters.db import Store
from inno_notify.domain.model import (
    Channel,
    DirectoryUser,
    NotificationKind,
    RecipientAddress,
    Team,
    Usage,
)
from inno_notify.domain.preferences import Origin, Via
from inno_notify.domain.routing import Directory
from inno_notify.service.digest import DigestMessages, DigestScheduler, last_firing, next_firing, plan_digest
from tests import stored

from .support import week_job

BERLIN = "Europe/Berlin"
MONDAY_8 = "0 8 * * MON"
ALL = frozenset({"email", "slack", "telegram"})


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


@pytest.mark.parametrize(
    ("now", "fired"),
    [
        # Monday 30 Nov 2026, 08:00 CET = 07:00 UTC: a round exactly then counts this firing.
        (utc(2026, 11, 30, 7), utc(2026, 11, 30, 7)),
        (utc(2026, 11, 30, 6, 59), utc(2026, 11, 23, 7)),
        (utc(2026, 12, 3, 12), utc(2026, 11, 30, 7)),
        # Monday 26 Oct, the day after summer time ended: 08:00 CET is 07:00 UTC; the Monday
        # before, 08:00 CEST was 06:00 UTC.
        (utc(2026, 10, 26, 6, 30), utc(2026, 10, 19, 6)),
        (utc(2026, 10, 26, 7), utc(2026, 10, 26, 7)),
    ],
)
def test_last_firing_in_the_zone(now: datetime, fired: datetime) -> None:
    assert last_firing(MONDAY_8, BERLIN, now) == fired
    upcoming = next_firing(MONDAY_8, BERLIN, fired)
    assert upcoming > fired and last_firing(MONDAY_8, BERLIN, upcoming) == upcoming


USERS = {
    "lead@example.com": DirectoryUser("lead@example.com", "Lead", slack_user_id="U1", telegram_chat_id=42),
    "co@example.com": DirectoryUser("co@example.com", "Co"),
}
FACE = Team(
    "face", ("face-research",), ("lead@example.com", "Co@example.com"), ("email", "slack", "telegram")
)
NOW = utc(2026, 11, 30, 7)


@pytest.mark.parametrize(
    ("team", "channels", "expected"),
    [
        (
            FACE,
            ALL,
            {
                ("email", "lead@example.com"),
                ("email", "co@example.com"),
                ("slack", "lead@example.com"),
                ("slack", "co@example.com"),
                # co has no chat id: no Telegram row for them.
                ("telegram", "lead@example.com"),
            },
        ),
        # A team channel replaces the Slack DMs.
        (
            Team(
                "face", leads=("lead@example.com",), digest_channels=("email", "slack"), slack_channel="#face"
            ),
            ALL,
            {("email", "lead@example.com"), ("slack", "#face")},
        ),
        # Channels the service has not configured are left out.
        (FACE, frozenset({"email"}), {("email", "lead@example.com"), ("email", "co@example.com")}),
        (Team("solo", leads=()), ALL, set()),
    ],
)
def test_plan_digest_rows(team: Team, channels: frozenset[str], expected: set[tuple[str, str]]) -> None:
    directory = Directory(USERS, {})
    rows = plan_digest(team, "2026-W48", BERLIN, due_at=NOW, now=NOW, directory=directory, channels=channels)
    assert {(r.channel.value, r.recipient) for r in rows} == expected
    for row in rows:
        assert row.kind is NotificationKind.DIGEST
        assert row.dedup_key == f"digest/{team.name}/2026-W48/{row.channel.value}/{row.recipient}"
        assert row.payload == {"team": team.name, "week": "2026-W48", "timezone": BERLIN}
    assert {(r.channel.value, r.recipient): r.address for r in rows} == {
        row: DIGEST_ADDRESSES[row] for row in expected
    }


# Where each digest row goes: the lead's name, and the address of the row's channel.
DIGEST_ADDRESSES = {
    ("email", "lead@example.com"): RecipientAddress(name="Lead"),
    ("email", "co@example.com"): RecipientAddress(name="Co"),
    ("slack", "lead@example.com"): RecipientAddress(name="Lead", slack_user_id="U1"),
    ("slack", "co@example.com"): RecipientAddress(name="Co"),
    ("telegram", "lead@example.com"): RecipientAddress(name="Lead", telegram_chat_id=42),
    ("slack", "#face"): RecipientAddress(slack_channel="#face"),
}


async def digest_rows(store: Store) -> list[tuple[str, str, datetime]]:
    page, _ = await store.outbox.list_notifications(limit=500)
    return sorted((n.dedup_key, n.kind.value, n.due_at) for n in page)


async def test_exactly_once_per_team_and_week_across_rounds_restarts_and_replicas(store: Store) -> None:
    await store.directory.replace_teams([FACE, Team("vision", leads=("v@example.com",))])
    for user in USERS.values():
        await store.directory.upsert_user(user)

    def scheduler() -> DigestScheduler:
        return DigestScheduler(
            store, schedule=MONDAY_8, timezone=BERLIN, channels={"email"}, clock=lambda: NOW
        )

    first, replica = scheduler(), scheduler()
    assert await first.run_once(NOW) == 3
    assert await replica.run_once(NOW + timedelta(minutes=1)) == 0
    assert await scheduler().run_once(NOW + timedelta(days=3)) == 0  # a restart mid-week
    rows = await digest_rows(store)
    assert [key for key, _, _ in rows] == [
        "digest/face/2026-W48/email/co@example.com",
        "digest/face/2026-W48/email/lead@example.com",
        "digest/vision/2026-W48/email/v@example.com",
    ]
    assert {(kind, due) for _, kind, due in rows} == {("digest", NOW)}
    # The next Monday's firing plans the next week, once.
    assert await replica.run_once(NOW + timedelta(days=7)) == 3
    assert await first.run_once(NOW + timedelta(days=7, hours=1)) == 0
    assert len(await digest_rows(store)) == 6


async def test_a_lead_or_admin_who_unsubscribed_gets_no_e_mail_digest(store: Store) -> None:
    """The one-click unsubscribe (issue 33) stops digests by e-mail too, a team's and the admins',
    for a lead in the directory or not; the lead's other digest channels stay."""
    await store.directory.replace_teams([FACE])
    for user in USERS.values():
        await store.directory.upsert_user(user)
    by_link = Origin(Via.EMAIL, NOW)
    for email in ("Co@example.com", "ops@example.com"):
        await store.directory.change_preferences(email, NOW, changes={"emails": False}, origin=by_link)
    scheduler = DigestScheduler(
        store,
        schedule=MONDAY_8,
        timezone=BERLIN,
        channels=ALL,
        clock=lambda: NOW,
        admin_recipients=["OPS@example.com", "sre@example.com"],
    )
    await scheduler.run_once(NOW)
    page, _ = await store.outbox.list_notifications(limit=500)
    assert sorted((n.channel.value, n.recipient) for n in page) == [
        ("email", "lead@example.com"),
        ("email", "sre@example.com"),
        ("slack", "co@example.com"),
        ("slack", "lead@example.com"),
        ("telegram", "lead@example.com"),
    ]


async def test_run_plans_at_the_firing_and_stops(store: Store) -> None:
    await store.directory.replace_teams([Team("face", leads=("lead@example.com",))])
    now = [utc(2026, 11, 30, 6)]  # an hour before the firing
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        now[0] += timedelta(seconds=seconds)
        if now[0] > utc(2026, 11, 30, 7):
            stop.set()
        await asyncio.sleep(0)

    stop = asyncio.Event()
    scheduler = DigestScheduler(
        store, schedule=MONDAY_8, timezone=BERLIN, channels={"email"}, clock=lambda: now[0], sleep=sleep
    )
    await asyncio.wait_for(scheduler.run(stop), 5)
    keys = [key for key, _, _ in await digest_rows(store)]
    # At 06:00 UTC the newest firing was the week before (plans W47); at 07:00 it plans W48.
    assert keys == [
        "digest/face/2026-W47/email/lead@example.com",
        "digest/face/2026-W48/email/lead@example.com",
    ]
    assert sleeps[0] == 300.0  # never sleeps past one poll interval


async def test_a_planned_row_renders_with_the_weeks_figures(store: Store) -> None:
    job = week_job("j1", name="train")
    await stored.upsert_jobs(store, [job])
    await stored.save_usage(
        store, "default", "j1", Usage(gpu_minutes=240, used_gpu_minutes=60, idle_gpu_minutes=120)
    )
    team = Team(
        "face", leads=("lead@example.com",), digest_channels=("email", "slack"), slack_channel="#face"
    )
    nobody = Directory({}, {})
    rows = plan_digest(team, "2026-W48", BERLIN, due_at=NOW, now=NOW, directory=nobody, channels=ALL)
    messages = DigestMessages(store, DigestRenderer())
    mail = await messages.render(next(r for r in rows if r.channel is Channel.EMAIL))
    assert isinstance(mail, MailMessage)
    assert "4 h of GPU held, 25 % used, 2 h idle, over 1 jobs." in mail.text
    assert len(mail.images) == 1 and mail.images[0].png.startswith(b"\x89PNG")
    post = await messages.render(next(r for r in rows if r.channel is Channel.SLACK))
    assert isinstance(post, SlackMessage) and "alice@example.com" in str(post.blocks)


def test_mattermost_digests_go_to_each_lead_by_email_and_the_webhook_gets_a_copy_each() -> None:
    team = Team(
        "face", leads=("Lead@example.com", "ext@example.org"), digest_channels=("mattermost", "email")
    )
    users = {"lead@example.com": DirectoryUser("lead@example.com", "Lead", telegram_chat_id=7)}
    now = datetime(2026, 11, 30, 8, tzinfo=UTC)
    rows = plan_digest(
        team,
        "2026-W48",
        "UTC",
        due_at=now,
        now=now,
        directory=Directory(users, {}),
        channels={"mattermost", "webhook"},
    )
    assert sorted((r.channel.value, r.recipient, r.address.telegram_chat_id) for r in rows) == [
        ("mattermost", "ext@example.org", None),
        ("mattermost", "lead@example.com", None),
        ("webhook", "ext@example.org", None),
        ("webhook", "lead@example.com", None),
    ]
    assert len({r.dedup_key for r in rows}) == 4
