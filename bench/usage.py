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
less than the wall clock; ``load_1min_*`` say how busy the machine was.

The TSDB is cached under ``--cache`` (keyed by the parameters); the first run builds it (minutes).

    .venv/bin/python bench/usage.py [--jobs 500 --gpus 256 --days 7 --scrape 60]
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
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from inno_notify.adapters.prometheus.batching import PodWindow
from inno_notify.adapters.prometheus.client import ClientConfig, PrometheusClient
from inno_notify.adapters.prometheus.measure import MeterConfig, PodMeasurement, UsageMeter
from inno_notify.domain.model import GpuUsage, PodUsage
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
    args = parser.parse_args()
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

    finished = sorted(pods, key=lambda p: p.end)[-args.jobs :]
    targets = [
        PodWindow(
            p.namespace,
            p.name,
            p.uid,
            datetime.fromtimestamp(p.start, UTC),
            datetime.fromtimestamp(p.end, UTC),
        )
        for p in finished
    ]
    print(f"gpus={args.gpus}")
    print(f"days={args.days:g}")
    print(f"scrape_seconds={args.scrape:g}")
    print(f"pods_in_tsdb={len(pods)}")
    print(f"samples_in_tsdb={samples}")
    print(f"tsdb_build_seconds={build_seconds:.1f}")
    print(f"jobs={len(targets)}")
    print(f"compression={'off' if args.no_compression else 'gzip'}")
    print(f"round_span_hours={(finished[-1].end - finished[0].end) / 3600:.1f}")
    with PrometheusServer(tsdb) as server:
        # The machine may be shared: the load beside the figures says how far to trust them.
        print(f"load_1min_before={os.getloadavg()[0]:.2f}")
        assert server.pid is not None
        clock = CpuClock(server.pid)
        figures = asyncio.run(
            run(server.url, targets, args.scrape, args.repeats, clock, compress=not args.no_compression)
        )
        print(f"load_1min_after={os.getloadavg()[0]:.2f}")
    for name, value in figures.items():
        print(f"{name}={value:.3f}" if isinstance(value, float) else f"{name}={value}")


if __name__ == "__main__":
    main()
