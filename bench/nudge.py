"""Benchmark: the live check's PromQL round over --pods running GPU pods, batched versus one pod at a time.

A real Prometheus holds generated dcgm-exporter series (metricgen, backfilled by promtool) for
--pods running pods of 1, 2 or 4 GPUs over --hours hours, the last sample at the moment asked
about: pods busy throughout, idle from the start, busy and then idle for the last hours, idle for
less than the window, idle with GPU memory held, half their GPUs idle, MIG slices. The same pods
are observed twice in the same run, through the same client and the same code
(`LiveMeter.observe`): once as one round over all of them (the window query, then the detail of
the pods with a GPU below the threshold, one query per age class), and once the naive way, one
`observe` per pod in a loop (its window query lists that one pod; a pod with an idle GPU adds its
detail query). Both must decide the same pods idle, since the same time (within the step "last
busy" is read at).

Prints `name=value` lines: `seconds` is the median of --repeats batched rounds after a warm-up
round, `baseline_seconds` one pass of the loop, cut into --repeats parts that alternate with the
rounds (a shared machine's load drifts; this way both see the same drift); `cpu_seconds` and
`baseline_cpu_seconds` add up the CPU time of Prometheus and of this process over the same spans
(Linux `/proc`): the work, which load on a shared machine stretches less than the wall clock;
`load_1min_*` say how busy the machine was. The `steady_*` figures are the rounds after it: the
idle pods were nudged, and the live check leaves them out for `live.repeat_hours`, so the others
are asked about again (the batched round is then the window query alone).

The TSDB is cached under --cache (keyed by the parameters); the first run builds it (a minute or two).

    .venv/bin/python bench/nudge.py [--pods 1000 --hours 8 --scrape 30 --repeats 5]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import random
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from inno_notify.adapters.prometheus.batching import PodWindow
from inno_notify.adapters.prometheus.client import ClientConfig, PrometheusClient
from inno_notify.adapters.prometheus.live_meter import IDENTITY_ENCODING, LiveConfig, LiveMeter, LiveTarget
from inno_notify.adapters.prometheus.queries import GPU_UTIL, GR_ENGINE_ACTIVE, regex_alternation
from inno_notify.domain.live import GpuWindow, IdleFinding, IdlePolicy, find_idle
from inno_notify.domain.model import JobRecord, JobStatus, PodRecord, WorkloadKind
from tests.adapters.prometheus import metricgen
from tests.adapters.prometheus.promserver import HAVE_PROMETHEUS, PrometheusServer, backfill

START = datetime(2025, 1, 6, tzinfo=UTC).timestamp()
WINDOW = 3600.0
THRESHOLD = 5.0
Signal = Callable[[float], float]


def constant(value: float) -> Signal:
    return lambda _t: value


def until(moment: float, level: float) -> Signal:
    return lambda t: level if t < moment else 0.0


BEHAVIOURS = (
    # (name, share of pods)
    ("busy", 0.45),
    ("idle_from_start", 0.15),
    ("busy_then_idle", 0.15),
    ("idle_briefly", 0.10),
    ("memory_held", 0.05),
    ("half_idle", 0.05),
    ("mig_idle", 0.05),
)


def workload(
    n_pods: int, hours: float, seed: int
) -> tuple[list[metricgen.Gpu], list[metricgen.PodTrace], float]:
    """The GPUs and running pods, and the moment they are asked about (the data's last sample)."""
    rng = random.Random(seed)
    now = START + hours * 3600
    gpus: list[metricgen.Gpu] = []
    pods: list[metricgen.PodTrace] = []
    names = [b for b, _ in BEHAVIOURS]
    weights = [w for _, w in BEHAVIOURS]
    for n in range(n_pods):
        behaviour = rng.choices(names, weights)[0]
        size = 1 if behaviour == "mig_idle" else rng.choice([1, 1, 1, 2, 2, 4])
        if behaviour == "half_idle":
            size = 4
        host = f"node-{n // 4:04d}"
        if behaviour == "mig_idle":
            held = [
                metricgen.Gpu(
                    host,
                    0,
                    f"GPU-{n:06d}",
                    fb_total_mib=40192,
                    mig_profile="3g.40gb",
                    mig_instance=1,
                    reports_fb_free=False,
                )
            ]
        else:
            # A fifth of the cards report GR_ENGINE_ACTIVE too (the profiling module), as Hopper and
            # Ampere nodes with DCGM profiling do; the rest GPU_UTIL alone.
            prof = rng.random() < 0.2
            held = [
                metricgen.Gpu(host, i, f"GPU-{n:06d}-{i}", has_prof=prof, reports_fb_free=False)
                for i in range(size)
            ]
        gpus.extend(held)
        start = now - rng.uniform(2.5, hours - 0.1) * 3600
        level = rng.uniform(30, 95)
        ctx = constant(300.0)
        if behaviour == "busy":
            uses = [metricgen.GpuUse(g, constant(level), constant(20000.0)) for g in held]
        elif behaviour in ("idle_from_start", "mig_idle"):
            uses = [metricgen.GpuUse(g, constant(0.0), ctx) for g in held]
        elif behaviour == "busy_then_idle":
            stop = now - rng.uniform(1.2, 2.0) * 3600
            uses = [metricgen.GpuUse(g, until(stop, level), ctx) for g in held]
        elif behaviour == "idle_briefly":
            stop = now - rng.uniform(0.1, 0.8) * 3600
            uses = [metricgen.GpuUse(g, until(stop, level), ctx) for g in held]
        elif behaviour == "memory_held":
            uses = [metricgen.GpuUse(g, constant(0.0), constant(rng.uniform(4000, 60000))) for g in held]
        else:
            uses = [
                metricgen.GpuUse(g, constant(level if i < 2 else 0.0), constant(20000.0 if i < 2 else 300.0))
                for i, g in enumerate(held)
            ]
        pods.append(
            metricgen.PodTrace(
                namespace=f"team-{rng.randrange(20):02d}",
                name=f"pod-{n:05d}-{rng.randrange(16**5):05x}",
                uid=f"{n:08x}-0000-4000-8000-{n:012x}",
                start=start,
                end=now + 1,
                gpus=uses,
            )
        )
    return gpus, pods, now


class CpuClock:
    """CPU seconds spent by Prometheus and by this process together: a busy shared machine stretches
    wall-clock time, far less the work done."""

    def __init__(self, prometheus_pid: int) -> None:
        self._stat = Path(f"/proc/{prometheus_pid}/stat")
        self._tick = os.sysconf("SC_CLK_TCK")

    def __call__(self) -> float:
        fields = self._stat.read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / self._tick + time.process_time()


def records(trace: metricgen.PodTrace) -> tuple[JobRecord, PodRecord]:
    start = datetime.fromtimestamp(trace.start, UTC)
    job = JobRecord(
        "bench", trace.uid, trace.namespace, trace.name, kind=WorkloadKind.POD, status=JobStatus.RUNNING
    )
    mig = trace.gpus[0].gpu.mig_profile is not None
    pod = PodRecord(
        "bench",
        trace.uid,
        trace.namespace,
        trace.name,
        trace.uid,
        "Running",
        start,
        scheduled_at=start,
        gpu_equivalents=3 / 7 if mig else float(len(trace.gpus)),
    )
    return job, pod


def decide(
    pods: list[metricgen.PodTrace], seen: dict[str, tuple[GpuWindow, ...]], now: datetime, scrape: float
) -> dict[str, IdleFinding]:
    policy = IdlePolicy(WINDOW, THRESHOLD, scrape)
    found = {}
    for trace in pods:
        job, pod = records(trace)
        finding = find_idle(job, pod, seen.get(trace.uid, ()), now, policy, now - timedelta(days=7))
        if finding is not None:
            found[trace.uid] = finding
    return found


async def one_query_per_pod(
    meter: LiveMeter, target: LiveTarget, now: datetime, config: LiveConfig
) -> dict[str, tuple[GpuWindow, ...]]:
    """The naive way, one query per pod: the window and the detail of this one pod in one query,
    its last busy sample read at the fine step over its own life (no coarse pass to refine). Built
    from the live meter's own query builders, so both ways ask the same PromQL of each series."""
    at = now.timestamp()
    step = round(config.busy_step_seconds)
    age = (now - target.held_from).total_seconds()
    lookback = step * math.ceil((min(age, config.lookback_seconds) + step) / step)
    window = PodWindow(target.namespace, target.pod, target.uid, target.held_from, now)
    pod, namespace = regex_alternation([target.pod]), regex_alternation([target.namespace])
    promql = " or ".join(
        [
            meter._window_query(pod, namespace, round(WINDOW), at),
            meter._detail_query(
                {GPU_UTIL: [window], GR_ENGINE_ACTIVE: [window]},
                window=round(WINDOW),
                lookback=lookback,
                step=step,
                at=at,
                threshold=THRESHOLD,
            ),
        ]
    )
    gpus = meter._assemble([target], await meter.client.query(promql), create=True)
    return {
        uid: tuple(gpu.window() for _, gpu in sorted(per_gpu.items()))
        for uid, per_gpu in gpus.items()
        if any(gpu.below(THRESHOLD) for gpu in per_gpu.values())
    }


Way = Callable[[LiveTarget], Awaitable[dict[str, tuple[GpuWindow, ...]]]]


async def run(
    url: str,
    pods: list[metricgen.PodTrace],
    now: datetime,
    scrape: float,
    repeats: int,
    compress: bool,
    cpu: CpuClock,
) -> dict[str, object]:
    targets = [LiveTarget(p.namespace, p.name, p.uid, datetime.fromtimestamp(p.start, UTC)) for p in pods]
    config = LiveConfig(scrape_interval_seconds=scrape)
    # As the service's live meter asks (build_live_meter), unless --compression.
    headers = {} if compress else IDENTITY_ENCODING

    def meter() -> LiveMeter:
        return LiveMeter(
            PrometheusClient(ClientConfig(url=url, timeout_seconds=120, headers=headers)), config
        )

    batched_meter, single_meter, same_meter = meter(), meter(), meter()
    ways: dict[str, Way] = {
        # As specified: one query per pod.
        "baseline": lambda t: one_query_per_pod(single_meter, t, now, config),
        # The round's own code, one pod at a time (a pod with an idle GPU costs it 2-3 queries).
        "same_code": lambda t: same_meter.observe([t], now, WINDOW, THRESHOLD, listed=True),
    }
    # Warm-up: Prometheus pages the blocks in.
    batched = await batched_meter.observe(targets, now, WINDOW, THRESHOLD)
    queries = batched_meter.last_queries

    timings: list[float] = []
    cpu_timings: list[float] = []
    spent = {name: [0.0, 0.0] for name in ways}  # wall, CPU
    seen: dict[str, dict[str, tuple[GpuWindow, ...]]] = {name: {} for name in ways}
    for part in [targets[i::repeats] for i in range(repeats)]:
        c0, t0 = cpu(), time.perf_counter()
        batched = await batched_meter.observe(targets, now, WINDOW, THRESHOLD)
        timings.append(time.perf_counter() - t0)
        cpu_timings.append(cpu() - c0)
        assert batched_meter.last_queries == queries
        for name, way in ways.items():
            c0, t0 = cpu(), time.perf_counter()
            for target in part:
                seen[name].update(await way(target))
            spent[name][0] += time.perf_counter() - t0
            spent[name][1] += cpu() - c0
    sent = {"baseline": single_meter.client.queries_sent, "same_code": same_meter.client.queries_sent}
    found = decide(pods, batched, now, scrape)
    # "Last busy" is read to the fine step every way.
    tolerance = config.busy_step_seconds
    agree = {}
    for name in ways:
        other = decide(pods, seen[name], now, scrape)
        agree[name] = found.keys() == other.keys() and all(
            abs((found[uid].idle_since - other[uid].idle_since).total_seconds()) <= tolerance
            and len(found[uid].idle) == len(other[uid].idle)
            for uid in found
        )

    # The next rounds: the idle pods were nudged and the live check leaves them out until
    # live.repeat_hours have passed; the rest are asked about again (same interleaving).
    rest = [t for t in targets if t.uid not in found]
    steady_timings: list[float] = []
    steady_baseline = 0.0
    before = single_meter.client.queries_sent
    for part in [rest[i::repeats] for i in range(repeats)]:
        t0 = time.perf_counter()
        await batched_meter.observe(rest, now, WINDOW, THRESHOLD)
        steady_timings.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        for target in part:
            await ways["baseline"](target)
        steady_baseline += time.perf_counter() - t0
    steady_queries = batched_meter.last_queries
    steady_baseline_queries = single_meter.client.queries_sent - before
    for m in (batched_meter, single_meter, same_meter):
        m.client.close()

    seconds = statistics.median(timings)
    cpu_seconds = statistics.median(cpu_timings)
    figures: dict[str, object] = {"queries": queries, "seconds": seconds}
    figures |= {"seconds_min": min(timings), "seconds_max": max(timings), "cpu_seconds": cpu_seconds}
    for name in ways:
        wall, used = spent[name]
        figures |= {
            f"{name}_queries": sent[name],
            f"{name}_seconds": wall,
            f"{name}_cpu_seconds": used,
            f"{name}_agree": agree[name],
        }
    figures |= {
        "speedup": spent["baseline"][0] / seconds,
        "cpu_speedup": spent["baseline"][1] / cpu_seconds,
        "same_code_speedup": spent["same_code"][0] / seconds,
        "steady_pods": len(rest),
        "steady_queries": steady_queries,
        "steady_seconds": statistics.median(steady_timings),
        "steady_baseline_queries": steady_baseline_queries,
        "steady_baseline_seconds": steady_baseline,
        "steady_speedup": steady_baseline / statistics.median(steady_timings),
        "idle_pods": len(found),
        "memory_held_pods": sum(1 for f in found.values() if f.memory_held),
    }
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--hours", type=float, default=8.0)
    parser.add_argument("--scrape", type=float, default=30.0, help="seconds between generated samples")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cache", type=Path, default=Path("/tmp/inno-notify-bench"))
    parser.add_argument("--compression", action="store_true", help="ask for gzip answers (both sides)")
    args = parser.parse_args()
    if not HAVE_PROMETHEUS:
        sys.exit("prometheus and promtool are needed (apt-get install prometheus)")

    gpus, pods, now = workload(args.pods, args.hours, args.seed)
    tsdb = args.cache / f"nudge-p{args.pods}-h{args.hours:g}-s{args.scrape:g}-r{args.seed}" / "tsdb"
    build_seconds = 0.0
    if not (tsdb / ".complete").exists():
        t0 = time.perf_counter()
        tsdb.parent.mkdir(parents=True, exist_ok=True)
        openmetrics = tsdb.parent / "data.om"
        _, written = metricgen.generate(
            openmetrics, gpus, pods, start=START, end=now + 1, scrape=args.scrape, idle_scrape=args.scrape
        )
        backfill(openmetrics, tsdb)
        openmetrics.unlink()
        (tsdb / ".complete").write_text(str(written))
        build_seconds = time.perf_counter() - t0
    samples = (tsdb / ".complete").read_text()
    print(f"pods={len(pods)}")
    print(f"gpus={len(gpus)}")
    print(f"hours={args.hours:g}")
    print(f"scrape_seconds={args.scrape:g}")
    print(f"samples_in_tsdb={samples}")
    print(f"tsdb_build_seconds={build_seconds:.1f}")
    print(f"compression={'gzip' if args.compression else 'off'}")
    with PrometheusServer(tsdb) as server:
        print(f"load_1min_before={os.getloadavg()[0]:.2f}")
        figures = asyncio.run(
            run(
                server.url,
                pods,
                datetime.fromtimestamp(now, UTC),
                args.scrape,
                args.repeats,
                args.compression,
                CpuClock(server.pid or 0),
            )
        )
        print(f"load_1min_after={os.getloadavg()[0]:.2f}")
    for name, value in figures.items():
        print(f"{name}={value:.3f}" if isinstance(value, float) else f"{name}={value}")


if __name__ == "__main__":
    main()
