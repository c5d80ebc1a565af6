"""SlackSender against a local Web API server, with the real slack-sdk AsyncWebClient."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from inno_notify.adapters.channels.base import ChannelError, Recipient, SlackMessage, TelegramMessage
from inno_notify.adapters.channels.slack import EVENT_TYPE, SlackSender
from tests.adapters.channels.conftest import SLACK_TOKEN
from tests.adapters.channels.fake_slack import FakeSlack, Scripted, api_error, rate_limited
from tests.adapters.channels.fake_smtp import free_port

BOB = Recipient(slack_user_id="U0BOB")
MESSAGE = SlackMessage(
    text="job face/x failed",
    blocks=({"type": "section", "text": {"type": "mrkdwn", "text": "*job* face/x failed"}},),
)


@pytest.fixture
async def sender(slack_api: tuple[FakeSlack, str]) -> AsyncIterator[SlackSender]:
    sender = SlackSender(SLACK_TOKEN, slack_api[1], timeout=5.0)
    yield sender
    await sender.aclose()


async def test_dms_a_user_by_id_with_blocks_and_text_fallback(
    slack_api: tuple[FakeSlack, str], sender: SlackSender
) -> None:
    fake, _ = slack_api
    message_id = await sender.send(BOB, MESSAGE)

    assert message_id == "D0BOB:1796000000.000001"
    [(channel, payload)] = fake.posted()
    assert channel == "U0BOB"
    assert payload["text"] == MESSAGE.text
    assert payload["blocks"] == [dict(b) for b in MESSAGE.blocks]
    assert fake.calls[0].token == SLACK_TOKEN


# Before every post of the fake (its timestamps start at 1796000000, 2026-11-29).
BEFORE_POSTS = datetime(2026, 11, 1, tzinfo=UTC)


async def test_a_keyed_message_carries_its_outbox_rows_as_metadata(
    slack_api: tuple[FakeSlack, str], sender: SlackSender
) -> None:
    fake, _ = slack_api
    await sender.send(BOB, replace(MESSAGE, key="k1", rows=(7, 8)))
    await sender.send(BOB, MESSAGE)

    [(_, keyed), (_, plain)] = fake.posted()
    assert keyed["metadata"] == {"event_type": EVENT_TYPE, "event_payload": {"key": "k1", "rows": [7, 8]}}
    assert "metadata" not in plain


@pytest.mark.parametrize(
    ("rows", "since", "found"),
    [
        ((7,), BEFORE_POSTS, True),  # carried by the post (with another row)
        ((7, 8), BEFORE_POSTS, True),
        ((7, 9), BEFORE_POSTS, False),  # 9 was never posted: the post does not cover the message
        ((9,), BEFORE_POSTS, False),
        ((7,), datetime(2026, 12, 1, tzinfo=UTC), False),  # posted before `since`: not ours
    ],
)
async def test_finds_a_post_of_its_rows_in_the_dm_history(
    slack_api: tuple[FakeSlack, str],
    sender: SlackSender,
    rows: tuple[int, ...],
    since: datetime,
    found: bool,
) -> None:
    fake, _ = slack_api
    bob = Recipient(email="bob@example.com")
    posted = await sender.send(bob, replace(MESSAGE, key="k1", rows=(7, 8)))
    await sender.send(bob, MESSAGE)  # a newer post without metadata is passed over

    assert await sender.find_sent(bob, rows, since) == (posted if found else None)
    [history] = fake.calls_to("conversations.history")
    assert history.params["channel"] == "D0BOB" and history.params["include_all_metadata"] in {"1", "true"}


async def test_reads_the_history_page_by_page(slack_api: tuple[FakeSlack, str]) -> None:
    from inno_notify.adapters.channels import slack

    fake, url = slack_api
    sender = SlackSender(SLACK_TOKEN, url, timeout=5.0)
    try:
        first = await sender.send(BOB, replace(MESSAGE, key="k1", rows=(1,)))
        for n in range(2, 2 + slack.HISTORY_PAGE + 3):
            await sender.send(BOB, replace(MESSAGE, key=f"k{n}", rows=(n,)))

        assert await sender.find_sent(BOB, [1], BEFORE_POSTS) == first
        assert len(fake.calls_to("conversations.history")) == 2
    finally:
        await sender.aclose()


async def test_a_channel_named_not_by_id_cannot_be_read(
    slack_api: tuple[FakeSlack, str], sender: SlackSender
) -> None:
    team = Recipient(slack_channel="#face-gpu")
    await sender.send(team, replace(MESSAGE, key="k1", rows=(1,)))

    assert await sender.find_sent(team, [1], BEFORE_POSTS) is None
    assert not slack_api[0].calls_to("conversations.history")


async def test_a_history_it_may_not_read_is_a_channel_error(
    slack_api: tuple[FakeSlack, str], sender: SlackSender
) -> None:
    slack_api[0].scripted.append(api_error("missing_scope"))

    with pytest.raises(ChannelError, match="conversations_history: missing_scope"):
        await sender.find_sent(Recipient(slack_channel="C0FACE"), [1], BEFORE_POSTS)


async def test_looks_a_user_up_by_email_once_and_caches_the_id(
    slack_api: tuple[FakeSlack, str], sender: SlackSender
) -> None:
    fake, _ = slack_api
    alice = Recipient(email="Alice@Example.com")
    await sender.send(alice, MESSAGE)
    await sender.send(alice, MESSAGE)

    assert [c.params["email"] for c in fake.calls_to("users.lookupByEmail")] == ["Alice@Example.com"]
    assert [channel for channel, _ in fake.posted()] == ["U0ALICE", "U0ALICE"]


async def test_posts_to_a_team_channel(slack_api: tuple[FakeSlack, str], sender: SlackSender) -> None:
    message_id = await sender.send(Recipient(slack_channel="#face-gpu", email="lead@example.com"), MESSAGE)

    assert message_id.startswith("#face-gpu:")
    assert [channel for channel, _ in slack_api[0].posted()] == ["#face-gpu"]


@pytest.mark.parametrize(
    ("recipient", "scripted", "retryable", "retry_after", "says"),
    [
        (Recipient(email="nobody@example.com"), None, False, None, "users_not_found"),
        (Recipient(slack_channel="#nowhere"), None, False, None, "channel_not_found"),
        (BOB, rate_limited(7), True, 7.0, "ratelimited"),
        (BOB, api_error("internal_error", 500), True, None, "internal_error"),
        (BOB, Scripted(503, "<html>503</html>", {"Retry-After": "30"}), True, 30.0, "503"),
        (BOB, api_error("fatal_error"), True, None, "fatal_error"),
        (BOB, api_error("invalid_auth"), False, None, "invalid_auth"),
        (BOB, api_error("invalid_blocks"), False, None, "invalid_blocks"),
    ],
    ids=[
        "users-not-found",
        "channel-not-found",
        "429",
        "500",
        "503-html",
        "fatal-error",
        "invalid-auth",
        "invalid-blocks",
    ],
)
async def test_classifies_web_api_failures_and_calls_once(
    slack_api: tuple[FakeSlack, str],
    sender: SlackSender,
    recipient: Recipient,
    scripted: Scripted | None,
    retryable: bool,
    retry_after: float | None,
    says: str,
) -> None:
    fake, _ = slack_api
    if scripted is not None:
        fake.scripted.append(scripted)

    with pytest.raises(ChannelError) as caught:
        await sender.send(recipient, MESSAGE)

    assert (caught.value.retryable, caught.value.retry_after) == (retryable, retry_after)
    assert says in str(caught.value)
    assert len(fake.calls) == 1, "the channel must not retry by itself"


async def test_a_wrong_token_is_permanent_and_never_shown(slack_api: tuple[FakeSlack, str]) -> None:
    sender = SlackSender("xoxb-wrong-secret", slack_api[1])
    try:
        with pytest.raises(ChannelError) as caught:
            await sender.send(BOB, MESSAGE)
    finally:
        await sender.aclose()

    assert not caught.value.retryable and "invalid_auth" in str(caught.value)
    assert "xoxb-wrong-secret" not in repr(caught.value) + str(caught.value) + repr(sender)


async def test_an_unreachable_server_is_retryable_and_tried_once() -> None:
    sender = SlackSender(SLACK_TOKEN, f"http://127.0.0.1:{free_port()}/api/", timeout=2.0)
    try:
        with pytest.raises(ChannelError) as caught:
            await sender.send(BOB, MESSAGE)
    finally:
        await sender.aclose()

    assert caught.value.retryable
    assert SLACK_TOKEN not in str(caught.value) + repr(caught.value)
    assert caught.value.__cause__ is None


async def test_a_recipient_without_any_slack_address_is_permanent(
    slack_api: tuple[FakeSlack, str], sender: SlackSender
) -> None:
    with pytest.raises(ChannelError) as caught:
        await sender.send(Recipient(name="Nobody"), MESSAGE)

    assert not caught.value.retryable
    assert slack_api[0].calls == []


async def test_a_message_for_another_channel_is_a_programming_error(sender: SlackSender) -> None:
    with pytest.raises(TypeError):
        await sender.send(BOB, TelegramMessage("x"))


async def test_check_names_the_workspace(sender: SlackSender) -> None:
    assert await sender.check() == "Research as inno-notify"
