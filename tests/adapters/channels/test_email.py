"""EmailSender against a real SMTP server (aiosmtpd) on loopback: who received what, and failures."""

from __future__ import annotations

import ssl
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.smtp import AuthResult, LoginPassword

from inno_notify.adapters.channels.base import (
    ChannelError,
    InlineImage,
    MailMessage,
    Recipient,
    TelegramMessage,
)
from inno_notify.adapters.channels.email import EmailSender
from tests.adapters.channels import fake_smtp
from tests.adapters.channels.fake_smtp import RecordingHandler

# The AUTH tests run without TLS on purpose (loopback); aiosmtpd warns about that on each connection.
pytestmark = pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS:UserWarning")

# The smallest valid PNG (1×1, transparent); only its bytes travelling intact matter here.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000d49444154789c63000100000500010d0a2db40000000049454e44ae426082"
)
MESSAGE = MailMessage(
    subject="[inno-notify] face/x failed",
    text="face/x failed\n\n--\nTo stop these messages ...\n",
    html='<p>face/x failed</p><img src="cid:chart-1@inno">',
    images=(InlineImage(cid="chart-1@inno", png=PNG),),
)
ALICE = Recipient(email="alice@example.com", name="Alice Example")


def plain_sender(port: int, **kwargs: Any) -> EmailSender:
    return EmailSender("127.0.0.1", "inno-notify@gpu.example.org", port=port, starttls=False, **kwargs)


async def test_sends_multipart_text_html_and_inline_image(smtp_server: tuple[RecordingHandler, int]) -> None:
    handler, port = smtp_server
    message_id = await plain_sender(port, list_unsubscribe="https://notify.example/opt-out").send(
        ALICE, MESSAGE
    )

    [received] = handler.received
    assert received.rcpt_tos == ["alice@example.com"]
    assert received.mail_from == "inno-notify@gpu.example.org"
    mail = received.message
    assert mail["Message-ID"] == message_id and message_id.endswith("@gpu.example.org>")
    assert mail["To"] == "Alice Example <alice@example.com>"
    assert mail["Subject"] == MESSAGE.subject
    assert mail["List-Unsubscribe"] == "<https://notify.example/opt-out>"
    assert mail.get_content_type() == "multipart/alternative"
    text = mail.get_body(preferencelist=("plain",))
    html = mail.get_body(preferencelist=("html",))
    assert text is not None and text.get_content().replace("\r\n", "\n") == MESSAGE.text
    assert html is not None and html.get_content().strip() == MESSAGE.html
    [image] = [part for part in mail.walk() if part.get_content_type() == "image/png"]
    assert image["Content-ID"] == "<chart-1@inno>"
    assert image.get_content() == PNG


async def test_each_recipient_gets_only_their_message(smtp_server: tuple[RecordingHandler, int]) -> None:
    handler, port = smtp_server
    sender = plain_sender(port)
    await sender.send(ALICE, MESSAGE)
    await sender.send(Recipient(email="bob@example.com"), MailMessage("to bob", "hi bob", "<p>hi bob</p>"))

    assert [(r.rcpt_tos, r.message["Subject"]) for r in handler.received] == [
        (["alice@example.com"], MESSAGE.subject),
        (["bob@example.com"], "to bob"),
    ]


@pytest.mark.parametrize(
    ("address", "retryable", "says"),
    [("gone@example.com", False, "550"), ("full@example.com", True, "452")],
    ids=["550-rejected", "452-mailbox-full"],
)
async def test_classifies_a_refused_recipient_by_reply_code(
    smtp_server: tuple[RecordingHandler, int], address: str, retryable: bool, says: str
) -> None:
    handler, port = smtp_server
    with pytest.raises(ChannelError) as caught:
        await plain_sender(port).send(Recipient(email=address), MESSAGE)

    assert caught.value.retryable is retryable
    assert says in str(caught.value)
    assert handler.received == []


async def test_an_unreachable_server_is_retryable() -> None:
    with pytest.raises(ChannelError) as caught:
        await plain_sender(fake_smtp.free_port(), timeout=2.0).send(ALICE, MESSAGE)
    assert caught.value.retryable


# (case, the recipient's e-mail as routing or a directory might hand it over, reason prefix)
NOT_ONE_ADDRESS = [
    ("no address", None, "email: recipient has no e-mail address"),
    ("two addresses", "attacker@evil.example,victim@corp.example", "email: not a single e-mail address"),
    ("two, with a space", "attacker@evil.example, victim@corp.example", "email: not a single e-mail address"),
    ("semicolon list", "a@corp.example;b@corp.example", "email: not a single e-mail address"),
    ("display name", "Victim <victim@corp.example>", "email: not a single e-mail address"),
    ("group", "all: a@corp.example, b@corp.example;", "email: not a single e-mail address"),
    ("empty group", "undisclosed-recipients:;", "email: not a single e-mail address"),
    ("CR LF header injection", "a@corp.example\r\nBcc: victim@corp.example", "email: not a single e-mail"),
    ("bare LF", "a@corp.example\nRCPT TO:<victim@corp.example>", "email: not a single e-mail address"),
    ("NUL", "a@corp.example\x00victim@corp.example", "email: not a single e-mail address"),
    ("comment", "a@corp.example (victim@corp.example)", "email: not a single e-mail address"),
    ("angle brackets", "<a@corp.example>", "email: not a single e-mail address"),
    ("quoted local part", '"a,victim@corp.example"@corp.example', "email: not a single e-mail address"),
    ("domain literal", "a@[127.0.0.1]", "email: not a single e-mail address"),
    ("source route", "victim%evil.example@corp.example", "email: not a single e-mail address"),
    ("two at signs", "a@victim@corp.example", "email: not a single e-mail address"),
    ("no domain dot", "root@localhost", "email: not a single e-mail address"),
    ("non-ASCII", "wörner@corp.example", "email: not a single e-mail address"),
    ("too long", "a" * 250 + "@corp.example", "email: not a single e-mail address"),
]


@pytest.mark.parametrize(
    ("recipient", "reason"), [c[1:] for c in NOT_ONE_ADDRESS], ids=[c[0] for c in NOT_ONE_ADDRESS]
)
async def test_anything_but_one_plain_address_is_refused_before_smtp(
    smtp_server: tuple[RecordingHandler, int], recipient: str | None, reason: str
) -> None:
    handler, port = smtp_server
    with pytest.raises(ChannelError) as caught:
        await plain_sender(port).send(Recipient(email=recipient, name="Victim"), MESSAGE)

    assert not caught.value.retryable
    assert caught.value.message.startswith(reason)
    assert handler.rcpt_commands == [] and handler.received == []


async def test_one_rcpt_only_ever_arrives_whatever_the_headers_hold(
    smtp_server: tuple[RecordingHandler, int],
) -> None:
    """The envelope is given explicitly: a display name that looks like an address list adds no
    recipient, and exactly one RCPT TO reaches the server per message."""
    handler, port = smtp_server
    tricky = Recipient(
        email="alice@example.com", name="victim@corp.example, other@corp.example\r\nBcc: x@y.z"
    )
    await plain_sender(port).send(tricky, MESSAGE)
    await plain_sender(port).send(Recipient(email="bob@example.com"), MESSAGE)

    assert handler.rcpt_commands == ["alice@example.com", "bob@example.com"]
    assert [r.rcpt_tos for r in handler.received] == [["alice@example.com"], ["bob@example.com"]]
    assert "Bcc" not in handler.received[0].message


@pytest.mark.parametrize(
    ("address", "allowed", "sent"),
    [
        ("alice@example.com", ("example.com",), True),
        ("alice@lab.example.com", ("example.com",), True),
        ("alice@example.com", (), True),
        ("mallory@evil.example", ("example.com",), False),
        ("mallory@notexample.com", ("example.com",), False),
    ],
)
async def test_addresses_outside_the_allowed_domains_are_refused(
    smtp_server: tuple[RecordingHandler, int], address: str, allowed: tuple[str, ...], sent: bool
) -> None:
    handler, port = smtp_server
    sender = plain_sender(port, allowed_domains=allowed)
    if sent:
        await sender.send(Recipient(email=address), MESSAGE)
        assert handler.rcpt_commands == [address]
        return
    with pytest.raises(ChannelError) as caught:
        await sender.send(Recipient(email=address), MESSAGE)
    assert not caught.value.retryable
    assert caught.value.message == "email: e-mail domain not allowed (notify.allowed_email_domains)"
    assert handler.rcpt_commands == []


async def test_a_message_for_another_channel_is_a_programming_error() -> None:
    with pytest.raises(TypeError):
        await plain_sender(25).send(ALICE, TelegramMessage("x"))


class Authenticator:
    def __init__(self, login: str, password: str) -> None:
        self.login, self.password = login.encode(), password.encode()

    def __call__(self, server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> AuthResult:
        ok = isinstance(data, LoginPassword) and (data.login, data.password) == (self.login, self.password)
        # handled=False: the server, not us, sends the 235 or 535 reply.
        return AuthResult(success=ok, handled=False)


@pytest.fixture
def auth_smtp() -> Iterator[tuple[RecordingHandler, int]]:
    handler = RecordingHandler()
    controller = fake_smtp.start(
        handler,
        authenticator=Authenticator("notify", "s3cret-pass"),
        auth_require_tls=False,
        auth_required=True,
    )
    yield handler, controller.port
    controller.stop()


async def test_logs_in_when_credentials_are_given(auth_smtp: tuple[RecordingHandler, int]) -> None:
    handler, port = auth_smtp
    await plain_sender(port, username="notify", password="s3cret-pass").send(ALICE, MESSAGE)
    assert [r.rcpt_tos for r in handler.received] == [["alice@example.com"]]


async def test_a_wrong_password_is_permanent_and_never_shown(auth_smtp: tuple[RecordingHandler, int]) -> None:
    handler, port = auth_smtp
    sender = plain_sender(port, username="notify", password="wrong-pass-value")
    with pytest.raises(ChannelError) as caught:
        await sender.send(ALICE, MESSAGE)

    assert not caught.value.retryable and "authentication failed" in str(caught.value)
    for text in (str(caught.value), repr(caught.value), repr(sender)):
        assert "wrong-pass-value" not in text
    assert handler.received == []


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1, made by the openssl command."""
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def server_context(certificate: tuple[Path, Path]) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(str(certificate[0]), str(certificate[1]))
    return context


@pytest.mark.parametrize("mode", ["starttls", "tls"])
async def test_sends_over_starttls_and_implicit_tls(certificate: tuple[Path, Path], mode: str) -> None:
    handler = RecordingHandler()
    context = server_context(certificate)
    if mode == "starttls":
        controller = fake_smtp.start(handler, tls_context=context, require_starttls=True)
    else:
        controller = fake_smtp.start(handler, ssl_context=context)
    try:
        sender = EmailSender(
            "127.0.0.1",
            "inno-notify@gpu.example.org",
            port=controller.port,
            starttls=mode == "starttls",
            tls=mode == "tls",
            cert_bundle=str(certificate[0]),
        )
        await sender.send(ALICE, MESSAGE)
        assert await sender.check() == f"127.0.0.1:{controller.port}"
    finally:
        controller.stop()

    assert [r.rcpt_tos for r in handler.received] == [["alice@example.com"]]


async def test_an_untrusted_certificate_is_refused(certificate: tuple[Path, Path]) -> None:
    handler = RecordingHandler()
    controller = fake_smtp.start(handler, tls_context=server_context(certificate), require_starttls=True)
    try:
        sender = EmailSender("127.0.0.1", "inno-notify@gpu.example.org", port=controller.port, timeout=5.0)
        with pytest.raises(ChannelError):
            await sender.send(ALICE, MESSAGE)
    finally:
        controller.stop()
    assert handler.received == []


@pytest.mark.parametrize(
    ("key", "stable"),
    [("0123456789abcdef0123456789abcdef", True), (None, False), ("<bad>@x", False), ("abc", False)],
)
def test_a_message_key_makes_the_message_id(key: str | None, stable: bool) -> None:
    mail = plain_sender(25).build(ALICE, replace(MESSAGE, key=key))
    fixed = f"<inno-notify.{key}@gpu.example.org>"
    assert (mail["Message-ID"] == fixed) is stable
    assert mail["Message-ID"].endswith("@gpu.example.org>")
