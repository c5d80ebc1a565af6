"""The self-service parts of rendering: the "Get these on Telegram" line in e-mail and Slack summaries,
and the bot's answers (every value a person wrote escaped)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from inno_notify.adapters.channels.base import MailMessage, MattermostMessage, SlackMessage, TelegramMessage
from inno_notify.adapters.channels.render import Renderer
from inno_notify.adapters.channels.views import SummaryView
from inno_notify.domain.bot_replies import Reply, ReplyKind, RunningJob, StatusFigures, encode_reply
from inno_notify.domain.messages import encode_workflow
from inno_notify.domain.model import Channel, NotificationKind
from inno_notify.domain.telegram_linking import LinkRefusal
from tests.adapters.channels.conftest import sample_job, sample_usage
from tests.adapters.channels.test_message_render import workflow
from tests.adapters.channels.test_render import Parsed

LINK = "https://t.me/inno_notify_bot?start=AQID-_abc"
LINE = f"Get these on Telegram: {LINK}"
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
# One renderer for the module, as the service shares one: building it compiles every template.
RENDERER = Renderer()


def _view(uid: str = "u1") -> SummaryView:
    return SummaryView.from_records(sample_job(uid=uid), sample_usage(), [])


def _messages(renderer: Renderer, channel: Channel, link: str | None) -> list[object]:
    return [
        renderer.render_summary(channel, _view(), telegram_link=link),
        renderer.render_group(channel, [_view("u1"), _view("u2")], telegram_link=link),
        renderer.render_payload(
            channel,
            NotificationKind.WORKFLOW_SUMMARY,
            {"message": encode_workflow(workflow())},
            telegram_link=link,
        ),
    ]


def test_e_mail_summaries_carry_the_line_in_both_parts_only_when_given() -> None:
    renderer = RENDERER
    for message in _messages(renderer, Channel.EMAIL, LINK):
        assert isinstance(message, MailMessage)
        assert f"\n\n{LINE}\n\n" in message.text
        assert f'Get these on Telegram: <a href="{LINK}">{LINK}</a>' in message.html
    for message in _messages(renderer, Channel.EMAIL, None):
        assert isinstance(message, MailMessage)
        assert "Telegram" not in message.text and "t.me" not in message.html
        assert "\n\n\n" not in message.text


def test_slack_summaries_carry_the_line_as_their_last_paragraph() -> None:
    renderer = RENDERER
    for message in _messages(renderer, Channel.SLACK, LINK):
        assert isinstance(message, SlackMessage)
        last = message.blocks[-1]["text"]["text"].split("\n\n")[-1]
        # The link itself is as minted; its label shows the same address (Slack's formatting
        # characters in it kept inert by zero-width spaces, as every label).
        assert last.startswith(f"Get these on Telegram: <{LINK}|https://t.me/inno")
    for message in _messages(renderer, Channel.SLACK, None):
        assert isinstance(message, SlackMessage)
        assert all("t.me" not in str(block) for block in message.blocks)


def test_telegram_summaries_never_show_the_line() -> None:
    for message in _messages(RENDERER, Channel.TELEGRAM, LINK):
        assert isinstance(message, TelegramMessage) and "t.me" not in message.html


HOSTILE = ["<b>", "</code>", "&amp;", "<a href='https://evil.example'>x</a>", "{{ 7*7 }}", "\x00", "Ω" * 64]


@pytest.mark.parametrize("kind", list(ReplyKind))
@pytest.mark.parametrize("name", HOSTILE)
def test_every_answer_escapes_what_a_person_wrote(kind: ReplyKind, name: str) -> None:
    status = StatusFigures(
        week_start=NOW - timedelta(days=2),
        taken_at=NOW,
        running=(RunningJob("ns", name, NOW - timedelta(minutes=5), 1.0),),
        running_total=1,
    )
    reply = Reply(
        kind,
        first_name=name,
        person=name,
        refusal=LinkRefusal.FORGED,
        until=NOW,
        unknown=f"/{name}",
        channels=("email",),
        status=status,
    )
    message = RENDERER.render_payload(
        Channel.TELEGRAM, NotificationKind.BOT_REPLY, {"message": encode_reply(reply)}
    )
    assert isinstance(message, TelegramMessage)
    parsed = Parsed(message.html)
    assert {tag for _, tag, _ in parsed.tags} <= {"b", "code"}, message.html
    assert "49" not in message.html


SLACK_HOSTILE = [
    "<!channel>",
    "<@U0BOSS>",
    "*bold* _it_ `code`",
    "@here",
    "<https://evil.example|x>",
    "{{ 7*7 }}",
]


@pytest.mark.parametrize("kind", list(ReplyKind))
@pytest.mark.parametrize("name", SLACK_HOSTILE)
def test_every_slack_answer_escapes_what_a_person_or_the_cluster_wrote(kind: ReplyKind, name: str) -> None:
    status = StatusFigures(
        week_start=NOW - timedelta(days=2),
        taken_at=NOW,
        running=(RunningJob("ns", name, NOW - timedelta(minutes=5), 1.0),),
        running_total=1,
    )
    reply = Reply(kind, person=name, until=NOW, unknown=name, channels=("email",), status=status)
    message = RENDERER.render_payload(
        Channel.SLACK, NotificationKind.BOT_REPLY, {"message": encode_reply(reply)}
    )
    assert isinstance(message, SlackMessage) and message.blocks
    text = "\n".join(block["text"]["text"] for block in message.blocks if block["type"] == "section")
    assert "<!channel>" not in text and "<@U0BOSS>" not in text and "<https://evil" not in text
    assert "@here" not in text and "49" not in text
    assert all(block["text"].get("verbatim") for block in message.blocks if block["type"] == "section")


MATTERMOST_HOSTILE = ["@channel", "@here", "[x](https://evil.example)", "**bold** `code`", "{{ 7*7 }}"]


@pytest.mark.parametrize("kind", list(ReplyKind))
@pytest.mark.parametrize("name", MATTERMOST_HOSTILE)
def test_every_mattermost_answer_escapes_what_a_person_or_the_cluster_wrote(
    kind: ReplyKind, name: str
) -> None:
    status = StatusFigures(
        week_start=NOW - timedelta(days=2),
        taken_at=NOW,
        running=(RunningJob("ns", name, NOW - timedelta(minutes=5), 1.0),),
        running_total=1,
    )
    reply = Reply(kind, person=name, until=NOW, unknown=name, channels=("email",), status=status)
    message = RENDERER.render_reply(reply, Channel.MATTERMOST)
    assert isinstance(message, MattermostMessage) and message.markdown
    text = message.markdown
    assert "@channel" not in text and "@here" not in text and "](https://evil" not in text
    assert "**bold**" not in text and "49" not in text
    # Mattermost's answers are Slack's, saying Mattermost where Slack's say Slack.
    assert "Slack" not in text


def test_a_bot_reply_renders_for_telegram_slack_and_mattermost_only() -> None:
    with pytest.raises(ValueError, match="telegram, slack, mattermost only"):
        RENDERER.render_payload(
            Channel.EMAIL, NotificationKind.BOT_REPLY, {"message": encode_reply(Reply(ReplyKind.HELP))}
        )
