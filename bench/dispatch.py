"""Benchmark: the dispatcher from a Postgres outbox to local Bot API and Web API servers.

The fake Telegram and Slack servers of the tests run in a child process (so they do not share the
dispatcher's event loop), behind one aiohttp app; the dispatcher sends with the real
python-telegram-bot and slack-sdk clients and no rate limits. Two phases, on a throwaway database:

- burst: ``--jobs`` summaries (one per person, half Telegram, half Slack) all due at once;
  ``sent_per_s`` is rows settled per second until the outbox is empty.
- bursts with charts: ``--chart-jobs`` summaries (default ``--jobs``), each job with a usage series
  of its own (4 GPUs, 120 points, different values per job, so no two charts are alike), sent by a
  dispatcher with its charts on (``service.job_charts``). Each Telegram summary is then a photo
  upload, each Slack post three more Web API calls and an upload. Twice: as the service runs, the
  charts drawn when the jobs were measured (``JobCharts.draw_ahead``, which the usage service
  calls; its CPU per chart is ``chart_draw_cpu_ms``), then ``sent_per_s_with_charts`` with the
  sends finding them drawn; and with every chart drawn at its send (``sent_per_s_with_charts_drawn_at_send``:
  a replica that just took over, whose cache is empty).
- steady: ``--steady-jobs`` summaries that become due at ``--steady-rate`` per second while the
  dispatcher runs its normal loop; ``p50/p99_due_to_sent_ms`` is the time from a row's due time
  to the time the dispatcher recorded it sent. The loop starts with the steady phase, so it is
  that of a dispatcher past its ramp (``--ramp 0``, the default here); ``--ramp 30`` measures
  a started one, as a new leader's is (service.dispatcher: one message in flight at first).

Prints ``name=value`` lines, with ``dispatcher_cpu_ms_per_row`` (CPU of this process per settled
row in the burst, less sensitive than the rates to other load) and the 1-minute load average: on
a shared 2-core machine both rates move with whatever else runs, so report them together.
``--profile FILE`` writes a cProfile of the burst (which it slows several times; the burst with
charts into FILE.charts, its drawing threads left out); for a sampling
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
import random
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
from inno_notify.domain.model import (
    DeliveryStatus,
    DirectoryUser,
    JobRecord,
    JobStatus,
    Notification,
    SeriesLine,
    SeriesPod,
    Usage,
    UsageSeries,
)
from inno_notify.domain.routing import plan_summary
from inno_notify.service.dispatcher import Dispatcher, DispatchOptions
from inno_notify.service.job_charts import JobCharts
from inno_notify.service.message_composer import MessageParts
from inno_notify.service.ratelimit import UNLIMITED
from tests.adapters.channels.fake_slack import FakeSlack
from tests.adapters.channels.fake_smtp import free_port
from tests.adapters.channels.fake_telegram import FakeTelegram

TELEGRAM_TOKEN = "123456:AAE-bench-token"
SLACK_TOKEN = "xoxb-bench-token"
ADMIN_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres"
# Job numbers of the burst with charts: apart from the others, so its rows are told apart.
CHART_OFFSET = 5_000_000
COLD_OFFSET = 6_000_000


def users_for(count: int, offset: int) -> dict[str, DirectoryUser]:
    users = {}
    for i in range(offset, offset + count):
        email = f"user{i}@example.com"
        if i % 2:
            users[email] = DirectoryUser(email, slack_user_id=f"U{i:07d}", channels=("slack",))
        else:
            users[email] = DirectoryUser(email, telegram_chat_id=100_000 + i, channels=("telegram",))
    return users


def serve(port: int, people: int, charted: int) -> None:
    """The child process: both fake APIs and a /stats route."""
    users = {**users_for(people, 0), **users_for(charted, CHART_OFFSET), **users_for(charted, COLD_OFFSET)}
    telegram = FakeTelegram(
        token=TELEGRAM_TOKEN, chats={u.telegram_chat_id for u in users.values() if u.telegram_chat_id}
    )
    slack = FakeSlack(
        token=SLACK_TOKEN, users={u.email: u.slack_user_id for u in users.values() if u.slack_user_id}
    )
    # files_upload_v2 posts the bytes to the URL the fake hands out: under this app's /slack.
    slack.base_url = f"http://127.0.0.1:{port}/slack"

    async def stats(request: web.Request) -> web.Response:
        return web.json_response(
            {
                "telegram": len(telegram.sent()) + len(telegram.photos()),
                "slack": len(slack.posted()),
                "telegram_photos": len(telegram.photos()),
                "slack_uploads": len(slack.uploads),
            }
        )

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


CLUSTER = "bench"


def job(i: int, now: datetime) -> JobRecord:
    return JobRecord(
        cluster=CLUSTER,
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
        for row in plan_summary(record, owner, {}, frozenset({"telegram", "slack"}), now, 0.0).notifications:
            rows.append(replace(row, due_at=due[i], next_attempt_at=due[i]))
    for start in range(0, count, 1000):
        async with store.jobs.ingest_transaction() as tx:
            await tx.write(CLUSTER, jobs[start : start + 1000], [], [])
        await store.outbox.enqueue(rows[start : start + 1000])


def series_for(i: int, now: datetime) -> UsageSeries:
    """Four GPUs over 120 points, different for every job (its chart is drawn, never cached)."""
    rng = random.Random(i)
    n = 120
    levels = [rng.uniform(0, 100) for _ in range(4)]
    return UsageSeries(
        step_seconds=30,
        start=now - timedelta(hours=1),
        gpu_util=tuple(
            SeriesLine(
                f"node-{i % 50}/{g}",
                f"train-{i}-0",
                tuple(round(max(0.0, lv + rng.gauss(0, 8)), 1) for _ in range(n)),
            )
            for g, lv in enumerate(levels)
        ),
        gpu_memory=tuple(
            SeriesLine(
                f"node-{i % 50}/{g}",
                f"train-{i}-0",
                tuple(float(rng.randrange(1, 80) * 2**30) for _ in range(n)),
            )
            for g in range(4)
        ),
        memory=(
            SeriesLine(
                f"train-{i}-0", f"train-{i}-0", tuple(float(rng.randrange(4, 200) * 2**30) for _ in range(n))
            ),
        ),
        pods=(SeriesPod(f"train-{i}-0", f"node-{i % 50}"),),
    )


async def seed_with_series(
    store: Store, first: int, count: int, now: datetime
) -> list[tuple[JobRecord, UsageSeries]]:
    """Like `seed`, each job stored with its usage and series, as the usage service stores them."""
    users = users_for(count, first)
    jobs = [job(first + i, now) for i in range(count)]
    for start in range(0, count, 1000):
        async with store.jobs.ingest_transaction() as tx:
            await tx.write(CLUSTER, jobs[start : start + 1000], [], [])
    stored = [(record, series_for(first + i, now)) for i, record in enumerate(jobs)]
    usage = Usage(gpu_minutes=240.0, used_gpu_minutes=120.0, gpus_idle=1, gpu_util_mean_percent=50.0)
    for i, record in enumerate(jobs):
        owner = {record.owner: users[record.owner]} if record.owner else {}
        rows = plan_summary(record, owner, {}, frozenset({"telegram", "slack"}), now, 0.0).notifications
        await store.jobs.complete_summary(
            record.cluster, record.uid, usage, [], rows, usage_series=stored[i][1]
        )
    return stored


async def burst(dispatcher: Dispatcher) -> tuple[int, float, float]:
    """Rounds back to back until nothing is left: (rows settled, seconds, CPU seconds of this process)."""
    started, cpu_started = time.perf_counter(), time.process_time()
    settled = 0
    while True:
        handled = await dispatcher.run_once(datetime.now(UTC))
        if not handled:
            break
        settled += handled
    return settled, time.perf_counter() - started, time.process_time() - cpu_started


async def pending(store: Store) -> int:
    page, _ = await store.outbox.list_notifications(DeliveryStatus.PENDING, limit=1)
    return len(page)


async def sent_rows(store: Store) -> list[Notification]:
    rows: list[Notification] = []
    cursor: str | None = None
    while True:
        page, cursor = await store.outbox.list_notifications(DeliveryStatus.SENT, limit=500, cursor=cursor)
        rows.extend(page)
        if cursor is None:
            return rows


async def bench(args: argparse.Namespace) -> None:
    port = free_port()
    people = args.jobs + args.steady_jobs
    chart_jobs = args.chart_jobs if args.chart_jobs is not None else args.jobs
    server = multiprocessing.get_context("spawn").Process(
        target=serve, args=(port, people, chart_jobs), daemon=True
    )
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
            DispatchOptions(
                group_wait_seconds=0.0,
                batch_size=args.batch,
                concurrency=args.concurrency,
                ramp_seconds=args.ramp,
                limits=UNLIMITED,
                poll_seconds=0.2,
            ),
            clock=lambda: datetime.now(UTC),
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

        # Bursts with charts, every job with a series of its own: first as the service runs (each
        # chart drawn when its job was measured), then every chart drawn at its send.
        def charted_dispatcher(charts: JobCharts) -> Dispatcher:
            return Dispatcher(
                store,
                senders,
                Renderer(dashboard_url="https://inno.example.org"),
                DispatchOptions(
                    group_wait_seconds=0.0,
                    batch_size=args.batch,
                    concurrency=args.concurrency,
                    limits=UNLIMITED,
                    poll_seconds=0.2,
                ),
                clock=lambda: datetime.now(UTC),
                parts=MessageParts(charts=charts),
            )

        charts = JobCharts(store, workers=args.chart_workers, cache_size=chart_jobs + 16)
        measured = await seed_with_series(store, CHART_OFFSET, chart_jobs, datetime.now(UTC))
        cpu_before = time.process_time()
        for record, series in measured:
            charts.draw_ahead(record, series)
        await charts.drawn_ahead()
        draw_cpu = time.process_time() - cpu_before
        drawn_ahead = charts.drawn
        if profiler is not None:
            profiler = cProfile.Profile()
            profiler.enable()
        charted_settled, charted_seconds, charted_cpu = await burst(charted_dispatcher(charts))
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(args.profile + ".charts")
        drawn_at_send = charts.drawn - drawn_ahead
        charts.close()
        assert await pending(store) == 0, "burst with charts left rows pending"

        cold = JobCharts(store, workers=args.chart_workers)
        await seed_with_series(store, COLD_OFFSET, chart_jobs, datetime.now(UTC))
        cold_settled, cold_seconds, cold_cpu = await burst(charted_dispatcher(cold))
        cold_drawn = cold.drawn
        cold.close()
        assert await pending(store) == 0, "burst with charts drawn at the send left rows pending"

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

        rows = [
            r
            for r in await sent_rows(store)
            if r.job_uid and f"job-{args.jobs:07d}" <= r.job_uid < f"job-{CHART_OFFSET:07d}"
        ]
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
        print(f"chart_jobs={chart_jobs}")
        print(f"chart_workers={args.chart_workers}")
        print(f"chart_draw_cpu_ms={1000 * draw_cpu / max(1, drawn_ahead):.2f}")
        print(f"sent_per_s_with_charts={charted_settled / charted_seconds:.0f}")
        print(f"dispatcher_cpu_ms_per_row_with_charts={1000 * charted_cpu / charted_settled:.2f}")
        print(f"charts_drawn_at_send={drawn_at_send}")
        print(f"sent_per_s_with_charts_drawn_at_send={cold_settled / cold_seconds:.0f}")
        print(f"dispatcher_cpu_ms_per_row_with_charts_drawn_at_send={1000 * cold_cpu / cold_settled:.2f}")
        print(f"charts_drawn_at_send_cold={cold_drawn}")
        print(f"load_average_1m={os.getloadavg()[0]:.2f}")
        print(f"steady_rate_per_s={args.steady_rate}")
        print(f"ramp_s={args.ramp:g}")
        print(f"steady_sent={len(latencies)}")
        print(f"p50_due_to_sent_ms={statistics.median(latencies):.1f}")
        print(f"p99_due_to_sent_ms={latencies[max(0, int(len(latencies) * 0.99) - 1)]:.1f}")
        print(f"delivered_telegram={delivered['telegram']}")
        print(f"delivered_slack={delivered['slack']}")
        print(f"delivered_telegram_photos={delivered['telegram_photos']}")
        print(f"delivered_slack_uploads={delivered['slack_uploads']}")
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
    parser.add_argument(
        "--ramp", type=float, default=0.0, help="the dispatcher's ramp in seconds (the service's: 30)"
    )
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--telegram-pool", type=int, default=DEFAULT_POOL_SIZE, help="httpx connections")
    parser.add_argument(
        "--chart-jobs", type=int, default=None, help="summaries with charts (default: --jobs)"
    )
    parser.add_argument("--chart-workers", type=int, default=2, help="threads that draw charts")
    parser.add_argument("--profile", metavar="FILE", help="cProfile the burst phase into FILE (slows it)")
    parser.add_argument(
        "--fence", action="store_true", help="claim as an elected leader (fenced by the lease)"
    )
    asyncio.run(bench(parser.parse_args()))


if __name__ == "__main__":
    main()
