"""Benchmark: the dispatcher from a Postgres outbox to local Bot API and Web API servers.

The fake Telegram and Slack servers of the tests run in a child process (so they do not share the
dispatcher's event loop), behind one aiohttp app; the dispatcher sends with the real
python-telegram-bot and slack-sdk clients and no rate limits. Two phases, on a throwaway database:

- burst: ``--jobs`` summaries (one per person, half Telegram, half Slack) all due at once;
  ``sent_per_s`` is rows settled per second until the outbox is empty.
- steady: ``--steady-jobs`` summaries that become due at ``--steady-rate`` per second while the
  dispatcher runs its normal loop; ``p50/p99_due_to_sent_ms`` is the time from a row's due time
  to the time the dispatcher recorded it sent.

Prints ``name=value`` lines, with ``dispatcher_cpu_ms_per_row`` (CPU of this process per settled
row in the burst, less sensitive than the rates to other load) and the 1-minute load average: on
a shared 2-core machine both rates move with whatever else runs, so report them together.
``--profile FILE`` writes a cProfile of the burst (which it slows several times); for a sampling
profile run the bench under ``py-spy record --nonblocking``. ``--telegram-pool`` sets the httpx
pool of the Telegram sender. ``--fence`` runs the dispatcher as an elected leader would: its
store's fence checks the lease (one more statement in every claim; docs/ha.md).

    .venv/bin/python bench/dispatch.py [--jobs 3000 --concurrency 16 --steady-rate 200]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import multiprocessing
import os
import statistics
import sys
import time
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
from aiohttp import ClientSession, web
from sqlalchemy.engine import make_url

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from inno_notify.adapters.channels.base import Sender
from inno_notify.adapters.channels.render import Renderer
from inno_notify.adapters.channels.slack import SlackSender
from inno_notify.adapters.channels.telegram import DEFAULT_POOL_SIZE, TelegramSender
from inno_notify.adapters.db import Store, migrate
from inno_notify.adapters.db.leases import UNFENCED, Fence, LeaseFence, LeaseRepository
from inno_notify.domain.model import DeliveryStatus, DirectoryUser, JobRecord, JobStatus, Notification
from inno_notify.domain.routing import route_summary
from inno_notify.service.dispatcher import Dispatcher
from inno_notify.service.ratelimit import UNLIMITED
from tests.adapters.channels.fake_slack import FakeSlack
from tests.adapters.channels.fake_smtp import free_port
from tests.adapters.channels.fake_telegram import FakeTelegram

TELEGRAM_TOKEN = "123456:AAE-bench-token"
SLACK_TOKEN = "xoxb-bench-token"
ADMIN_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres"


def users_for(count: int, offset: int) -> dict[str, DirectoryUser]:
    users = {}
    for i in range(offset, offset + count):
        email = f"user{i}@example.com"
        if i % 2:
            users[email] = DirectoryUser(email, slack_user_id=f"U{i:07d}", channels=("slack",))
        else:
            users[email] = DirectoryUser(email, telegram_chat_id=100_000 + i, channels=("telegram",))
    return users


def serve(port: int, people: int) -> None:
    """The child process: both fake APIs and a /stats route."""
    users = users_for(people, 0)
    telegram = FakeTelegram(
        token=TELEGRAM_TOKEN, chats={u.telegram_chat_id for u in users.values() if u.telegram_chat_id}
    )
    slack = FakeSlack(
        token=SLACK_TOKEN, users={u.email: u.slack_user_id for u in users.values() if u.slack_user_id}
    )

    async def stats(request: web.Request) -> web.Response:
        return web.json_response({"telegram": len(telegram.sent()), "slack": len(slack.posted())})

    app = web.Application()
    app.add_subapp("/tg", telegram.app())
    app.add_subapp("/slack", slack.app())
    app.router.add_get("/stats", stats)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)


async def admin(sql: str) -> None:
    url = make_url(ADMIN_URL)
    conn = await asyncpg.connect(user=url.username, host=url.host, port=url.port, database=url.database)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def job(i: int, now: datetime) -> JobRecord:
    return JobRecord(
        cluster="bench",
        uid=f"job-{i:07d}",
        namespace="research",
        name=f"train-{i}",
        status=JobStatus.SUCCEEDED,
        owner=f"user{i}@example.com",
        created_at=now - timedelta(hours=2),
        started_at=now - timedelta(hours=1),
        finished_at=now,
    )


async def seed(store: Store, first: int, count: int, due: list[datetime], now: datetime) -> None:
    users = users_for(count, first)
    jobs = [job(first + i, now) for i in range(count)]
    rows: list[Notification] = []
    for i, record in enumerate(jobs):
        # Only the owner's entry: routing indexes the whole directory per call.
        owner = {record.owner: users[record.owner]} if record.owner else {}
        for row in route_summary(record, owner, {}, frozenset({"telegram", "slack"}), now, 0.0):
            rows.append(replace(row, due_at=due[i], next_attempt_at=due[i]))
    for start in range(0, count, 1000):
        await store.upsert_jobs(jobs[start : start + 1000])
        await store.enqueue(rows[start : start + 1000])


async def pending(store: Store) -> int:
    page, _ = await store.list_notifications(DeliveryStatus.PENDING, limit=1)
    return len(page)


async def sent_rows(store: Store) -> list[Notification]:
    rows: list[Notification] = []
    cursor: str | None = None
    while True:
        page, cursor = await store.list_notifications(DeliveryStatus.SENT, limit=500, cursor=cursor)
        rows.extend(page)
        if cursor is None:
            return rows


async def bench(args: argparse.Namespace) -> None:
    port = free_port()
    people = args.jobs + args.steady_jobs
    server = multiprocessing.get_context("spawn").Process(target=serve, args=(port, people), daemon=True)
    server.start()
    base = f"http://127.0.0.1:{port}"
    async with ClientSession() as http:
        for _ in range(200):
            try:
                async with http.get(f"{base}/stats") as response:
                    if response.status == 200:
                        break
            except OSError:
                await asyncio.sleep(0.05)

    name = f"inno_bench_{uuid.uuid4().hex[:10]}"
    await admin(f'CREATE DATABASE "{name}"')
    url = make_url(ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    await migrate(url)
    leases = LeaseRepository.from_url(url)
    fence: Fence = UNFENCED
    if args.fence:
        lease = await leases.acquire("default", "bench", 3600)
        assert lease is not None
        fence = LeaseFence("default", "bench")
        fence.arm(lease.term)
    store = Store.from_url(url, fence)
    senders: dict[str, Sender] = {
        "telegram": TelegramSender(TELEGRAM_TOKEN, f"{base}/tg", pool_size=args.telegram_pool),
        "slack": SlackSender(SLACK_TOKEN, f"{base}/slack/api/"),
    }
    try:
        dispatcher = Dispatcher(
            store,
            senders,
            Renderer(),
            clock=lambda: datetime.now(UTC),
            group_wait_seconds=0.0,
            batch_size=args.batch,
            concurrency=args.concurrency,
            limits=UNLIMITED,
            poll_seconds=0.2,
        )
        now = datetime.now(UTC)
        await seed(store, 0, args.jobs, [now] * args.jobs, now)

        # Burst: everything due at once, rounds back to back.
        profiler = cProfile.Profile() if args.profile else None
        started, cpu_started = time.perf_counter(), time.process_time()
        settled = 0
        if profiler is not None:
            profiler.enable()
        while True:
            handled = await dispatcher.run_once(datetime.now(UTC))
            if not handled:
                break
            settled += handled
        burst_seconds = time.perf_counter() - started
        burst_cpu = time.process_time() - cpu_started
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(args.profile)
        assert await pending(store) == 0, "burst left rows pending"

        # Steady: rows become due at a fixed rate while the dispatcher runs its loop.
        now = datetime.now(UTC) + timedelta(seconds=1)
        due = [now + timedelta(seconds=i / args.steady_rate) for i in range(args.steady_jobs)]
        await seed(store, args.jobs, args.steady_jobs, due, datetime.now(UTC))
        stop = asyncio.Event()
        loop = asyncio.create_task(dispatcher.run(stop))
        deadline = time.monotonic() + 120
        # The outbox is in another connection's hands: polling it is the only way to see it empty.
        while await pending(store) and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.1)
        stop.set()
        await loop

        rows = [r for r in await sent_rows(store) if r.job_uid and r.job_uid >= f"job-{args.jobs:07d}"]
        latencies = sorted(
            (r.sent_at - r.due_at).total_seconds() * 1000 for r in rows if r.sent_at is not None
        )
        async with ClientSession() as http, http.get(f"{base}/stats") as response:
            delivered = await response.json()
        print(f"fenced={args.fence}")
        print(f"burst_jobs={args.jobs}")
        print(f"concurrency={args.concurrency}")
        print(f"sent_per_s={settled / burst_seconds:.0f}")
        # CPU of this process per settled row: less sensitive than the rate to other load on the machine.
        print(f"dispatcher_cpu_ms_per_row={1000 * burst_cpu / settled:.2f}")
        print(f"load_average_1m={os.getloadavg()[0]:.2f}")
        print(f"steady_rate_per_s={args.steady_rate}")
        print(f"steady_sent={len(latencies)}")
        print(f"p50_due_to_sent_ms={statistics.median(latencies):.1f}")
        print(f"p99_due_to_sent_ms={latencies[max(0, int(len(latencies) * 0.99) - 1)]:.1f}")
        print(f"delivered_telegram={delivered['telegram']}")
        print(f"delivered_slack={delivered['slack']}")
    finally:
        for sender in senders.values():
            await sender.aclose()
        await store.close()
        await leases.close()
        await admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        server.terminate()
        server.join(5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=3000, help="summaries due at once (burst phase)")
    parser.add_argument("--steady-jobs", type=int, default=1000, help="summaries in the steady phase")
    parser.add_argument("--steady-rate", type=float, default=200.0, help="summaries becoming due per second")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--telegram-pool", type=int, default=DEFAULT_POOL_SIZE, help="httpx connections")
    parser.add_argument("--profile", metavar="FILE", help="cProfile the burst phase into FILE (slows it)")
    parser.add_argument(
        "--fence", action="store_true", help="claim as an elected leader (fenced by the lease)"
    )
    asyncio.run(bench(parser.parse_args()))


if __name__ == "__main__":
    main()
