"""Kill the dispatcher (SIGKILL) at random moments while 1,000 summaries are due: none lost, and at
most one duplicate per kill (a worker sends one message at a time, so only that one can be
accepted by the server and not yet recorded when it dies).

The worker is a real process against the Postgres test database; the fake Bot API runs here and
counts deliveries per chat (each summary goes to a chat of its own).
"""

from __future__ import annotations

import asyncio
import random
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest

from inno_notify.adapters.db import Store
from inno_notify.domain.model import DeliveryStatus, DirectoryUser
from inno_notify.domain.routing import Directory, plan_summary
from tests import stored
from tests.adapters.channels import fake_telegram
from tests.adapters.channels.fake_telegram import FakeTelegram
from tests.db_support import truncate_all
from tests.waiting import eventually

from .crash_worker import TOKEN
from .support import all_rows, finished_job

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.serial]

SUMMARIES = 1000
KILLS = 10
REPO = Path(__file__).resolve().parents[2]


async def _sending(fake: FakeTelegram, calls_before: int, worker: asyncio.subprocess.Process) -> None:
    """Returns once the worker has made a call of its own (or died, which the caller reports)."""
    # Two sources change this (a server handler, a process exit): polling beats wiring events.
    await eventually(
        lambda: len(fake.calls) > calls_before or worker.returncode is not None,
        within=30,
        what="the worker's first call",
    )


async def _start(url: str, api_url: str, log: Path) -> asyncio.subprocess.Process:
    with log.open("ab") as err:
        return await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.service.crash_worker",
            url,
            api_url,
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )


async def test_sigkill_loses_nothing_and_duplicates_at_most_one_per_kill(
    postgres_session_database: str, tmp_path: Path
) -> None:
    url = postgres_session_database
    await truncate_all(url)
    chats = {10_000 + i for i in range(SUMMARIES)}
    users = {
        f"u{i}@example.com": DirectoryUser(
            f"u{i}@example.com", telegram_chat_id=10_000 + i, channels=("telegram",)
        )
        for i in range(SUMMARIES)
    }
    jobs = [finished_job(f"c{i:04d}", owner=f"u{i}@example.com") for i in range(SUMMARIES)]
    store = Store.from_url(url)
    try:
        await stored.upsert_jobs(store, jobs)
        # The worker reads the real clock: the summaries are due now.
        now = datetime.now(UTC)
        rows = [
            n
            for job in jobs
            for n in plan_summary(job, Directory(users, {}), frozenset({"telegram"}), now, 0.0).notifications
        ]
        assert await store.outbox.enqueue(rows) == SUMMARIES

        fake = FakeTelegram(token=TOKEN, chats=chats)
        server = await fake_telegram.start(fake)
        api_url = str(server.make_url("")).rstrip("/")
        seed = random.randrange(1 << 30)
        rng = random.Random(seed)
        log = tmp_path / "worker.log"
        try:
            started = time.monotonic()
            for _ in range(KILLS):
                before = len(fake.calls)
                worker = await _start(url, api_url, log)
                # Kill while it is sending: after its first call, at a random moment.
                await _sending(fake, before, worker)
                assert worker.returncode is None, log.read_text()
                # A random moment, so that kills land in every phase of a send; nothing below
                # relies on its length.
                await asyncio.sleep(rng.uniform(0.0, 0.08))
                worker.kill()
                await worker.wait()
                assert len(set(int(c.params["chat_id"]) for c in fake.calls)) < SUMMARIES, (
                    "drained before the kills"
                )

            killed_at = time.monotonic()
            sent_before_drain = len(fake.calls)
            worker = await _start(url, api_url, log)

            async def drained() -> bool:
                pending, _ = await store.outbox.list_notifications(DeliveryStatus.PENDING, limit=1)
                return not pending

            try:
                await eventually(drained, within=60, what=f"nothing pending at the end (seed {seed})")
            finally:
                worker.kill()
                await worker.wait()
        finally:
            await server.close()

        deliveries = Counter(int(c.params["chat_id"]) for c in fake.calls if c.method == "sendMessage")
        duplicates = sum(count - 1 for count in deliveries.values())
        print(
            f"seed={seed} kills={KILLS} deliveries={sum(deliveries.values())} duplicates={duplicates} "
            f"kill_phase_s={killed_at - started:.1f} drain_s={time.monotonic() - killed_at:.1f} "
            f"sent_before_drain={sent_before_drain}"
        )
        assert set(deliveries) == chats, f"lost: {sorted(chats - set(deliveries))[:10]} (seed {seed})"
        assert duplicates <= KILLS, f"seed {seed}"
        rows = await all_rows(store)
        assert len(rows) == SUMMARIES
        assert {r.status for r in rows} == {DeliveryStatus.SENT}
    finally:
        await store.close()
