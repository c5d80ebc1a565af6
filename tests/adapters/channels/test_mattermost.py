"""The Mattermost sender against a fake REST API v4: a DM is a direct channel with the bot, then a
post; ids are looked up once; 429 waits X-Ratelimit-Reset; a person with no account, a wrong token
and other refusals are permanent; only the dispatcher retries. And its Markdown: Slack's templates
with Markdown's bold, links and escaping, mentioning nobody."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from inno_notify.adapters.channels.base import ChannelError, MattermostMessage, Recipient, SlackMessage
from inno_notify.adapters.channels.markup import ZWSP, escape_markdown, mrkdwn_to_markdown
from inno_notify.adapters.channels.mattermost import MattermostSender
from inno_notify.adapters.channels.render import Renderer
from inno_notify.domain.model import Channel
from tests.adapters.channels import fake_mattermost
from tests.adapters.channels.fake_mattermost import BOT_ID, FakeMattermost, rate_limited
from tests.adapters.channels.test_render import view

TOKEN = "mm-secret-bot-token-0123456789"
ALICE = Recipient(email="Alice@Example.com", name="Alice")
HELLO = MattermostMessage("**hello**")


@pytest.fixture
async def mattermost() -> AsyncIterator[tuple[FakeMattermost, str]]:
    fake = FakeMattermost(TOKEN, users={"alice@example.com": "aliceid000000000000000000a"})
    async with fake_mattermost.serving(fake) as url:
        yield fake, url


@pytest.fixture
async def sender(mattermost: tuple[FakeMattermost, str]) -> AsyncIterator[MattermostSender]:
    built = MattermostSender(mattermost[1], TOKEN, timeout=5)
    yield built
    await built.aclose()


async def test_a_dm_is_a_direct_channel_with_the_bot_then_a_post(
    mattermost: tuple[FakeMattermost, str], sender: MattermostSender
) -> None:
    fake, _ = mattermost

    first = await sender.send(ALICE, HELLO)
    second = await sender.send(ALICE, MattermostMessage("again"))

    assert first.startswith("post") and second != first
    [(channel, messages)] = fake.posts.items()
    assert messages == ["**hello**", "again"]
    direct = fake.calls_to("/api/v4/channels/direct")
    assert [c.body for c in direct] == [[BOT_ID, "aliceid000000000000000000a"]]
    # The user, the bot and the channel are looked up once; then each message is one post.
    assert [c.path for c in fake.calls] == [
        "/api/v4/users/email/alice@example.com",
        "/api/v4/users/me",
        "/api/v4/channels/direct",
        "/api/v4/posts",
        "/api/v4/posts",
    ]
    assert fake.calls[-1].body == {"channel_id": channel, "message": "again"}


async def test_messages_sent_at_once_to_a_new_recipient_look_them_up_once(
    mattermost: tuple[FakeMattermost, str], sender: MattermostSender
) -> None:
    fake, _ = mattermost
    posts = await asyncio.gather(*(sender.send(ALICE, MattermostMessage(f"m{i}")) for i in range(4)))

    assert len(set(posts)) == 4
    assert len(fake.calls_to("/api/v4/users/email/alice@example.com")) == 1
    assert len(fake.calls_to("/api/v4/channels/direct")) == 1


ALICE_ID = "aliceid000000000000000000a"


async def test_the_email_of_a_user_id_is_read_from_the_account(
    mattermost: tuple[FakeMattermost, str], sender: MattermostSender
) -> None:
    fake, _ = mattermost
    assert await sender.email_of(ALICE_ID) == "alice@example.com"
    assert await sender.email_of("nobody0000000000000000000a") is None  # 404
    # Not a Mattermost id: not even asked (it would be a path of another endpoint).
    assert await sender.email_of("../users/me") is None
    assert await sender.email_of("email/alice@example.com") is None
    fake.hidden_emails.add(ALICE_ID)
    assert await sender.email_of(ALICE_ID) is None
    fake.hidden_emails.clear()
    fake.deactivated.add(ALICE_ID)
    assert await sender.email_of(ALICE_ID) is None
    assert [c.path for c in fake.calls] == [
        f"/api/v4/users/{u}" for u in (ALICE_ID, "nobody0000000000000000000a", ALICE_ID, ALICE_ID)
    ]


async def test_the_email_of_a_user_id_fails_like_any_call(
    mattermost: tuple[FakeMattermost, str], sender: MattermostSender
) -> None:
    fake, _ = mattermost
    fake.scripted.append((503, {}))
    with pytest.raises(ChannelError) as info:
        await sender.email_of(ALICE_ID)
    assert info.value.retryable and TOKEN not in info.value.message


async def test_rate_limited_waits_the_reset_and_is_tried_once(
    mattermost: tuple[FakeMattermost, str], sender: MattermostSender
) -> None:
    fake, _ = mattermost
    fake.scripted.append(rate_limited(12))

    with pytest.raises(ChannelError) as raised:
        await sender.send(ALICE, HELLO)

    assert (raised.value.retryable, raised.value.retry_after) == (True, 12.0)
    assert "429" in raised.value.message
    assert len(fake.calls) == 1 and fake.posts == {}
    # The next attempt (the dispatcher's) goes through.
    assert (await sender.send(ALICE, HELLO)).startswith("post")


async def test_a_person_without_an_account_is_permanent(
    mattermost: tuple[FakeMattermost, str], sender: MattermostSender
) -> None:
    with pytest.raises(ChannelError) as raised:
        await sender.send(Recipient(email="nobody@example.com"), HELLO)
    assert not raised.value.retryable
    assert raised.value.message == "mattermost: no user nobody@example.com (HTTP 404)"


@pytest.mark.parametrize(
    ("status", "retryable"),
    [
        (500, True),
        (502, True),
        (503, True),
        (408, True),
        (400, False),
        (403, False),
        (404, False),
        (413, False),
    ],
)
async def test_classifies_each_refusal(
    mattermost: tuple[FakeMattermost, str], sender: MattermostSender, status: int, retryable: bool
) -> None:
    fake, _ = mattermost
    await sender.send(ALICE, HELLO)  # the ids are cached: the next call is the post
    fake.scripted.append((status, {}))
    with pytest.raises(ChannelError) as raised:
        await sender.send(ALICE, HELLO)
    assert raised.value.retryable is retryable and f"HTTP {status}" in raised.value.message
    assert raised.value.retry_after is None


async def test_a_wrong_token_is_permanent_and_never_shown(mattermost: tuple[FakeMattermost, str]) -> None:
    wrong = MattermostSender(mattermost[1], "wrong-token-xyz")
    try:
        with pytest.raises(ChannelError) as raised:
            await wrong.send(ALICE, HELLO)
        with pytest.raises(ChannelError):
            await wrong.check()
    finally:
        await wrong.aclose()
    assert not raised.value.retryable
    assert "HTTP 401" in raised.value.message and "session_expired" in raised.value.message
    assert "wrong-token-xyz" not in raised.value.message and "wrong-token-xyz" not in repr(wrong)


async def test_an_unreachable_server_is_retryable() -> None:
    offline = MattermostSender("http://127.0.0.1:9", TOKEN, timeout=5)
    try:
        with pytest.raises(ChannelError) as raised:
            await offline.send(ALICE, HELLO)
    finally:
        await offline.aclose()
    assert raised.value.retryable and TOKEN not in raised.value.message


async def test_check_names_the_bot(sender: MattermostSender) -> None:
    assert (await sender.check()).endswith("as @inno-notify")


async def test_a_message_for_another_channel_is_a_programming_error(sender: MattermostSender) -> None:
    with pytest.raises(TypeError):
        await sender.send(ALICE, SlackMessage("x"))


def test_the_summary_is_slacks_template_as_markdown() -> None:
    renderer = Renderer(dashboard_url="https://gpu.example.org/")
    message = renderer.render_summary(Channel.MATTERMOST, view(name="train_*x*-@here"))
    assert isinstance(message, MattermostMessage)
    text = message.markdown
    assert "**Exit code:** 137" in text and "*Exit code:*" not in text.replace("**Exit code:**", "")
    assert f"train\\_\\*x\\*-@{ZWSP}here" in text
    assert "[Dashboard](https://gpu.example.org/jobs/face-research/" in text
    assert "<https://" not in text and "&amp;" not in text


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("@channel and @all", f"@{ZWSP}channel and @{ZWSP}all"),
        ("alice@example.com", "alice@example.com"),
        ("~town-square", f"~{ZWSP}town-square"),
        ("[x](javascript:alert(1))", "\\[x\\]\\(javascript:alert\\(1\\)\\)"),
        ("![img](http://x/y.png)", "\\!\\[img\\]\\(http://x/y.png\\)"),
        ("# heading\n- item\n1. one\n> quote", "\\# heading\n\\- item\n1\\. one\n\\> quote"),
        ("42.5 GiB, -5 °C", "42.5 GiB, -5 °C"),
        ("`code` **b** _i_ | t", "\\`code\\` \\*\\*b\\*\\* \\_i\\_ \\| t"),
    ],
)
def test_values_print_literally(value: str, shown: str) -> None:
    assert escape_markdown(value) == shown
    # And a template's bold around them stays bold, the value's stars stay escaped.
    assert mrkdwn_to_markdown(f"*{escape_markdown(value)}*") == f"**{shown}**" or "\n" in value
