"""A dispatcher process for the crash test: sends due Telegram summaries from a database until killed.

Run as `python -m tests.service.crash_worker DATABASE_URL TELEGRAM_API_URL`. One send at a time
(concurrency 1), so at most one message can be accepted by the server and not yet recorded when
the process is killed; short leases so that a killed worker's claimed rows come back quickly, and
a send timeout shorter than the lease, so that no send outlives its claim.
"""

from __future__ import annotations

import asyncio
import sys
from datetime import UTC, datetime

from inno_notify.adapters.channels.render import Renderer
from inno_notify.adapters.channels.telegram import TelegramSender
from inno_notify.adapters.db import Store
from inno_notify.service.dispatcher import Dispatcher, DispatchOptions
from inno_notify.service.ratelimit import UNLIMITED

TOKEN = "123456:AAE-crash-test-token"
LEASE_SECONDS = 1.5
# A send must end while its lease holds; the local fake answers in milliseconds.
SEND_TIMEOUT_SECONDS = 0.5


def now() -> datetime:
    return datetime.now(UTC)


async def main(database_url: str, api_url: str) -> None:
    store = Store.from_url(database_url)
    sender = TelegramSender(TOKEN, api_url, timeout=5.0)
    dispatcher = Dispatcher(
        store,
        {"telegram": sender},
        Renderer(),
        DispatchOptions(
            group_wait_seconds=0.0,
            batch_size=20,
            lease_seconds=LEASE_SECONDS,
            send_timeout_seconds=SEND_TIMEOUT_SECONDS,
            concurrency=1,
            poll_seconds=0.05,
            limits=UNLIMITED,
        ),
        clock=now,
    )
    await dispatcher.run(asyncio.Event())


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
