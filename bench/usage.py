"""Benchmark: usage of one round of finished jobs, batched versus one query loop per job.

A real Prometheus holds generated dcgm-exporter and cAdvisor series for ``--gpus`` GPUs over
``--days`` days (every GPU busy with 1–8-GPU jobs of 1–8 h). The ``--jobs`` most recently finished
jobs are measured twice in the same run: once as one batched round (``UsageMeter.measure_pods``
over all of them), once the naive way, one ``measure_pods`` call per job in a loop (the same client,
the same PromQL for one job at a time). Both must agree figure for figure. The batched round is
timed with the usage series for the charts (the default) and, interleaved in the same run, without
them (``*_without_series``): ``series_cost_ratio`` is what the series add to a round. Prints ``name=value``
lines; ``seconds`` is the median of ``--repeats`` batched rounds after one warm-up round,
``baseline_seconds`` one pass of the loop, cut into ``--repeats`` parts that alternate with the
rounds. ``cpu_seconds`` and ``baseline_cpu_seconds`` add up the CPU time of Prometheus and of this
process over the same spans (Linux ``/proc``): the work, which load on a shared machine stretches
less than the wall clock; ``load_1min_*`` say how busy the machine was. The process sets the garbage
collector's thresholds as ``serve`` does (gc_tuning), since the round runs in that process: with
CPython's, parsing a round's megabytes of answers ran collections that walk everything the process
holds, which no deployment runs (``--gc-defaults`` keeps CPython's, to compare).

The same jobs then go through the service's usage round in a database (``--database``: a SQLite
file, or a database of its own on a Postgres server per round): stored as ingestion leaves them,
one job per pod, in ``--families`` families whose ``--family-runs`` earlier runs each were
summarized first, owners in the directory. One ``UsageCollector.run_once`` settles them with
Prometheus's answers replayed, so that what is timed is the collector and its database, not
Prometheus: ``db_queries_per_round`` counts the statements the engine sends (a
``before_cursor_execute`` listener; an executemany counts once, SQLite's BEGIN counts),
``db_round_seconds`` is the median of ``--db-repeats`` rounds, each on a fresh database.
``--db-only`` skips the Prometheus comparison.

The TSDB is cached under ``--cache`` (keyed by the parameters); the first run builds it (minutes).

    .venv/bin/python bench/usage.py [--jobs 500 --gpus 256 --days 7 --scrape 60]
    .venv/bin/python bench/usage.py --db-only --database postgres
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import math
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import sqlalchemy as sa
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from inno_notify.adapters.db import Store, SummaryState, migrate
from inno_notify.adapters.db.jobs import TerminalMark
from inno_notify.adapters.db.tables import outbox
from inno_notify.adapters.prometheus.batching import PodWindow
from inno_notify.adapters.prometheus.client import ClientConfig, PrometheusClient
from inno_notify.adapters.prometheus.measure import MeterConfig, PodMeasurement, UsageMeter
from inno_notify.domain.model import (
    ContainerRecord,
    DirectoryUser,
    GpuUsage,
    JobRecord,
    JobStatus,
    NotifyMode,
    PodRecord,
    PodUsage,
    Requested,
    WorkloadKind,
)
from inno_notify.domain.rightsizing import RightsizingPolicy
from inno_notify.gc_tuning import tune_for_ingest
from inno_notify.service.planner import DirectoryPlanner
from inno_notify.service.usage import CollectorOptions, UsageCollector
from tests.adapters.prometheus import metricgen
from tests.adapters.prometheus.promserver import HAVE_PROMETHEUS, PrometheusServer, backfill

GIB = 1024**3
START = datetime(2025, 1, 6, tzinfo=UTC).timestamp()


def workload(gpus_total: int, days: float, seed: int) -> tuple[list[metricgen.Gpu], list[metricgen.PodTrace]]:
    rng = random.Random(seed)
    end = START + days * 86400
    gpus = [
        metricgen.Gpu(f"node-{i // 8:03d}", i % 8, f"GPU-{i:06d}", has_prof=False, reports_fb_free=False)
        for i in range(gpus_total)
    ]
    pods: list[metricgen.PodTrace] = []
    # Each node runs jobs of 1, 2, 4 or 8 GPUs back to back on GPU groups.
    for node in range(gpus_total // 8):
        node_gpus = gpus[node * 8 : node * 8 + 8]
        size = rng.choice([1, 2, 4, 8])
        for group in range(8 // size):
            t = START + rng.uniform(0, 3600)
            while True:
                length = rng.uniform(3600, 8 * 3600)
                if t + length > end - 600:
                    break
                n = len(pods) + 1
                level = rng.uniform(0, 100)
                memory = rng.uniform(2, 200) * GIB
                cores = rng.uniform(0.5, 16)
                pods.append(
                    metricgen.PodTrace(
                        namespace=f"team-{rng.randrange(12):02d}",
                        name=f"job-{n:05d}-{rng.randrange(16**5):05x}",
                        uid=f"{n:08x}-0000-4000-8000-{n:012x}",
                        start=t,
                        end=t + length,
                        gpus=[
                            metricgen.GpuUse(g, constant(level), constant(20000.0))
                            for g in node_gpus[group * size : (group + 1) * size]
                        ],
                        containers=[metricgen.Container("main", constant(memory), constant(cores))],
                        pod_cgroup_series=False,
                    )
                )
                t += length + rng.uniform(60, 1800)
    return gpus, pods


def constant(value: float) -> metricgen.Signal:
    return lambda _t: value


def _close(a: object, b: object) -> bool:
    # Different query shapes sum floats in different orders: equal up to rounding.
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    return a == b


def same(a: PodMeasurement, b: PodMeasurement) -> bool:
    pairs: list[tuple[PodUsage, PodUsage] | tuple[GpuUsage, GpuUsage]] = [
        (a.pod, b.pod),
        *zip(sorted(a.gpus, key=str), sorted(b.gpus, key=str), strict=False),
    ]
    return len(a.gpus) == len(b.gpus) and all(
        _close(getattr(x, f.name), getattr(y, f.name)) for x, y in pairs for f in dataclasses.fields(x)
    )


class CpuClock:
    """CPU seconds spent by Prometheus and by this process together: a busy shared machine stretches
    wall-clock time, far less the work done."""

    def __init__(self, prometheus_pid: int) -> None:
        self._stat = Path(f"/proc/{prometheus_pid}/stat")
        self._tick = os.sysconf("SC_CLK_TCK")

    def __call__(self) -> float:
        fields = self._stat.read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / self._tick + time.process_time()


async def run(
    url: str, targets: list[PodWindow], scrape: float, repeats: int, cpu: CpuClock, compress: bool
) -> dict[str, float]:
    config = MeterConfig(scrape_interval_seconds=scrape)
    # requests asks for gzip by default; "identity" shows what compressing every answer costs.
    headers = {} if compress else {"Accept-Encoding": "identity"}
    # One warm-up round (Prometheus pages the blocks in, the meter learns the label spelling). The
    # service keeps one meter, so a steady-state round no longer probes the label spelling.
    client = PrometheusClient(ClientConfig(url=url, timeout_seconds=120, headers=headers))
    meter = UsageMeter(client, config)
    await meter.measure_pods(targets)
    first_round_queries = client.queries_sent
    bare_client = PrometheusClient(ClientConfig(url=url, timeout_seconds=120, headers=headers))
    bare_meter = UsageMeter(bare_client, dataclasses.replace(config, series_points=0))
    await bare_meter.measure_pods(targets)
    loop_client = PrometheusClient(ClientConfig(url=url, timeout_seconds=120, headers=headers))
    loop_meter = UsageMeter(loop_client, config)

    # The two are interleaved: before each ``repeats``-th part of the per-job loop, one batched round.
    # The load of a shared machine drifts within a run; this way both see the same drift.
    timings, cpu_timings = [], []
    bare_timings, bare_cpu_timings = [], []
    baseline_seconds = baseline_cpu = 0.0
    looped: dict[str, PodMeasurement] = {}
    parts = [targets[i::repeats] for i in range(repeats)]
    for part in parts:
        before = client.queries_sent
        c0, t0 = cpu(), time.perf_counter()
        batched = await meter.measure_pods(targets)
        timings.append(time.perf_counter() - t0)
        cpu_timings.append(cpu() - c0)
        queries = client.queries_sent - before

        bare_before = bare_client.queries_sent
        c0, t0 = cpu(), time.perf_counter()
        await bare_meter.measure_pods(targets)
        bare_timings.append(time.perf_counter() - t0)
        bare_cpu_timings.append(cpu() - c0)
        bare_queries = bare_client.queries_sent - bare_before

        c0, t0 = cpu(), time.perf_counter()
        for target in part:
            looped.update(await loop_meter.measure_pods([target]))
        baseline_seconds += time.perf_counter() - t0
        baseline_cpu += cpu() - c0
    client.close()
    bare_client.close()
    loop_client.close()
    seconds = statistics.median(timings)
    cpu_seconds = statistics.median(cpu_timings)

    per_metric: dict[str, int] = {}
    for kind, n in meter.last_queries_by_kind.items():
        # The summed steps belong to their metric; spelling probes to none.
        metric = {"mem_sum": "mem", "cpu_sum": "cpu"}.get(kind, kind)
        per_metric[metric] = per_metric.get(metric, 0) + n
    with_series = sum(
        1 for m in batched.values() if m.points is not None and (m.points.gpu_util or m.points.memory)
    )
    series_points = sum(
        len(v) for m in batched.values() if m.points for v in (*m.points.gpu_util.values(), m.points.memory)
    )
    with_gpu_data = sum(1 for m in batched.values() if m.gpus and m.pod.memory_peak_bytes is not None)
    return {
        "queries": queries,
        "first_round_queries": first_round_queries,
        "queries_per_metric_max": max(per_metric.values()),
        **{f"queries_{kind}": n for kind, n in sorted(per_metric.items())},
        "seconds": seconds,
        "seconds_min": min(timings),
        "seconds_max": max(timings),
        "cpu_seconds": cpu_seconds,
        "queries_without_series": bare_queries,
        "seconds_without_series": statistics.median(bare_timings),
        "cpu_seconds_without_series": statistics.median(bare_cpu_timings),
        "series_cost_ratio": seconds / statistics.median(bare_timings),
        "series_cpu_cost_ratio": cpu_seconds / statistics.median(bare_cpu_timings),
        "series_step_classes": len(set(meter.series_steps(targets).values())),
        "jobs_with_series": with_series,
        "series_points_per_job": series_points / max(1, with_series),
        "baseline_queries": loop_client.queries_sent,
        "baseline_seconds": baseline_seconds,
        "baseline_cpu_seconds": baseline_cpu,
        "speedup": baseline_seconds / seconds,
        "cpu_speedup": baseline_cpu / cpu_seconds,
        "jobs_with_gpu_and_memory_figures": with_gpu_data,
        "mismatches": sum(1 for uid, m in batched.items() if not same(m, looped[uid])),
    }


# --- The usage round in the database -------------------------------------------------------------
#
# The same finished jobs stored in a database (one job per pod trace, families of several runs with
# their earlier runs measured and advised, owners in the directory) and settled by the service's
# UsageCollector in one round, with the measurements replayed from Prometheus's answers: what is
# timed and counted is the collector's work and its database statements, not Prometheus.

DB_CLUSTER = "bench"
OWNERS = 50


class ReplaySource:
    """The measurements Prometheus gave, answered again by pod uid (UsageSource)."""

    def __init__(self, measured: Mapping[str, PodMeasurement]) -> None:
        self.measured = dict(measured)

    async def measure_pods(self, targets: Sequence[PodWindow]) -> Mapping[str, PodMeasurement]:
        return {t.uid: self.measured[t.uid] for t in targets if t.uid in self.measured}


class StatementCounter:
    """Statements the engine sends (SQLAlchemy's before_cursor_execute: an executemany counts once)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.count = 0
        sa.event.listen(engine.sync_engine, "before_cursor_execute", self._seen)

    def _seen(self, *_args: object) -> None:
        self.count += 1


def db_records(
    traces: Sequence[metricgen.PodTrace], families: int, offset: int
) -> tuple[list[JobRecord], list[PodRecord]]:
    """One job per trace, of family `(offset + i) % families` in that family's namespace."""
    jobs, pods = [], []
    for i, trace in enumerate(traces):
        family = (offset + i) % families
        namespace = f"team-{family % 12:02d}"
        owner = f"user-{family % OWNERS:02d}@example.com"
        start, end = datetime.fromtimestamp(trace.start, UTC), datetime.fromtimestamp(trace.end, UTC)
        gpus = len(trace.gpus)
        job_uid = f"job-{trace.uid}"
        jobs.append(
            JobRecord(
                cluster=DB_CLUSTER,
                uid=job_uid,
                namespace=namespace,
                name=f"train-{family:03d}-{i:05d}",
                kind=WorkloadKind.JOB,
                status=JobStatus.SUCCEEDED,
                owner=owner,
                team=namespace,
                notify=NotifyMode.ALWAYS,
                channels=("email",),
                family=f"train-{family:03d}",
                created_at=start - timedelta(seconds=30),
                started_at=start,
                finished_at=end,
                requested=Requested(gpus=float(gpus), cpu_cores=16.0, memory_bytes=256 * GIB),
            )
        )
        pods.append(
            PodRecord(
                cluster=DB_CLUSTER,
                uid=trace.uid,
                namespace=namespace,
                name=trace.name,
                job_uid=job_uid,
                phase="Succeeded",
                created_at=start - timedelta(seconds=20),
                node=trace.gpus[0].gpu.host if trace.gpus else None,
                scheduled_at=start - timedelta(seconds=10),
                started_at=start,
                finished_at=end,
                gpu_equivalents=float(gpus),
                containers=(
                    ContainerRecord(
                        name="main",
                        requests={"cpu": 16, "memory": 256 * GIB, "nvidia.com/gpu": gpus},
                        limits={"nvidia.com/gpu": gpus},
                    ),
                ),
            )
        )
    return jobs, pods


async def store_finished(store: Store, jobs: Sequence[JobRecord], pods: Sequence[PodRecord]) -> None:
    """The jobs and their pods as ingestion leaves them: ended, awaiting usage from their end."""
    marks = [
        TerminalMark(j.uid, j.finished_at, SummaryState.AWAITING_USAGE, j.finished_at)
        for j in jobs
        if j.finished_at is not None
    ]
    async with store.jobs.ingest_transaction() as tx:
        await tx.write(DB_CLUSTER, jobs, pods, marks)


async def db_collector(store: Store, measured: Mapping[str, PodMeasurement], now: datetime) -> UsageCollector:
    """The collector as the service composes it, its planner's directory read already (a running
    service reads it whole once, then only its version before each use)."""
    planner = DirectoryPlanner(store, frozenset({"email"}), 60.0, lambda: now)
    await planner.directory()
    options = CollectorOptions(batch_size=len(measured), cluster=DB_CLUSTER)
    return UsageCollector(store, ReplaySource(measured), RightsizingPolicy(), planner, options, lambda: now)


async def prepare_db(
    url: str,
    history: Sequence[metricgen.PodTrace],
    due: Sequence[metricgen.PodTrace],
    measured: Mapping[str, PodMeasurement],
    families: int,
    now: datetime,
) -> None:
    """A migrated database holding the earlier runs summarized and the `due` jobs awaiting usage."""
    await migrate(url)
    store = Store.from_url(url)
    try:
        await store.directory.upsert_users(
            [DirectoryUser(f"user-{i:02d}@example.com") for i in range(OWNERS)]
        )
        await store_finished(store, *db_records(history, families, 0))
        # The earlier runs are summarized by the collector itself: usage, advice and adoption rows
        # as the service writes them.
        collector = await db_collector(store, measured, now)
        while await collector.run_once(now):
            pass
        await store_finished(store, *db_records(due, families, len(history)))
    finally:
        await store.close()


async def outbox_rows(store: Store) -> int:
    async with store.read() as conn:
        return int((await conn.execute(sa.select(sa.func.count()).select_from(outbox))).scalar_one())


async def db_round(url: str, measured: Mapping[str, PodMeasurement], now: datetime) -> dict[str, float]:
    """One round of the collector over the stored due jobs: its statements and wall time."""
    store = Store.from_url(url)
    try:
        collector = await db_collector(store, measured, now)
        queued = await outbox_rows(store)
        counter = StatementCounter(store.engine)
        t0 = time.perf_counter()
        settled = await collector.run_once(now)
        seconds = time.perf_counter() - t0
        queries = counter.count
        queued = await outbox_rows(store) - queued
    finally:
        await store.close()
    return {"jobs": settled, "queries": queries, "seconds": seconds, "outbox_rows": queued}


async def _admin(admin_url: str, sql: str) -> None:
    url = make_url(admin_url).set(drivername="postgresql")
    conn = await asyncpg.connect(url.render_as_string(hide_password=False))
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


async def create_postgres_database(label: str, admin_url: str) -> str:
    """A new, empty database on the admin URL's server; returns its SQLAlchemy URL."""
    name = f"inno_bench_{label}_{uuid.uuid4().hex[:10]}"
    await _admin(admin_url, f'CREATE DATABASE "{name}"')
    return make_url(admin_url).set(database=name).render_as_string(hide_password=False)


async def drop_postgres_database(url: str, admin_url: str) -> None:
    await _admin(admin_url, f'DROP DATABASE IF EXISTS "{make_url(url).database}" WITH (FORCE)')


async def db_rounds(
    url: str,
    args: argparse.Namespace,
    history: Sequence[metricgen.PodTrace],
    due: Sequence[metricgen.PodTrace],
) -> dict[str, float]:
    """`--db-repeats` rounds, each on a database of its own prepared the same way."""
    client = PrometheusClient(ClientConfig(url=url, timeout_seconds=120))
    meter = UsageMeter(client, MeterConfig(scrape_interval_seconds=args.scrape))
    windows = [metricgen.window(t) for t in (*history, *due)]
    measured = dict(await meter.measure_pods(windows))
    client.close()
    now = datetime.fromtimestamp(max(t.end for t in due), UTC) + timedelta(minutes=10)
    rounds = []
    with tempfile.TemporaryDirectory(prefix="usage-bench-") as tmp:
        for i in range(args.db_repeats):
            if args.database == "sqlite":
                db_url = f"sqlite+aiosqlite:///{tmp}/round-{i}.db"
            else:
                db_url = await create_postgres_database("bench", args.postgres_url)
            try:
                await prepare_db(db_url, history, due, measured, args.families, now)
                load = os.getloadavg()[0]
                rounds.append({**await db_round(db_url, measured, now), "load": load})
            finally:
                if args.database == "postgres":
                    await drop_postgres_database(db_url, args.postgres_url)
    middle = sorted(rounds, key=lambda r: r["seconds"])[len(rounds) // 2]
    return {
        "db_jobs_settled": int(middle["jobs"]),
        "db_family_runs_stored": len(history),
        "db_queries_per_round": int(middle["queries"]),
        "db_round_seconds": middle["seconds"],
        "db_round_seconds_min": min(r["seconds"] for r in rounds),
        "db_round_seconds_max": max(r["seconds"] for r in rounds),
        "db_round_load_1min": middle["load"],
        "db_outbox_rows": int(middle["outbox_rows"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--gpus", type=int, default=256)
    parser.add_argument("--days", type=float, default=7.0)
    parser.add_argument("--scrape", type=float, default=60.0, help="seconds between generated samples")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--repeats",
        type=int,
        default=7,
        help="batched rounds timed (median reported), loop parts between them",
    )
    parser.add_argument("--cache", type=Path, default=Path("/tmp/inno-notify-bench"))
    parser.add_argument(
        "--no-compression", action="store_true", help="ask Prometheus for uncompressed answers (both sides)"
    )
    parser.add_argument(
        "--database",
        choices=("sqlite", "postgres", "none"),
        default="sqlite",
        help="where the usage round's database part runs (none: Prometheus only)",
    )
    parser.add_argument(
        "--postgres-url",
        default="postgresql+asyncpg://postgres@127.0.0.1:5432/postgres",
        help="an admin database of the server on which each round gets a database of its own",
    )
    parser.add_argument("--families", type=int, default=100, help="job families the round's jobs belong to")
    parser.add_argument(
        "--family-runs",
        type=int,
        default=4,
        help="earlier measured runs of each family, stored before the round",
    )
    parser.add_argument("--db-repeats", type=int, default=3, help="database rounds timed (median reported)")
    parser.add_argument(
        "--db-only", action="store_true", help="skip the batched-versus-loop Prometheus comparison"
    )
    parser.add_argument("--gc-defaults", action="store_true", help="CPython's GC thresholds, not serve's")
    args = parser.parse_args()
    if not args.gc_defaults:
        tune_for_ingest()  # as `serve` does: the round runs in that process
    if not HAVE_PROMETHEUS:
        sys.exit("prometheus and promtool are needed (apt-get install prometheus)")

    gpus, pods = workload(args.gpus, args.days, args.seed)
    tsdb = args.cache / f"usage-g{args.gpus}-d{args.days:g}-s{args.scrape:g}-r{args.seed}" / "tsdb"
    samples = "cached"
    build_seconds = 0.0
    if not (tsdb / ".complete").exists():
        t0 = time.perf_counter()
        tsdb.parent.mkdir(parents=True, exist_ok=True)
        openmetrics = tsdb.parent / "data.om"
        end = START + args.days * 86400
        _, written = metricgen.generate(openmetrics, gpus, pods, start=START, end=end, scrape=args.scrape)
        backfill(openmetrics, tsdb)
        openmetrics.unlink()
        (tsdb / ".complete").write_text(str(written))
        samples = str(written)
        build_seconds = time.perf_counter() - t0
    else:
        samples = (tsdb / ".complete").read_text()

    ordered = sorted(pods, key=lambda p: p.end)
    finished = ordered[-args.jobs :]
    history = ordered[-(args.jobs + args.families * args.family_runs) : -args.jobs]
    targets = [metricgen.window(p) for p in finished]
    print(f"gpus={args.gpus}")
    print(f"days={args.days:g}")
    print(f"scrape_seconds={args.scrape:g}")
    print(f"pods_in_tsdb={len(pods)}")
    print(f"samples_in_tsdb={samples}")
    print(f"tsdb_build_seconds={build_seconds:.1f}")
    print(f"jobs={len(targets)}")
    print(f"compression={'off' if args.no_compression else 'gzip'}")
    print(f"database={args.database}")
    print(f"gc_thresholds={'defaults' if args.gc_defaults else 'serve'}")
    print(f"round_span_hours={(finished[-1].end - finished[0].end) / 3600:.1f}")
    with PrometheusServer(tsdb) as server:
        # The machine may be shared: the load beside the figures says how far to trust them.
        print(f"load_1min_before={os.getloadavg()[0]:.2f}")
        assert server.pid is not None
        clock = CpuClock(server.pid)
        figures: dict[str, float] = {}
        if not args.db_only:
            figures = asyncio.run(
                run(server.url, targets, args.scrape, args.repeats, clock, compress=not args.no_compression)
            )
        if args.database != "none":
            figures.update(asyncio.run(db_rounds(server.url, args, history, finished)))
        print(f"load_1min_after={os.getloadavg()[0]:.2f}")
    for name, value in figures.items():
        print(f"{name}={value:.3f}" if isinstance(value, float) else f"{name}={value}")


if __name__ == "__main__":
    main()
