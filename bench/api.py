"""Benchmark: REST API latency over a million jobs in Postgres, under an open-loop 200 req/s load.

Fills its own database (``inno_bench_api``, recreated unless ``--reuse``) with ``--jobs`` jobs
finished over the last year in 20 teams, 500 owners and 40 namespaces — 90 % with usage, 20 % with a
recommendation — using INSERT … SELECT generate_series on the server. Then serves the real app
(``create_app`` over a ``Store``) in this process and starts a second process that issues requests
on a fixed schedule (``--rate`` per second, open loop: latency counts from when a request was due,
so a slow server cannot slow the load down and hide its own queueing). Two phases:

- ``GET /api/v1/jobs?team=…&since=<now - 7 d>`` (team rotating), first page of 50 with usage and
  recommendations embedded;
- ``GET /api/v1/usage?group_by=owner`` (aggregation over every finished job; cached ≤ 30 s and
  refreshed in the background, so ``usage_cold_ms`` also reports one uncached computation), priced
  at ``RATES`` (three GPU models);
- ``GET /api/v1/budgets?team=…`` (team rotating; each of the 20 teams has a monthly GPU-hour and a
  weekly money budget; every budget's report is computed at once, cached ≤ 60 s and warmed as the
  app starts, ``budgets_cold_ms`` reports one uncached computation of them all).

The app is built as a deployment builds it: its own store without pre-ping (`create_api_store`)
and the usage and budget reports warmed at start; the load starts once the warm-up is done
(``usage_warmup_ms``). Prints ``name=value`` lines, with the machine's load average
(``load_before``/``load_after`` of each phase: 1-minute figure, other work shares the cores).
The server process sets the garbage collector's thresholds as ``serve`` does (gc_tuning; with
CPython's, the jobs phase ran 263 collections, 0.3 ms of CPU per request and pauses of up to
166 ms on the requests' time, so the bench measured a GC that no deployment runs), and prints per
phase the collections that ran and the time they took (``*_gc_collections``, ``*_gc_ms``,
``*_gc_max_ms``; ``--gc-defaults`` keeps CPython's thresholds, to compare). ``--profile FILE``
writes a cProfile of the server process during the jobs phase. ``--drop`` drops the database at
the end. Targets (issue 8): jobs_p99_ms ≤ 50, usage_p99_ms ≤ 300; issue 32: both ≤ 10; issue 34:
budgets_p99_ms ≤ 50.

    .venv/bin/python bench/api.py [--jobs 1000000 --rate 200 --seconds 20 --reuse --profile F --drop
                                   --gc-defaults]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aiohttp
import asyncpg
from aiohttp import web
from sqlalchemy.engine import make_url

from inno_notify.adapters.db import migrate
from inno_notify.api import keys
from inno_notify.api.app import create_api_store, create_app
from inno_notify.domain.budgets import Budget, Period
from inno_notify.domain.costs import Rates
from inno_notify.gc_tuning import tune_for_ingest
from inno_notify.service.budgets import Budgets
from inno_notify.settings import ApiSettings, ApiToken

ADMIN_URL = os.environ.get(
    "INNO_NOTIFY_BENCH_POSTGRES_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres"
)
DATABASE = "inno_bench_api"
TOKEN = "bench-token"
NOW = datetime(2026, 12, 1, tzinfo=UTC)
TEAMS = 20
OWNERS = 500
NAMESPACES = 40
RATES = Rates(currency="EUR", gpu_hour={"*H100*": 2.5, "*A100*": 1.6, "*": 0.9})
BUDGETS = tuple(
    budget
    for t in range(TEAMS)
    for budget in (
        Budget(f"team-{t:02d}", Period.MONTH, gpu_hours=20_000.0),
        Budget(f"team-{t:02d}", Period.WEEK, amount=10_000.0),
    )
)

FILL_JOBS = """
INSERT INTO jobs (cluster, uid, namespace, name, kind, status, owner, team, notify, family,
  created_at, started_at, finished_at, first_scheduled_at, sort_at, exit_code, exit_reason,
  gpus_requested, cpu_requested_cores, memory_requested_bytes, requested, labels, event_counts,
  terminal_recorded_at, summary_state, usage_attempts,
  gpu_minutes_held, gpu_minutes_used, gpu_minutes_idle, memory_peak_bytes, top_waste_gpu_minutes, gpu_model)
SELECT 'default', 'uid-' || i, 'ns-' || (i % $2), 'job-' || i, 'job',
  CASE WHEN i % 10 = 0 THEN 'failed' ELSE 'succeeded' END,
  'user' || ((i * 7) % $3) || '@example.com', 'team-' || lpad((i % $4)::text, 2, '0'), 'always',
  'fam-' || (i % 50000),
  fin - interval '2 hours', fin - interval '1 hour', fin, fin - interval '62 minutes', fin,
  CASE WHEN i % 10 = 0 THEN 137 ELSE 0 END, CASE WHEN i % 10 = 0 THEN 'OOMKilled' ELSE 'Completed' END,
  g, 8.0, 68719476736,
  jsonb_build_object('gpus', g, 'cpu_cores', 8.0, 'memory_bytes', 68719476736, 'cpu_limit_cores', null,
    'memory_limit_bytes', null, 'extended', jsonb_build_object('nvidia.com/gpu', g),
    'parallelism', 1 + i % 2, 'completions', null),
  '{}'::jsonb, '{}'::jsonb, fin, 'summarized', 1,
  -- the copies of the usage (FILL_USAGE) and of the advice's largest waste (FILL_RECOMMENDATIONS)
  -- that the job's row keeps (jobs.usage_copies)
  CASE WHEN i % 10 <> 9 THEN g * 60 END, CASE WHEN i % 10 <> 9 THEN g * 60 * (i % 100) / 100.0 END,
  CASE WHEN i % 10 <> 9 THEN CASE WHEN i % 100 < 5 THEN 60 ELSE 0 END END,
  CASE WHEN i % 10 <> 9 THEN 4294967296 + (i % 13)::bigint * 1073741824 END,
  CASE WHEN i % 5 = 0 THEN (i % 240)::float8 END,
  CASE WHEN i % 10 <> 9
    THEN (ARRAY['NVIDIA H100 80GB HBM3', 'NVIDIA A100-SXM4-80GB', 'NVIDIA L40S'])[1 + i % 3] END
FROM (SELECT i, $1::timestamptz - i * (interval '365 days' / $5) AS fin, (1 << (i % 4))::float8 AS g
      FROM generate_series(1, $5) AS i) AS s
"""

FILL_USAGE = """
INSERT INTO usage (cluster, job_uid, gpu_minutes, used_gpu_minutes, gpus_idle, idle_gpu_minutes,
  gpu_util_mean_percent, gpu_memory_peak_bytes, memory_peak_bytes, cpu_cores_mean, cpu_cores_p95,
  collected_at, detail)
SELECT 'default', 'uid-' || i, g * 60, g * 60 * (i % 100) / 100.0, CASE WHEN i % 100 < 5 THEN 1 ELSE 0 END,
  CASE WHEN i % 100 < 5 THEN 60 ELSE 0 END, i % 100, 8589934592 + (i % 7)::bigint * 1073741824,
  4294967296 + (i % 13)::bigint * 1073741824, 2.5, 3.5, $1::timestamptz,
  '{"gpus": [], "pods": [], "missing": []}'::jsonb
FROM (SELECT i, (1 << (i % 4))::float8 AS g FROM generate_series(1, $2) AS i) AS s
WHERE i % 10 <> 9
"""

FILL_RECOMMENDATIONS = """
INSERT INTO recommendations (cluster, job_uid, position, kind, severity, amounts, unit, message,
  waste_gpu_minutes, waste_gib_hours, waste_core_hours, field_path, evidence)
SELECT 'default', 'uid-' || i, 0, 'gpu_count', 'warning', '{"current": 4, "suggested": 2}'::jsonb, 'gpus',
  'half of the GPUs stayed idle: request 2', (i % 240)::float8, 0, 0, null, '{}'::jsonb
FROM generate_series(1, $1) AS i WHERE i % 5 = 0
"""


def _pg_args(url: str) -> dict[str, object]:
    parsed = make_url(url)
    return {
        "user": parsed.username,
        "password": parsed.password,
        "host": parsed.host,
        "port": parsed.port,
        "database": parsed.database,
    }


async def prepare(jobs: int, reuse: bool) -> tuple[str, dict[str, float]]:
    figures: dict[str, float] = {}
    url = make_url(ADMIN_URL).set(database=DATABASE).render_as_string(hide_password=False)
    admin = await asyncpg.connect(**_pg_args(ADMIN_URL))
    try:
        exists = await admin.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", DATABASE)
        if exists and reuse:
            return url, figures
        await admin.execute(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)')
        await admin.execute(f'CREATE DATABASE "{DATABASE}"')
    finally:
        await admin.close()
    await migrate(url)
    conn = await asyncpg.connect(**_pg_args(url))
    try:
        started = time.perf_counter()
        await conn.execute(FILL_JOBS, NOW, NAMESPACES, OWNERS, TEAMS, jobs)
        await conn.execute(FILL_USAGE, NOW, jobs)
        await conn.execute(FILL_RECOMMENDATIONS, jobs)
        await conn.execute("ANALYZE")
        figures["fill_seconds"] = time.perf_counter() - started
    finally:
        await conn.close()
    return url, figures


# --- the load generator (the second process) -----------------------------------------------------


async def load(base: str, paths: list[str], rate: float, seconds: float, warmup: float) -> dict[str, object]:
    """Requests `paths` round-robin at `rate`/s for warmup + seconds; latencies after the warm-up."""
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    headers = {"Authorization": f"Bearer {TOKEN}"}
    connector = aiohttp.TCPConnector(limit=256)
    async with aiohttp.ClientSession(base, headers=headers, connector=connector) as session:

        async def one(path: str, due: float, counted: bool) -> None:
            async with session.get(path) as response:
                await response.read()
            done = time.perf_counter()
            statuses[response.status] = statuses.get(response.status, 0) + 1
            if counted:
                latencies.append((done - due) * 1000)

        start = time.perf_counter() + 0.1
        total = int((warmup + seconds) * rate)
        tasks = []
        for i in range(total):
            due = start + i / rate
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(paths[i % len(paths)], due, i >= warmup * rate)))
        await asyncio.gather(*tasks)
        achieved = total / (time.perf_counter() - start)
    latencies.sort()
    return {
        "p50": statistics.median(latencies),
        "p99": latencies[max(0, int(len(latencies) * 0.99) - 1)],
        "max": latencies[-1],
        "n": len(latencies),
        "statuses": statuses,
        "achieved_rate": achieved,
    }


def run_load(base: str, paths: list[str], rate: float, seconds: float, warmup: float) -> dict[str, Any]:
    spec = json.dumps({"base": base, "paths": paths, "rate": rate, "seconds": seconds, "warmup": warmup})
    done = subprocess.run(
        [sys.executable, __file__, "--load", spec], capture_output=True, text=True, check=True
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


# --- the server side ---------------------------------------------------------------------------


class GcPauses:
    """The collections the garbage collector ran while on, and how long each took (gc.callbacks)."""

    def __init__(self) -> None:
        self.pauses: list[float] = []
        self._started = 0.0

    def __enter__(self) -> GcPauses:
        gc.callbacks.append(self._note)
        return self

    def __exit__(self, *_: object) -> None:
        gc.callbacks.remove(self._note)

    def _note(self, phase: str, _info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.pauses.append((time.perf_counter() - self._started) * 1000)


async def bench(args: argparse.Namespace) -> None:
    import hashlib

    if not args.gc_defaults:
        tune_for_ingest()  # as `serve` does, before anything is built
    url, figures = await prepare(args.jobs, args.reuse)
    for name, value in figures.items():
        print(f"{name}={value:.1f}", flush=True)
    store = create_api_store(url)
    settings = ApiSettings(
        listen="127.0.0.1:0",
        tokens=(ApiToken(name="bench", sha256=hashlib.sha256(TOKEN.encode()).hexdigest(), role="viewer"),),
    )
    total = await store.engine.connect()
    try:
        from sqlalchemy import text

        jobs_count = (await total.execute(text("SELECT count(*) FROM jobs"))).scalar_one()
    finally:
        await total.close()
    print(f"jobs={jobs_count}", flush=True)

    started = time.perf_counter()
    await store.usage.usage_cells()
    print(f"usage_cold_ms={(time.perf_counter() - started) * 1000:.1f} load={_load()}", flush=True)

    # The budgets' clock: ten days before the fill's newest finish, so the month has spend.
    budgets = Budgets(store, BUDGETS, RATES, "UTC", lambda: NOW - timedelta(days=10))
    started = time.perf_counter()
    await budgets.reports()
    print(f"budgets_cold_ms={(time.perf_counter() - started) * 1000:.1f} load={_load()}", flush=True)

    rates = None if args.no_rates else RATES
    app = create_app(
        store, settings, close_store=True, warm_reports=True, rates=rates, budgets=budgets.reports
    )
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    started = time.perf_counter()
    await app[keys.REPORTS_WARMUP]
    print(f"usage_warmup_ms={(time.perf_counter() - started) * 1000:.1f}", flush=True)
    base = f"http://127.0.0.1:{runner.addresses[0][1]}"
    since = (NOW - timedelta(days=7)).isoformat().replace("+00:00", "Z")
    try:
        phases = {
            "jobs": [f"/api/v1/jobs?team=team-{t:02d}&since={since}" for t in range(TEAMS)],
            "usage": ["/api/v1/usage?group_by=owner"],
            "budgets": [f"/api/v1/budgets?team=team-{t:02d}" for t in range(TEAMS)],
        }
        for name, paths in phases.items():
            print(f"{name}_load_before={_load()}", flush=True)
            # CPU time, unlike latency, hardly depends on what else the shared machine runs.
            profiler = cProfile.Profile(time.process_time) if args.profile and name == "jobs" else None
            if profiler is not None:
                profiler.enable()
            server_cpu, db_cpu = time.process_time(), await _postgres_cpu(url)
            with GcPauses() as collections:
                result = await asyncio.to_thread(run_load, base, paths, args.rate, args.seconds, args.warmup)
            server_cpu, db_after = time.process_time() - server_cpu, await _postgres_cpu(url)
            if profiler is not None:
                profiler.disable()
                profiler.dump_stats(args.profile)
            sent = sum(result["statuses"].values())
            print(f"{name}_load_after={_load()}", flush=True)
            print(f"{name}_server_cpu_ms_per_request={server_cpu * 1000 / sent:.2f}")
            print(f"{name}_postgres_cpu_ms_per_request={_postgres_cpu_figure(db_cpu, db_after, sent)}")
            pauses = collections.pauses
            print(f"{name}_gc_collections={len(pauses)}")
            print(f"{name}_gc_ms={sum(pauses):.1f} {name}_gc_max_ms={max(pauses, default=0.0):.1f}")
            print(f"{name}_rate={args.rate}", flush=True)
            print(f"{name}_achieved_rate={result['achieved_rate']:.1f}")
            print(f"{name}_requests={result['n']}")
            print(f"{name}_statuses={','.join(f'{k}:{v}' for k, v in sorted(result['statuses'].items()))}")
            print(f"{name}_p50_ms={result['p50']:.1f}")
            print(f"{name}_p99_ms={result['p99']:.1f}")
            print(f"{name}_max_ms={result['max']:.1f}", flush=True)
    finally:
        await runner.cleanup()
        if args.drop:
            await drop()


async def drop() -> None:
    admin = await asyncpg.connect(**_pg_args(ADMIN_URL))
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)')
    finally:
        await admin.close()


async def _postgres_cpu(url: str) -> tuple[int, dict[int, float]]:
    """Sessions ever started on the bench database, and the user + system CPU seconds of each of
    its server processes now, by pid (none where /proc does not show them: another machine)."""
    conn = await asyncpg.connect(**_pg_args(url))
    try:
        pids = await conn.fetch(
            "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", DATABASE
        )
        sessions = await conn.fetchval("SELECT sessions FROM pg_stat_database WHERE datname = $1", DATABASE)
    finally:
        await conn.close()
    return sessions, _proc_cpu_seconds([row["pid"] for row in pids])


def _proc_cpu_seconds(pids: list[int]) -> dict[int, float]:
    found = {}
    for pid in pids:
        try:
            # utime and stime are fields 14 and 15; the command name before them may hold spaces.
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited meanwhile
        found[pid] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return found


def _postgres_cpu_figure(
    before: tuple[int, dict[int, float]], after: tuple[int, dict[int, float]], requests: int
) -> str:
    (sessions_before, cpu_before), (sessions_after, cpu_after) = before, after
    if not cpu_after:
        return "None (no backend's /proc/PID/stat readable)"
    # A backend that exited took its CPU time with it (the pool closes overflow connections when
    # the server is saturated). The second measuring session counts as started, not as a backend.
    exited = len(cpu_before.keys() - cpu_after.keys())
    vanished = (sessions_after - sessions_before - 1) - len(cpu_after.keys() - cpu_before.keys())
    if exited or vanished:
        return f"None ({exited + vanished} backends exited during the phase, their CPU unseen)"
    spent = sum(cpu - cpu_before.get(pid, 0.0) for pid, cpu in cpu_after.items())
    return f"{spent * 1000 / requests:.2f}"


def _load() -> str:
    return f"{os.getloadavg()[0]:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--reuse", action="store_true", help="keep an existing inno_bench_api database")
    parser.add_argument("--profile", help="write a cProfile of the server during the jobs phase here")
    parser.add_argument("--drop", action="store_true", help="drop the database at the end")
    parser.add_argument("--gc-defaults", action="store_true", help="CPython's GC thresholds, not serve's")
    parser.add_argument("--no-rates", action="store_true", help="serve without accounting.rates (no costs)")
    parser.add_argument("--load", help=argparse.SUPPRESS)  # internal: run as the load generator
    args = parser.parse_args()
    if args.load:
        spec = json.loads(args.load)
        result = asyncio.run(load(spec["base"], spec["paths"], spec["rate"], spec["seconds"], spec["warmup"]))
        print(json.dumps(result))
        return
    asyncio.run(bench(args))


if __name__ == "__main__":
    main()
