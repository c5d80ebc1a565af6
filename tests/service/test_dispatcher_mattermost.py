"""Mattermost through the real path: a directory user with `channels: [mattermost]` gets their summary
and their team's digest as DMs from the bot (the real MattermostSender against the fake REST API
v4), on both databases; a person with no Mattermost account fails at once, a 429 waits
X-Ratelimit-Reset."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

from inno_notify.adapters.channels.mattermost import MattermostSender
from inno_notify.adapters.db import Store
from inno_notify.domain.model import Channel, DeliveryStatus, DirectoryUser, NotificationKind, Team
from tests.adapters.channels import fake_mattermost
from tests.adapters.channels.fake_mattermost import FakeMattermost, rate_limited

from .support import T0, FakeClock, all_rows, dispatcher, finish, finished_job, plan_digest

TOKEN = "mm-bot-token-for-the-dispatcher"
ALICE = DirectoryUser("alice@example.com", "Alice", channels=("mattermost",))
NOBODY = DirectoryUser("nobody@example.com", channels=("mattermost",))
USERS = {ALICE.email: ALICE, NOBODY.email: NOBODY}
FACE = Team(
    "face", namespaces=("face-research",), leads=("alice@example.com",), digest_channels=("mattermost",)
)
ENABLED = frozenset({"mattermost", "email"})


@pytest.fixture
async def mattermost() -> AsyncIterator[tuple[FakeMattermost, MattermostSender]]:
    fake = FakeMattermost(TOKEN, users={"alice@example.com": "aliceid000000000000000000a"})
    async with fake_mattermost.serving(fake) as url:
        sender = MattermostSender(url, TOKEN, timeout=5.0)
        yield fake, sender
        await sender.aclose()


async def test_a_summary_and_a_digest_arrive_as_dms(
    store: Store, mattermost: tuple[FakeMattermost, MattermostSender]
) -> None:
    fake, sender = mattermost
    clock = FakeClock()
    await finish(store, [finished_job("mm-1")], USERS, T0, group_wait_seconds=0, enabled=ENABLED)
    await plan_digest(store, FACE, ALICE, ENABLED, clock)
    d = dispatcher(store, {"mattermost": sender}, clock)

    assert await d.run_once(T0 + timedelta(seconds=1)) == 2
    assert await d.run_once(clock.advance(3600)) == 0

    rows = await all_rows(store)
    assert {(r.kind, r.channel, r.status) for r in rows} == {
        (NotificationKind.JOB_SUMMARY, Channel.MATTERMOST, DeliveryStatus.SENT),
        (NotificationKind.DIGEST, Channel.MATTERMOST, DeliveryStatus.SENT),
    }
    # Recorded under the post's id.
    assert all((r.provider_message_id or "").startswith("post") for r in rows)
    [(_, messages)] = fake.posts.items()
    assert len(messages) == 2
    summary = next(m for m in messages if "train-mm-1" in m)
    assert "**face-research/train-mm-1**" in summary and "**Exit code:**" in summary
    digest = next(m for m in messages if m is not summary)
    assert "face" in digest and "2026-W48" in digest
    # One DM channel, found once.
    assert len(fake.calls_to("/api/v4/channels/direct")) == 1


async def test_no_account_fails_at_once_and_a_429_waits_its_reset(
    store: Store, mattermost: tuple[FakeMattermost, MattermostSender]
) -> None:
    fake, sender = mattermost
    clock = FakeClock()
    d = dispatcher(store, {"mattermost": sender}, clock)
    await finish(
        store, [finished_job("mm-2", owner=NOBODY.email)], USERS, T0, group_wait_seconds=0, enabled=ENABLED
    )

    assert await d.run_once(T0 + timedelta(seconds=1)) == 1
    [nobody] = await all_rows(store)
    assert nobody.status is DeliveryStatus.FAILED
    assert "no user nobody@example.com" in (nobody.last_error or "")

    await finish(store, [finished_job("mm-3")], USERS, T0, group_wait_seconds=0, enabled=ENABLED)
    fake.scripted.append(rate_limited(30))
    assert await d.run_once(clock.advance(1)) == 1
    alice = next(r for r in await all_rows(store) if r.recipient == ALICE.email)
    assert alice.status is DeliveryStatus.PENDING and "429" in (alice.last_error or "")
    assert alice.next_attempt_at == clock.now + timedelta(seconds=30)

    assert await d.run_once(clock.advance(30)) == 1
    alice = next(r for r in await all_rows(store) if r.recipient == ALICE.email)
    assert alice.status is DeliveryStatus.SENT
