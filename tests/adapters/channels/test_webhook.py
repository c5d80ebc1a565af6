"""The webhook sender against a local receiver that checks signatures as docs/channels.md says:
a signed JSON body in schema inno-notify.message/v1, a tampered one refused, failures classified."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest

from inno_notify.adapters.channels.base import ChannelError, MailMessage, Recipient, WebhookMessage, WebLink
from inno_notify.adapters.channels.webhook import SCHEMA, WebhookSender, body, signature
from tests.adapters.channels import fake_webhook
from tests.adapters.channels.fake_webhook import FakeReceiver, verify

SECRET = "s3cret-webhook-key-0123456789abcdef"
ALICE = Recipient(email="alice@example.com")
MESSAGE = WebhookMessage(
    kind="job_summary",
    title="[inno-notify] face/train-1 succeeded",
    text="face/train-1 — succeeded",
    links=(WebLink("page", "Dashboard", "https://inno.example.org/jobs/face/train-1"),),
    data={"job": {"name": "train-1", "namespace": "face"}, "title": "not the envelope's"},
    key="0123456789abcdef0123456789abcdef",
    recipient="alice@example.com",
)


@pytest.fixture
async def receiver() -> AsyncIterator[tuple[FakeReceiver, str]]:
    fake = FakeReceiver(SECRET)
    async with fake_webhook.serving(fake) as url:
        yield fake, url


@pytest.fixture
async def sender(receiver: tuple[FakeReceiver, str]) -> AsyncIterator[WebhookSender]:
    webhook = WebhookSender(receiver[1], SECRET)
    yield webhook
    await webhook.aclose()


async def test_posts_the_message_signed_in_the_versioned_schema(
    receiver: tuple[FakeReceiver, str], sender: WebhookSender
) -> None:
    fake, _ = receiver

    assert await sender.send(ALICE, MESSAGE) == MESSAGE.key

    [got] = fake.accepted
    assert got.headers["Content-Type"] == "application/json"
    assert got.headers["X-Inno-Notify-Key"] == MESSAGE.key
    assert got.json == {
        "schema": SCHEMA,
        "kind": "job_summary",
        "key": MESSAGE.key,
        "recipient": "alice@example.com",
        # A view named like an envelope field does not replace it.
        "title": "[inno-notify] face/train-1 succeeded",
        "text": "face/train-1 — succeeded",
        "links": [{"rel": "page", "title": "Dashboard", "url": "https://inno.example.org/jobs/face/train-1"}],
        "job": {"name": "train-1", "namespace": "face"},
    }
    assert fake.refused == []


async def test_a_tampered_body_a_wrong_secret_or_an_old_timestamp_fail_verification(
    receiver: tuple[FakeReceiver, str], sender: WebhookSender
) -> None:
    fake, _ = receiver
    await sender.send(ALICE, MESSAGE)
    [got] = fake.accepted
    header, now = got.headers["X-Inno-Notify-Signature"], time.time()
    assert verify(SECRET, header, got.body, now)

    tampered = got.body.replace(b"train-1", b"train-2")
    assert tampered != got.body
    assert not verify(SECRET, header, tampered, now)
    assert not verify("another-secret", header, got.body, now)
    # A request replayed later than the receiver's tolerance.
    assert not verify(SECRET, header, got.body, now + fake_webhook.TOLERANCE_SECONDS + 60)
    assert not verify(SECRET, "v1=" + header.split("v1=")[1], got.body, now)


def test_the_signature_covers_the_timestamp_and_the_body() -> None:
    payload = b'{"schema":"inno-notify.message/v1"}'
    # `printf '1700000000.{payload}' | openssl dgst -sha256 -hmac key -hex`
    assert signature("key", 1_700_000_000, payload) == (
        "t=1700000000,v1=e323de093f89947db3a639ba7fefba59263a0809fe56a943b6eb7fea35d91a8a"
    )


@pytest.mark.parametrize(
    ("status", "headers", "retryable", "retry_after"),
    [
        (429, {"Retry-After": "7"}, True, 7.0),
        (429, {}, True, None),
        (429, {"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}, True, None),
        (500, {}, True, None),
        (502, {}, True, None),
        (503, {"Retry-After": "30"}, True, 30.0),
        (408, {}, True, None),
        (400, {}, False, None),
        (401, {}, False, None),
        (403, {}, False, None),
        (404, {}, False, None),
        (410, {}, False, None),
        (413, {}, False, None),
        (302, {"Location": "https://elsewhere.example.org/"}, False, None),
    ],
)
async def test_classifies_each_answer_and_posts_once(
    receiver: tuple[FakeReceiver, str],
    sender: WebhookSender,
    status: int,
    headers: dict[str, str],
    retryable: bool,
    retry_after: float | None,
) -> None:
    fake, _ = receiver
    fake.scripted.append((status, headers))

    with pytest.raises(Exception) as raised:
        await sender.send(ALICE, MESSAGE)

    error = raised.value
    assert (getattr(error, "retryable", None), getattr(error, "retry_after", "none")) == (
        retryable,
        retry_after,
    )
    assert f"HTTP {status}" in str(error)
    # Only the dispatcher retries: one request, and a redirect is not followed.
    assert len(fake.received) == 1 and fake.accepted == []


async def test_an_unreachable_receiver_is_retryable_and_its_url_and_secret_never_shown() -> None:
    url = "http://127.0.0.1:9/hook?token=receiver-token"
    webhook = WebhookSender(url, SECRET, timeout=5)
    try:
        with pytest.raises(ChannelError) as raised:
            await webhook.send(ALICE, MESSAGE)
    finally:
        await webhook.aclose()
    error = raised.value
    assert error.retryable is True
    assert "receiver-token" not in str(error) and SECRET not in str(error)
    assert "receiver-token" not in repr(webhook)


async def test_a_message_for_another_channel_is_a_programming_error(sender: WebhookSender) -> None:
    with pytest.raises(TypeError):
        await sender.send(ALICE, MailMessage("s", "t", "<p>t</p>"))


def test_needs_an_http_url_and_a_secret() -> None:
    with pytest.raises(ValueError, match="http"):
        WebhookSender("ftp://example.org/hook", SECRET)
    with pytest.raises(ValueError, match="secret"):
        WebhookSender("https://example.org/hook", "")


def test_the_body_has_the_envelope_first_and_no_view_overrides_it() -> None:
    document = body(MESSAGE)
    assert list(document)[:7] == ["schema", "kind", "key", "recipient", "title", "text", "links"]
    assert document["title"] == MESSAGE.title


async def test_check_reaches_the_receiver_without_posting_a_message(
    receiver: tuple[FakeReceiver, str], sender: WebhookSender
) -> None:
    fake, _ = receiver
    assert "answers HTTP 405" in await sender.check()
    assert fake.received == [] and fake.refused == []
