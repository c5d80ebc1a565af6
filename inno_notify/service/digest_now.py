"""`inno-notify digest --send`: one team's digest planned now and delivered before the command ends.

The rows are the scheduler's (`plan_digest`, the same dedup keys), so a digest sent by hand is not
sent again by the schedule, and a second `--send` of the same week sends nothing new. The command
does not wait for the service's dispatcher: it runs dispatch rounds itself until no row is pending
or the wait is over, then reports each row's state.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection
from datetime import datetime

from inno_notify.adapters.db import Store
from inno_notify.service.digest import plan_digest
from inno_notify.service.dispatcher import Dispatcher

WAIT_SECONDS = 60.0
POLL_SECONDS = 0.5


async def send_digest_now(
    store: Store,
    dispatcher: Dispatcher,
    team_name: str,
    week: str,
    tz: str,
    channels: Collection[str],
    clock: Callable[[], datetime],
    *,
    wait_seconds: float = WAIT_SECONDS,
) -> dict[str, str]:
    """The delivery state of each of the team's digest rows for `week` by dedup key; {} when the
    team has nobody to send to (no leads or no configured digest channel)."""
    directory = await store.directory.snapshot()
    team = directory.teams[team_name]
    now = clock()
    rows = plan_digest(
        team,
        week,
        tz,
        due_at=now,
        now=now,
        directory=directory,
        channels=frozenset(channels),
    )
    if not rows:
        return {}
    await store.outbox.enqueue(rows)
    keys = sorted({row.dedup_key for row in rows})
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_seconds
    while loop.time() < deadline:
        await dispatcher.run_once(clock())
        states = await store.outbox.delivery_statuses(keys)
        if all(state != "pending" for state in states.values()):
            break
        await asyncio.sleep(POLL_SECONDS)
    return await store.outbox.delivery_statuses(keys)
