"""The composer's rules: which rows need job records, the message key, rows no attempt can render."""

from __future__ import annotations

import html
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from inno_notify.adapters.channels.base import MailMessage, SlackMessage, TelegramMessage
from inno_notify.adapters.channels.render import Renderer
from inno_notify.adapters.db import Store
from inno_notify.adapters.db.outbox_repository import Claim
from inno_notify.domain.live import findings_to_payload
from inno_notify.domain.messages import MESSAGE_KEY, PipelineMessage, encode_pipeline, encode_serving
from inno_notify.domain.model import Channel, Notification, NotificationKind
from inno_notify.domain.page_links import PageLinks
from inno_notify.service.message_composer import (
    COMPOSED_KINDS,
    MessageComposer,
    MessageParts,
    UnusableRow,
    message_key,
    needs_job_records,
)
from tests.adapters.channels.test_message_render import notice
from tests.adapters.channels.test_nudge_render import finding

NOW = datetime(2026, 12, 3, 12, tzinfo=UTC)


def row(kind: NotificationKind, id: int = 1, payload: dict[str, object] | None = None) -> Notification:
    return Notification(
        dedup_key=f"k{id}",
        kind=kind,
        channel=Channel.EMAIL,
        recipient="alice@example.com",
        due_at=NOW,
        created_at=NOW,
        payload=payload or {},
        id=id,
    )


@pytest.mark.parametrize(
    ("kind", "needs_records"),
    [
        (NotificationKind.JOB_SUMMARY, True),
        (NotificationKind.DIGEST, False),
        (NotificationKind.WORKFLOW_SUMMARY, False),
        (NotificationKind.MODEL_SERVING, False),
        (NotificationKind.PIPELINE_EVENT, False),
        (NotificationKind.BOT_REPLY, False),
        (NotificationKind.IDLE_NUDGE, False),
    ],
)
def test_only_summaries_are_rendered_from_job_records(kind: NotificationKind, needs_records: bool) -> None:
    assert needs_job_records(row(kind)) is needs_records
    assert kind.value in COMPOSED_KINDS


def test_a_message_key_depends_on_its_rows_not_their_order() -> None:
    rows = [row(NotificationKind.JOB_SUMMARY, id) for id in (3, 1, 2)]
    assert message_key(rows) == message_key(list(reversed(rows)))
    assert message_key(rows) != message_key(rows[:2])


@pytest.mark.parametrize(
    "kind",
    [NotificationKind.DIGEST, NotificationKind.WORKFLOW_SUMMARY, NotificationKind.MODEL_SERVING],
)
async def test_a_row_whose_payload_lacks_what_its_message_needs_is_unusable(
    kind: NotificationKind, store: Store
) -> None:
    composer = MessageComposer(store, Renderer(), clock=lambda: NOW)
    claim = Claim(token="t", term=None, lease_until=NOW)
    with pytest.raises(UnusableRow, match=kind.value):
        await composer.for_round(claim).compose([row(kind, payload={"nonsense": "\x00"})])


@pytest.mark.parametrize(("channel", "stamped"), [(Channel.EMAIL, True), (Channel.SLACK, False)])
async def test_an_e_mail_carries_its_recipient_s_unsubscribe_link(
    channel: Channel, stamped: bool, store: Store
) -> None:
    links = PageLinks("https://inno.example.org", b"k" * 32)
    composer = MessageComposer(
        store, Renderer(), MessageParts(unsubscribe=links.unsubscribe), clock=lambda: NOW
    )
    claim = Claim(token="t", term=None, lease_until=NOW)
    payload: dict[str, object] = {MESSAGE_KEY: encode_pipeline(PipelineMessage(key="k", title="done"))}
    message = await composer.for_round(claim).compose(
        [replace(row(NotificationKind.PIPELINE_EVENT, payload=payload), channel=channel)]
    )
    expected = links.unsubscribe("alice@example.com", NOW)
    assert (isinstance(message, MailMessage) and message.unsubscribe_url == expected) is stamped


@pytest.mark.parametrize("channel", [Channel.EMAIL, Channel.SLACK, Channel.TELEGRAM])
@pytest.mark.parametrize(
    "kind", [NotificationKind.PIPELINE_EVENT, NotificationKind.IDLE_NUDGE, NotificationKind.MODEL_SERVING]
)
async def test_every_message_to_a_person_ends_with_the_link_to_their_page(
    channel: Channel, kind: NotificationKind, store: Store
) -> None:
    """One footer line, made in one place (Renderer.with_personal_page), whatever the message."""
    links = PageLinks("https://inno.example.org", b"k" * 32)
    composer = MessageComposer(store, Renderer(), MessageParts(personal_page=links.me), clock=lambda: NOW)
    claim = Claim(token="t", term=None, lease_until=NOW)
    payloads: dict[NotificationKind, dict[str, object]] = {
        NotificationKind.PIPELINE_EVENT: {
            MESSAGE_KEY: encode_pipeline(PipelineMessage(key="k", title="done"))
        },
        NotificationKind.IDLE_NUDGE: findings_to_payload([finding()]),
        NotificationKind.MODEL_SERVING: {MESSAGE_KEY: encode_serving(notice())},
    }
    given = replace(row(kind, payload=payloads[kind]), channel=channel)
    message = await composer.for_round(claim).compose([given])
    url = links.me("alice@example.com", NOW)
    assert url is not None and "/me?email=alice%40example.com&exp=" in url
    if isinstance(message, MailMessage):
        assert message.text.rstrip().endswith(url)
        assert message.html.count(html.escape(url)) == 1
        assert message.html.rstrip().endswith("</body></html>")
    elif isinstance(message, SlackMessage):
        assert message.blocks[-1]["type"] == "context"
        assert url.replace("&", "&amp;") in message.blocks[-1]["elements"][0]["text"]
    else:
        assert isinstance(message, TelegramMessage)
        assert message.html.endswith(f'<a href="{html.escape(url)}">Your runs and notification settings</a>')
    # A team's channel (no address) gets no such line.
    team = await composer.for_round(claim).compose([replace(given, recipient="#face-team")])
    assert url not in str(team)
