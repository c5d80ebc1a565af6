"""Benchmark: the dispatcher from a Postgres outbox to local Bot API and Web API servers.

The fake Telegram and Slack servers of the tests run in a child process (so they do not share the
dispatcher's event loop), behind one aiohttp app; the dispatcher sends with the real
python-telegram-bot and slack-sdk clients and no rate limits. Three phases, on a throwaway database:

- burst: ``--jobs`` summaries (one per person, half Telegram, half Slack) all due at once;
  ``sent_per_s`` is rows settled per second until the outbox is empty.
- bursts with charts: ``--chart-jobs`` summaries (default ``--jobs``) each time, each job with a
  usage series of its own (4 GPUs, 120 points, different values per job, so no two charts are
  alike), sent by a dispatcher with its charts on (``service.job_charts``). Each Telegram summary
  is then a photo upload, each Slack post three more Web API calls and an upload. The summaries are
  stored as the usage round stores them (``complete_summaries``, 500 a transaction), their charts
  drawn in the chart workers (``ChartDrawer``, ``--chart-workers`` processes) and stored with them
  (``charts_drawn_per_s``: the workers' rate; ``chart_draw_cpu_ms``: the CPU of one chart, drawn
  in this process). Three times: ``sent_per_s_with_charts``, sent by the leader that drew them;
  ``sent_per_s_with_charts_takeover``, by a new leader (a fresh dispatcher and JobCharts, nothing
  in memory) with the charts the previous one stored; and ``sent_per_s_with_charts_drawn_at_send``,
  summaries stored without charts (by a release before charts were stored), each drawn at its
  send. ``charts_drawn_at_send*`` counts what each dispatcher drew. Each rate is printed with the
  1-minute load average at its end.
- steady: ``--steady-jobs`` summaries that become due at ``--steady-rate`` per second while the
  dispatcher runs its normal loop; ``p50/p99_due_to_sent_ms`` is the time from a row's due time
  to the time the dispatcher recorded it sent. The loop starts with the steady phase, so it is
  that of a dispatcher past its ramp (``--ramp 0``, the default here); ``--ramp 30`` measures
  a started one, as a new leader's is (service.dispatcher: one message in flight at first).

Prints ``name=value`` lines, with ``dispatcher_cpu_ms_per_row`` (CPU of this process per settled
row in the burst, less sensitive than the rates to other load) and the 1-minute load average: on
a shared 2-core machine both rates move with whatever else runs, so report them together.
``--profile FILE`` writes a cProfile of the burst (which it slows several times; the burst with
charts into FILE.charts); for a sampling profile run the bench under ``py-spy record
--nonblocking``. ``--telegram-pool`` sets the httpx pool of the Telegram sender. ``--fence``
runs the dispatcher as an elected leader would: its store's fence checks the lease (one more
statement in every claim; docs/ha.md). The process sets the garbage collector's thresholds as
``serve`` does (gc_tuning); ``--gc-defaults`` keeps CPython's, to compare.

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
from inno_notify.adapters.channels.job_chart import ChartJob, render_job_png
from inno_notify.adapters.channels.render import Renderer
from inno_notify.adapters.channels.slack import SlackSender
from inno_notify.adapters.channels.telegram import DEFAULT_POOL_SIZE, TelegramSender
from inno_notify.adapters.db import Store, migrate
from inno_notify.adapters.db.leases import UNFENCED, Fence, LeaseFence, LeaseRepository
from inno_notify.adapters.db.usage_round import JobSummary
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
from inno_notify.domain.routing import Directory, plan_summary
from inno_notify.gc_tuning import tune_for_ingest
from inno_notify.service.dispatcher import Dispatcher, DispatchOptions
from inno_notify.service.job_charts import ChartDrawer, JobCharts
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
TAKEOVER_OFFSET = 6_000_000
COLD_OFFSET = 7_000_000
CHARTED = (CHART_OFFSET, TAKEOVER_OFFSET, COLD_OFFSET)


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
    users = users_for(people, 0)
    for offset in CHARTED:
        users |= users_for(charted, offset)
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
        for row in plan_summary(
            record, Directory(owner, {}), frozenset({"telegram", "slack"}), now, 0.0
        ).notifications:
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
    store: Store, first: int, count: int, now: datetime, drawer: ChartDrawer | None
) -> tuple[float, float]:
    """Like `seed`, each job stored with its usage and series as the usage round stores them (500 a
    transaction), with its chart drawn by `drawer` (None: stored without). Returns the seconds spent
    drawing and storing."""
    users = users_for(count, first)
    jobs = [job(first + i, now) for i in range(count)]
    for start in range(0, count, 1000):
        async with store.jobs.ingest_transaction() as tx:
            await tx.write(CLUSTER, jobs[start : start + 1000], [], [])
    usage = Usage(gpu_minutes=240.0, used_gpu_minutes=120.0, gpus_idle=1, gpu_util_mean_percent=50.0)
    drawing = storing = 0.0
    for start in range(0, count, 500):
        batch = [
            (record, series_for(first + start + i, now)) for i, record in enumerate(jobs[start : start + 500])
        ]
        began = time.perf_counter()
        charts = await drawer.job_charts(batch) if drawer is not None else [None] * len(batch)
        drawn = time.perf_counter()
        summaries = []
        for (record, series), chart in zip(batch, charts, strict=True):
            owner = {record.owner: users[record.owner]} if record.owner else {}
            rows = plan_summary(
                record, Directory(owner, {}), frozenset({"telegram", "slack"}), now, 0.0
            ).notifications
            summaries.append(JobSummary(record.uid, usage, [], rows, usage_series=series, chart=chart))
        await store.jobs.complete_summaries(CLUSTER, summaries)
        drawing += drawn - began
        storing += time.perf_counter() - drawn
    return drawing, storing


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
        burst_load = os.getloadavg()[0]
        burst_cpu = time.process_time() - cpu_started
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(args.profile)
        assert await pending(store) == 0, "burst left rows pending"

        # Bursts with charts, every job with a series of its own: sent by the leader whose usage
        # rounds drew and stored the charts, by a new leader, and stored without charts.
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

        now = datetime.now(UTC)
        sample = [ChartJob(f"research/train-{i}", series_for(i, now)) for i in range(200)]
        cpu_before = time.process_time()
        for chart in sample:
            render_job_png(chart)
        draw_cpu = (time.process_time() - cpu_before) / len(sample)

        drawer = ChartDrawer(workers=args.chart_workers)
        await drawer.job_charts([(job(0, now), series_for(0, now))])  # the workers started
        drawing, storing = await seed_with_series(store, CHART_OFFSET, chart_jobs, datetime.now(UTC), drawer)
        charts = JobCharts(store, drawer)
        if profiler is not None:
            profiler = cProfile.Profile()
            profiler.enable()
        charted_settled, charted_seconds, charted_cpu = await burst(charted_dispatcher(charts))
        charted_load = os.getloadavg()[0]
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(args.profile + ".charts")
        assert await pending(store) == 0, "burst with charts left rows pending"

        # The next leader: the previous one drew and stored the charts, then went away.
        await seed_with_series(store, TAKEOVER_OFFSET, chart_jobs, datetime.now(UTC), drawer)
        drawer.close()
        takeover = JobCharts(store, workers=args.chart_workers)
        takeover_settled, takeover_seconds, takeover_cpu = await burst(charted_dispatcher(takeover))
        takeover_load = os.getloadavg()[0]
        takeover.close()
        assert await pending(store) == 0, "burst after the takeover left rows pending"

        _, storing_without = await seed_with_series(store, COLD_OFFSET, chart_jobs, datetime.now(UTC), None)
        cold = JobCharts(store, workers=args.chart_workers)
        cold_settled, cold_seconds, cold_cpu = await burst(charted_dispatcher(cold))
        cold_load = os.getloadavg()[0]
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
        print(f"load_average_1m_burst={burst_load:.2f}")
        # CPU of this process per settled row: less sensitive than the rate to other load on the machine.
        print(f"dispatcher_cpu_ms_per_row={1000 * burst_cpu / settled:.2f}")
        print(f"chart_jobs={chart_jobs}")
        print(f"chart_workers={args.chart_workers}")
        print(f"chart_draw_cpu_ms={1000 * draw_cpu:.2f}")
        print(f"charts_drawn_per_s={chart_jobs / drawing:.0f}")
        print(f"summaries_stored_per_s_with_charts={chart_jobs / storing:.0f}")
        print(f"summaries_stored_per_s_without_charts={chart_jobs / storing_without:.0f}")
        print(f"sent_per_s_with_charts={charted_settled / charted_seconds:.0f}")
        print(f"load_average_1m_with_charts={charted_load:.2f}")
        print(f"dispatcher_cpu_ms_per_row_with_charts={1000 * charted_cpu / charted_settled:.2f}")
        print(f"charts_drawn_at_send={charts.drawn}")
        print(f"sent_per_s_with_charts_takeover={takeover_settled / takeover_seconds:.0f}")
        print(f"load_average_1m_with_charts_takeover={takeover_load:.2f}")
        print(f"dispatcher_cpu_ms_per_row_with_charts_takeover={1000 * takeover_cpu / takeover_settled:.2f}")
        print(f"charts_drawn_at_send_takeover={takeover.drawn}")
        print(f"sent_per_s_with_charts_drawn_at_send={cold_settled / cold_seconds:.0f}")
        print(f"load_average_1m_with_charts_drawn_at_send={cold_load:.2f}")
        print(f"dispatcher_cpu_ms_per_row_with_charts_drawn_at_send={1000 * cold_cpu / cold_settled:.2f}")
        print(f"charts_drawn_at_send_cold={cold.drawn}")
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
    parser.add_argument(
        "--chart-workers", type=int, default=os.cpu_count() or 1, help="processes that draw charts"
    )
    parser.add_argument("--profile", metavar="FILE", help="cProfile the burst phase into FILE (slows it)")
    parser.add_argument(
        "--fence", action="store_true", help="claim as an elected leader (fenced by the lease)"
    )
    parser.add_argument("--gc-defaults", action="store_true", help="CPython's GC thresholds, not serve's")
    args = parser.parse_args()
    if not args.gc_defaults:
        tune_for_ingest()  # as `serve` does: the dispatcher runs in that process
    print(f"gc_thresholds={'defaults' if args.gc_defaults else 'serve'}")
    asyncio.run(bench(args))


if __name__ == "__main__":
    main()
