"""The footer line of every message to a person (Renderer.with_personal_page): within each channel's
limits, escaped for each channel's markup, at the end of the message."""

from __future__ import annotations

import html

from inno_notify.adapters.channels.base import (
    SLACK_MAX_BLOCKS,
    TELEGRAM_MAX_CHARS,
    MailMessage,
    SlackMessage,
    TelegramMessage,
)
from inno_notify.adapters.channels.render import Renderer

URL = "https://inno.example.org/me?email=a%40example.org&exp=1&sig=abc"


def test_a_telegram_message_at_its_limit_keeps_the_footer_within_it() -> None:
    long = TelegramMessage("<b>" + "x" * (TELEGRAM_MAX_CHARS - 7) + "</b>")
    stamped = Renderer().with_personal_page(long, URL)
    assert isinstance(stamped, TelegramMessage) and len(stamped.html) <= TELEGRAM_MAX_CHARS
    assert stamped.html.endswith(f'<a href="{html.escape(URL)}">Your runs and notification settings</a>')


def test_slack_keeps_within_its_block_limit() -> None:
    full = SlackMessage("t", tuple({"type": "divider"} for _ in range(SLACK_MAX_BLOCKS)))
    stamped = Renderer().with_personal_page(full, URL)
    assert isinstance(stamped, SlackMessage) and len(stamped.blocks) == SLACK_MAX_BLOCKS
    assert stamped.blocks[-1]["type"] == "context"
    assert "&amp;exp=1&amp;sig=abc|Your runs" in stamped.blocks[-1]["elements"][0]["text"]


def test_an_e_mail_gets_it_in_both_parts_before_the_body_ends() -> None:
    mail = MailMessage("s", "text\n", "<html><body><p>hi</p></body></html>")
    stamped = Renderer().with_personal_page(mail, URL)
    assert isinstance(stamped, MailMessage)
    assert stamped.text.endswith(f"{URL}\n") and stamped.text.startswith("text\n\n")
    assert stamped.html.endswith("</body></html>") and html.escape(URL) in stamped.html
