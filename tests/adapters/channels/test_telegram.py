"""TelegramSender against a local Bot API server, with the real python-telegram-bot client."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from inno_notify.adapters.channels.base import (
    ChannelError,
    InlineImage,
    Recipient,
    SlackMessage,
    TelegramMessage,
)
from inno_notify.adapters.channels.telegram import TelegramSender, caption_length
from tests.adapters.channels import fake_telegram
from tests.adapters.channels.conftest import TELEGRAM_TOKEN
from tests.adapters.channels.fake_smtp import free_port
from tests.adapters.channels.fake_telegram import FakeTelegram

# PTB 22 warns from inside RetryAfter.__init__ that retry_after will become a timedelta; the
# sender handles both types.
pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

ALICE = Recipient(email="alice@example.com", name="Alice", telegram_chat_id=111)


@pytest.fixture
async def sender(telegram_api: tuple[FakeTelegram, str]) -> AsyncIterator[TelegramSender]:
    sender = TelegramSender(TELEGRAM_TOKEN, telegram_api[1], timeout=5.0)
    yield sender
    await sender.aclose()


async def test_sends_html_to_the_chat_and_returns_the_message_id(
    telegram_api: tuple[FakeTelegram, str], sender: TelegramSender
) -> None:
    fake, _ = telegram_api
    first = await sender.send(ALICE, TelegramMessage("<b>done</b> &lt;ok&gt;"))
    second = await sender.send(Recipient(telegram_chat_id=222), TelegramMessage("second"))

    assert (first, second) == ("100", "101")
    assert fake.sent() == [(111, "<b>done</b> &lt;ok&gt;"), (222, "second")]
    call = fake.calls[0]
    # {api_url}/bot{token}/{method}, as CONTRACT.md says.
    assert (call.token, call.method) == (TELEGRAM_TOKEN, "sendMessage")
    assert call.params["parse_mode"] == "HTML"


@pytest.mark.parametrize(
    ("answer", "retryable", "retry_after", "says"),
    [
        (fake_telegram.too_many_requests(3), True, 3.0, "retry"),
        ((502, fake_telegram.BAD_GATEWAY_HTML), True, None, "Bad Gateway"),
        (
            (500, {"ok": False, "error_code": 500, "description": "Internal Server Error"}),
            True,
            None,
            "Internal",
        ),
        (fake_telegram.BLOCKED, False, None, "blocked"),
        (fake_telegram.CHAT_NOT_FOUND, False, None, "chat not found"),
        (fake_telegram.UNAUTHORIZED, False, None, "token was rejected"),
    ],
    ids=["429", "502-html", "500", "403-blocked", "400-chat-not-found", "401"],
)
async def test_classifies_bot_api_failures_and_sends_once(
    telegram_api: tuple[FakeTelegram, str],
    sender: TelegramSender,
    answer: tuple[int, dict[str, object] | str],
    retryable: bool,
    retry_after: float | None,
    says: str,
) -> None:
    fake, _ = telegram_api
    fake.scripted.append(answer)

    with pytest.raises(ChannelError) as caught:
        await sender.send(ALICE, TelegramMessage("hello"))

    assert (caught.value.retryable, caught.value.retry_after) == (retryable, retry_after)
    assert says.lower() in str(caught.value).lower()
    assert len(fake.calls) == 1, "the channel must not retry by itself"


async def test_blocked_and_unknown_chats_come_from_the_server_state(
    telegram_api: tuple[FakeTelegram, str], sender: TelegramSender
) -> None:
    with pytest.raises(ChannelError) as blocked:
        await sender.send(Recipient(telegram_chat_id=666), TelegramMessage("x"))
    with pytest.raises(ChannelError) as unknown:
        await sender.send(Recipient(telegram_chat_id=999), TelegramMessage("x"))

    assert not blocked.value.retryable and "blocked" in str(blocked.value)
    assert not unknown.value.retryable and "chat not found" in str(unknown.value).lower()
    assert telegram_api[0].sent() == [(666, "x"), (999, "x")]


async def test_a_recipient_without_chat_id_is_permanent_and_nothing_is_sent(
    telegram_api: tuple[FakeTelegram, str], sender: TelegramSender
) -> None:
    with pytest.raises(ChannelError) as caught:
        await sender.send(Recipient(email="nochat@example.com"), TelegramMessage("x"))

    assert not caught.value.retryable
    assert telegram_api[0].calls == []


async def test_a_message_for_another_channel_is_a_programming_error(sender: TelegramSender) -> None:
    with pytest.raises(TypeError):
        await sender.send(ALICE, SlackMessage(text="x"))


async def test_an_unreachable_server_is_retryable() -> None:
    sender = TelegramSender(TELEGRAM_TOKEN, f"http://127.0.0.1:{free_port()}", timeout=2.0)
    try:
        with pytest.raises(ChannelError) as caught:
            await sender.send(ALICE, TelegramMessage("x"))
    finally:
        await sender.aclose()

    assert caught.value.retryable
    assert TELEGRAM_TOKEN not in str(caught.value)


async def test_a_server_that_does_not_answer_in_time_is_retryable() -> None:
    never = asyncio.Event()

    async def hang(request: web.Request) -> web.Response:
        await never.wait()
        return web.Response()

    app = web.Application()
    app.router.add_post("/bot{token}/{method}", hang)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    sender = TelegramSender(TELEGRAM_TOKEN, str(server.make_url("")).rstrip("/"), timeout=0.2)
    try:
        with pytest.raises(ChannelError) as caught:
            await sender.send(ALICE, TelegramMessage("x"))
    finally:
        never.set()
        await sender.aclose()
        await server.close()

    assert caught.value.retryable
    assert "timed out" in str(caught.value)


async def test_a_server_trickling_its_answer_forever_times_out_in_total(
    telegram_api: tuple[FakeTelegram, str],
) -> None:
    """Every byte arrives well within the read timeout, the answer never ends: only a total
    timeout stops it (the transport had none)."""
    fake, url = telegram_api
    fake.hang = "trickle"
    sender = TelegramSender(TELEGRAM_TOKEN, url, timeout=0.3)
    try:
        with pytest.raises(ChannelError) as caught:
            await asyncio.wait_for(sender.send(ALICE, TelegramMessage("x")), timeout=30)
    finally:
        await sender.aclose()

    assert caught.value.retryable
    assert "timed out" in str(caught.value)


async def test_check_reports_the_bot(sender: TelegramSender) -> None:
    assert await sender.check() == "@inno_notify_bot"


async def test_the_token_never_shows_in_errors_or_reprs(
    telegram_api: tuple[FakeTelegram, str], sender: TelegramSender
) -> None:
    fake, url = telegram_api
    errors: list[ChannelError] = []
    for answer in [
        fake_telegram.too_many_requests(1),
        (502, fake_telegram.BAD_GATEWAY_HTML),
        fake_telegram.BLOCKED,
    ]:
        fake.scripted.append(answer)
        with pytest.raises(ChannelError) as caught:
            await sender.send(ALICE, TelegramMessage("x"))
        errors.append(caught.value)
    wrong = TelegramSender("999:wrong-token-value", url)
    try:
        with pytest.raises(ChannelError) as rejected:
            await wrong.check()
        errors.append(rejected.value)
    finally:
        await wrong.aclose()

    for error in errors:
        for text in (str(error), repr(error), repr(error.args)):
            assert TELEGRAM_TOKEN not in text and "wrong-token-value" not in text
        assert error.__cause__ is None and error.__suppress_context__
    assert TELEGRAM_TOKEN not in repr(sender)


CHART = InlineImage("job-chart@inno-notify", b"\x89PNG\r\n\x1a\nchart", "chart.png", alt_text="GPU 0 idle")


async def test_a_short_summary_is_the_caption_of_its_chart(
    telegram_api: tuple[FakeTelegram, str], sender: TelegramSender
) -> None:
    fake, _ = telegram_api
    message_id = await sender.send(ALICE, TelegramMessage("<b>train</b> &amp; co", images=(CHART,)))
    (photo,) = fake.photos()
    assert message_id == "100"
    assert fake.sent() == []  # one message, the photo
    assert photo.files["photo"] == ("chart.png", CHART.png)
    assert (photo.params["caption"], photo.params["parse_mode"]) == ("<b>train</b> &amp; co", "HTML")


async def test_a_summary_too_long_for_a_caption_is_a_message_then_its_chart_as_a_reply(
    telegram_api: tuple[FakeTelegram, str], sender: TelegramSender
) -> None:
    fake, _ = telegram_api
    # 1,025 visible characters (the tags and the entity count as what they show).
    text = "<b>" + "x" * 1021 + "</b> &lt;ok"
    assert caption_length(text) == 1025
    message_id = await sender.send(ALICE, TelegramMessage(text, images=(CHART,)))
    assert message_id == "100" and fake.sent() == [(111, text)]
    (photo,) = fake.photos()
    assert photo.files["photo"][1] == CHART.png
    assert photo.params["caption"] == "GPU 0 idle" and "parse_mode" not in photo.params
    assert '"message_id": 100' in photo.params["reply_parameters"]


async def test_a_chart_that_fails_after_the_text_went_out_leaves_the_text_standing(
    telegram_api: tuple[FakeTelegram, str], sender: TelegramSender
) -> None:
    fake, _ = telegram_api
    text = "y" * 2000
    fake.scripted = [
        (
            200,
            {
                "ok": True,
                "result": {"message_id": 7, "date": 1, "chat": {"id": 111, "type": "private"}, "text": text},
            },
        ),
        (500, {"ok": False, "error_code": 500, "description": "Internal Server Error"}),
    ]
    assert await sender.send(ALICE, TelegramMessage(text, images=(CHART,))) == "7"
    assert [c.method for c in fake.calls] == ["sendMessage", "sendPhoto"]


async def test_a_failed_photo_with_the_summary_as_caption_is_a_failed_send(
    telegram_api: tuple[FakeTelegram, str], sender: TelegramSender
) -> None:
    fake, _ = telegram_api
    fake.scripted = [fake_telegram.too_many_requests(2)]
    with pytest.raises(ChannelError) as raised:
        await sender.send(ALICE, TelegramMessage("short", images=(CHART,)))
    assert raised.value.retryable and raised.value.retry_after == 2.0


@pytest.mark.parametrize(
    ("html", "length"),
    [("plain", 5), ("<b>bold</b>", 4), ("&lt;&gt;&amp;", 3), ('<a href="https://x">link</a>', 4), ("😀", 2)],
)
def test_caption_length_counts_what_telegram_counts(html: str, length: int) -> None:
    assert caption_length(html) == length
