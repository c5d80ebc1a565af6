"""The List-Unsubscribe headers of an e-mail (RFC 2369, RFC 8058), as a real SMTP server (aiosmtpd on
loopback) receives them: the recipient's one-click link with the operator's mailto beside it,
`List-Unsubscribe-Post` only for an https link, each header on one line (never folded into encoded
words a mail provider cannot read as a URI), and nothing an address or a URL could inject."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from inno_notify.adapters.channels.base import MailMessage, Recipient
from inno_notify.adapters.channels.email import EmailSender
from inno_notify.domain.page_links import PageLinks
from tests.adapters.channels.fake_smtp import RecordingHandler

NOW = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
LINKS = PageLinks("https://inno-notify.research.example.org", b"k" * 32)
ALICE = "alice.with-a-long-local-part@research.example.org"
ONE_CLICK = LINKS.unsubscribe(ALICE, NOW)
PLAIN_HTTP = PageLinks("http://inno-notify.local", b"k" * 32).unsubscribe(ALICE, NOW)
MAILTO = "mailto:gpu-admins@research.example.org?subject=unsubscribe"
OPERATOR_URL = "https://intranet.example.org/opt-out"
POST = "List-Unsubscribe=One-Click"


def sender(port: int, configured: str | None) -> EmailSender:
    return EmailSender(
        "127.0.0.1",
        "inno-notify@research.example.org",
        port=port,
        starttls=False,
        list_unsubscribe=configured,
    )


def header_lines(raw: bytes) -> dict[str, str]:
    """The top-level header lines as sent, unfolded only where the sender folded them."""
    head = raw.split(b"\r\n\r\n", 1)[0].decode("ascii")
    return dict(line.split(": ", 1) for line in re.split(r"\r\n(?![ \t])", head))


@pytest.mark.parametrize(
    ("link", "configured", "unsubscribe", "post"),
    [
        (ONE_CLICK, MAILTO, f"<{ONE_CLICK}>, <{MAILTO}>", POST),
        (ONE_CLICK, None, f"<{ONE_CLICK}>", POST),
        # The operator's URL is no one-click target: beside the link it is left out.
        (ONE_CLICK, OPERATOR_URL, f"<{ONE_CLICK}>", POST),
        # Without a link (no links.public_url or secret_file), the operator's address alone, no POST.
        (None, MAILTO, f"<{MAILTO}>", None),
        (None, OPERATOR_URL, f"<{OPERATOR_URL}>", None),
        (None, None, None, None),
        # RFC 8058 one-click needs HTTPS: a plain http link is named, but no POST is offered.
        (PLAIN_HTTP, MAILTO, f"<{PLAIN_HTTP}>, <{MAILTO}>", None),
        # A link that could end the header or split the list is left out, never sent.
        ("https://x.example/u\r\nBcc: eve@evil.example", MAILTO, f"<{MAILTO}>", None),
        ("https://x.example/u>, <https://evil.example/", None, None, None),
        ("javascript:alert(1)", None, None, None),
    ],
    ids=[
        "link-and-mailto",
        "link-alone",
        "operator-url-left-out",
        "mailto-alone",
        "operator-url-alone",
        "none",
        "http-no-post",
        "crlf-link",
        "bracket-link",
        "not-a-web-link",
    ],
)
async def test_the_unsubscribe_headers_as_received(
    smtp_server: tuple[RecordingHandler, int],
    link: str | None,
    configured: str | None,
    unsubscribe: str | None,
    post: str | None,
) -> None:
    handler, port = smtp_server
    message = MailMessage("subject", "text", "<p>html</p>", unsubscribe_url=link)
    await sender(port, configured).send(Recipient(email=ALICE), message)

    [received] = handler.received
    assert received.message["List-Unsubscribe"] == unsubscribe
    assert received.message["List-Unsubscribe-Post"] == post
    assert received.message["Bcc"] is None and received.rcpt_tos == [ALICE]
    lines = header_lines(received.raw)
    # Each header went out whole, on one line: no folding, no encoded words.
    assert lines.get("List-Unsubscribe") == unsubscribe
    assert lines.get("List-Unsubscribe-Post") == post
    assert unsubscribe is None or len(f"List-Unsubscribe: {unsubscribe}") <= 998


async def test_a_hostile_address_in_the_link_is_percent_encoded(
    smtp_server: tuple[RecordingHandler, int],
) -> None:
    """Routing sends e-mail to plain addresses only, but the link is safe whatever it is given."""
    handler, port = smtp_server
    hostile = 'x"\r\nBcc: eve@evil.example, <a>@example.org'
    link = LINKS.unsubscribe(hostile, NOW)
    assert link is not None
    await sender(port, MAILTO).send(
        Recipient(email=ALICE), MailMessage("subject", "text", "<p>html</p>", unsubscribe_url=link)
    )

    [received] = handler.received
    assert received.message["List-Unsubscribe"] == f"<{link}>, <{MAILTO}>"
    assert "x%22%0D%0ABcc%3A%20eve%40evil.example%2C%20%3Ca%3E%40example.org" in link
    assert received.message["Bcc"] is None and received.rcpt_tos == [ALICE]
    assert received.message["List-Unsubscribe-Post"] == POST
