"""Routing to the channel through the database: each channel's sender gets the Recipient built from
the typed address routing planned the row with (issue 31), on both databases, and the row keeps
its dedup key."""

from __future__ import annotations

from datetime import timedelta

import pytest

from inno_notify.adapters.channels.base import Recipient, RenderedMessage
from inno_notify.adapters.db import Store
from inno_notify.domain.bot_replies import Reply, ReplyKind
from inno_notify.domain.message_json import MESSAGE_KEY
from inno_notify.domain.messages import PipelineMessage, encode_pipeline
from inno_notify.domain.model import Channel, DeliveryStatus, DirectoryUser, RecipientAddress, Team
from inno_notify.domain.routing import Directory, plan_event
from inno_notify.service.telegram_updates import UpdateHandler

from .support import T0, FakeClock, all_rows, dispatcher, finish, finished_job

# A Telegram group's chat id: negative and past 32 bits, as only an integer carries it whole.
GROUP_CHAT = -1001234567890
ALICE = DirectoryUser(
    "alice@example.com",
    "Alice",
    slack_user_id="U0ALICE",
    telegram_chat_id=GROUP_CHAT,
    channels=("telegram", "slack", "email"),
)
USERS = {ALICE.email: ALICE}
NLP = Team("nlp", namespaces=("nlp",), slack_channel="#nlp-gpu")


class RecordingSender:
    """A channel that accepts everything and notes whom each message was for."""

    def __init__(self) -> None:
        self.recipients: list[Recipient] = []

    async def send(self, recipient: Recipient, message: RenderedMessage) -> str:
        self.recipients.append(recipient)
        return f"m{len(self.recipients)}"

    async def aclose(self) -> None:
        return None


@pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")
async def test_each_sender_gets_the_address_routing_planned(store: Store) -> None:
    summaries = await finish(store, [finished_job("a1")], USERS, T0, group_wait_seconds=0)
    pipeline = {MESSAGE_KEY: encode_pipeline(PipelineMessage(key="k1", title="deployed"))}
    team_post = plan_event(
        None, "nlp", "event/k1", pipeline, Directory(USERS, {"nlp": NLP}), frozenset({"slack"}), T0
    )
    reply = UpdateHandler._reply_row("telegram/bot/update/1", GROUP_CHAT, Reply(ReplyKind.HELP), T0)
    assert await store.outbox.enqueue([*team_post.notifications, reply]) == 2
    senders = {channel.value: RecordingSender() for channel in Channel}
    clock = FakeClock()
    assert await dispatcher(store, senders, clock).run_once(T0 + timedelta(seconds=1)) == 5

    alice = Recipient(email=ALICE.email, name="Alice", telegram_chat_id=GROUP_CHAT, slack_user_id="U0ALICE")
    # In any order: the rows of one channel are sent concurrently.
    assert set(senders["telegram"].recipients) == {alice, Recipient(telegram_chat_id=GROUP_CHAT)}
    assert set(senders["slack"].recipients) == {alice, Recipient(slack_channel="#nlp-gpu")}
    assert len(senders["telegram"].recipients) == len(senders["slack"].recipients) == 2
    assert senders["email"].recipients == [alice]
    rows = {row.dedup_key: row for row in await all_rows(store)}
    assert {row.status for row in rows.values()} == {DeliveryStatus.SENT}
    # The addresses read back as planned; the keys are the ones routing made.
    planned = [*summaries, *team_post.notifications, reply]
    assert {row.dedup_key: row.address for row in planned} == {k: row.address for k, row in rows.items()}
    assert rows["telegram/bot/update/1"].address == RecipientAddress(telegram_chat_id=GROUP_CHAT)
