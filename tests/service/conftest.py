"""The channels' fake servers (Bot API, Web API, SMTP) for the service tests, reused from the channel
tests, and the real senders pointed at them (`senders`: one per channel, closed after the test).

The database fixtures come from tests.db_support, which tests/conftest.py registers as a plugin.
"""

from collections.abc import AsyncIterator

import pytest

from inno_notify.adapters.channels.base import Sender
from inno_notify.adapters.channels.email import EmailSender
from inno_notify.adapters.channels.slack import SlackSender
from inno_notify.adapters.channels.telegram import TelegramSender
from tests.adapters.channels.conftest import SLACK_TOKEN, TELEGRAM_TOKEN, slack_api, smtp_server, telegram_api
from tests.adapters.channels.fake_slack import FakeSlack
from tests.adapters.channels.fake_smtp import RecordingHandler
from tests.adapters.channels.fake_telegram import FakeTelegram

__all__ = ["senders", "slack_api", "smtp_server", "telegram_api"]


@pytest.fixture
async def senders(
    telegram_api: tuple[FakeTelegram, str],
    slack_api: tuple[FakeSlack, str],
    smtp_server: tuple[RecordingHandler, int],
) -> AsyncIterator[dict[str, Sender]]:
    built: dict[str, Sender] = {
        "telegram": TelegramSender(TELEGRAM_TOKEN, telegram_api[1], timeout=5.0),
        "slack": SlackSender(SLACK_TOKEN, slack_api[1], timeout=5.0),
        "email": EmailSender("127.0.0.1", "inno@example.com", port=smtp_server[1], starttls=False),
    }
    yield built
    for sender in built.values():
        await sender.aclose()
