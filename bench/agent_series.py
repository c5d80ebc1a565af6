"""Benchmark: what the node agent's series add to a usage round.

``--gpus`` GPUs over ``--days`` days, each running 1–4 h single-GPU jobs back to back; every other
GPU is time-sliced by a second stream of jobs (dcgm-exporter gives both tenants the whole GPU's
figures, as with virtual GPUs on). Two real Prometheus servers hold the same dcgm-exporter and
cAdvisor series; the second also holds the node agent's (device series on every GPU, per-process
series for every job). The ``--jobs`` most recently finished jobs are measured as one round on each
(``UsageMeter.measure_pods``), ``--repeats`` times alternately after one warm-up round each:
``seconds``/``cpu_seconds`` are the medians with the agent's series, ``baseline_*`` without them
(where the agent's probe finds nothing and nothing more is asked). ``cpu_seconds`` adds up the CPU
time of that Prometheus and of this process (Linux ``/proc``); ``load_1min_*`` say how busy the
machine was. Prints ``name=value`` lines.

    .venv/bin/python bench/agent_series.py [--jobs 200 --gpus 64 --days 1 --scrape 60]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from inno_notify.adapters.prometheus.batching import PodWindow
from inno_notify.adapters.prometheus.client import ClientConfig, PrometheusClient
from inno_notify.adapters.prometheus.measure import MeterConfig, UsageMeter
from inno_notify.domain.model import GPU_SOURCE_AGENT
from tests.adapters.prometheus import agentgen, metricgen
from tests.adapters.prometheus.promserver import HAVE_PROMETHEUS, PrometheusServer, backfill

GIB = 1024**3
START = datetime(2025, 1, 6, tzinfo=UTC).timestamp()


def constant(value: float) -> metricgen.Signal:
    return lambda _t: value


def workload(
    gpus_total: int, days: float, seed: int
) -> tuple[list[metricgen.Gpu], list[metricgen.PodTrace], list[agentgen.AgentProcess]]:
    rng = random.Random(seed)
    end = START + days * 86400
    gpus = [
        metricgen.Gpu(f"node-{i // 8:03d}", i % 8, f"GPU-{i:06d}", has_prof=False, reports_fb_free=False)
        for i in range(gpus_total)
    ]
    pods: list[metricgen.PodTrace] = []
    processes: list[agentgen.AgentProcess] = []
    for index, gpu in enumerate(gpus):
        agent_gpu = agentgen.AgentGpu(gpu.host, gpu.index, gpu.uuid)
        for _stream in range(2 if index % 2 == 0 else 1):
            t = START + rng.uniform(0, 3600)
            while True:
                length = rng.uniform(3600, 4 * 3600)
                if t + length > end - 600:
                    break
                n = len(pods) + 1
                util, memory = rng.uniform(0, 60), rng.uniform(1, 30) * GIB
                pod = metricgen.PodTrace(
                    namespace=f"team-{rng.randrange(12):02d}",
                    name=f"job-{n:05d}-{rng.randrange(16**5):05x}",
                    uid=f"{n:08x}-0000-4000-8000-{n:012x}",
                    start=t,
                    end=t + length,
                    gpus=[metricgen.GpuUse(gpu, constant(util), constant(memory / 2**20))],
                    containers=[metricgen.Container("main", constant(8 * GIB), constant(2.0))],
                    pod_cgroup_series=False,
                )
                pods.append(pod)
                processes.append(
                    agentgen.AgentProcess(
                        pod.namespace, pod.name, "main", agent_gpu, t + 60, t + length - 30,
                        constant(memory), constant(util),
                    )
                )  # fmt: skip
                t += length + rng.uniform(60, 1800)
    return gpus, pods, processes


class CpuClock:
    """CPU seconds of one Prometheus and of this process together."""

    def __init__(self, prometheus_pid: int) -> None:
        self._stat = Path(f"/proc/{prometheus_pid}/stat")
        self._tick = os.sysconf("SC_CLK_TCK")

    def __call__(self) -> float:
        fields = self._stat.read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / self._tick + time.process_time()


async def rounds(
    servers: dict[str, PrometheusServer], targets: list[PodWindow], scrape: float, repeats: int
) -> dict[str, float]:
    meters = {
        name: UsageMeter(PrometheusClient(ClientConfig(url=s.url, timeout_seconds=120)), MeterConfig(scrape))
        for name, s in servers.items()
    }
    clocks = {name: CpuClock(s.pid or 0) for name, s in servers.items()}
    timings: dict[str, list[float]] = {name: [] for name in servers}
    cpu: dict[str, list[float]] = {name: [] for name in servers}
    results = {}
    for name, meter in meters.items():
        results[name] = await meter.measure_pods(targets)  # warm-up: pages in, learns spellings
    for _ in range(repeats):
        for name, meter in meters.items():
            c0, t0 = clocks[name](), time.perf_counter()
            results[name] = await meter.measure_pods(targets)
            timings[name].append(time.perf_counter() - t0)
            cpu[name].append(clocks[name]() - c0)
    figures: dict[str, float] = {}
    for name, prefix in (("agent", ""), ("plain", "baseline_")):
        figures[f"{prefix}seconds"] = statistics.median(timings[name])
        figures[f"{prefix}cpu_seconds"] = statistics.median(cpu[name])
        kinds: Counter[str] = meters[name].last_queries_by_kind
        figures[f"{prefix}queries"] = sum(kinds.values())
        for kind in ("agent_probe", "agent", "agent_sum", "agent_window"):
            figures[f"{prefix}queries_{kind}"] = kinds[kind]
        meters[name].client.close()
    figures["ratio_seconds"] = figures["seconds"] / figures["baseline_seconds"]
    figures["ratio_cpu_seconds"] = figures["cpu_seconds"] / figures["baseline_cpu_seconds"]
    agent_rows = [g for m in results["agent"].values() for g in m.gpus if g.source == GPU_SOURCE_AGENT]
    figures["pods_with_agent_rows"] = len({g.pod_uid for g in agent_rows})
    figures["shared_gpu_rows"] = sum(1 for m in results["agent"].values() for g in m.gpus if g.shared)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--gpus", type=int, default=64)
    parser.add_argument("--days", type=float, default=1.0)
    parser.add_argument("--scrape", type=float, default=60.0, help="seconds between generated samples")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    if not HAVE_PROMETHEUS:
        sys.exit("prometheus and promtool are needed (apt-get install prometheus)")
    gpus, pods, processes = workload(args.gpus, args.days, args.seed)
    end = START + args.days * 86400
    finished = sorted(pods, key=lambda p: p.end)[-args.jobs :]
    targets = [metricgen.window(p) for p in finished]
    with tempfile.TemporaryDirectory(prefix="agent-series-bench-") as tmp:
        base = Path(tmp)
        plain, with_agent = base / "plain.om", base / "agent.om"
        t0 = time.perf_counter()
        metricgen.generate(plain, gpus, pods, start=START, end=end, scrape=args.scrape)
        with_agent.write_text(plain.read_text())
        agentgen.append(
            with_agent,
            [agentgen.AgentGpu(g.host, g.index, g.uuid) for g in gpus],
            processes,
            start=START,
            end=end,
            scrape=args.scrape,
        )
        backfill(plain, base / "plain")
        backfill(with_agent, base / "agent")
        print(f"gpus={args.gpus}")
        print(f"days={args.days:g}")
        print(f"scrape_seconds={args.scrape:g}")
        print(f"pods_in_tsdb={len(pods)}")
        print(f"jobs={len(targets)}")
        print(f"tsdb_build_seconds={time.perf_counter() - t0:.1f}")
        with (
            PrometheusServer(base / "agent") as agent_server,
            PrometheusServer(base / "plain") as plain_server,
        ):
            print(f"load_1min_before={os.getloadavg()[0]:.2f}")
            figures = asyncio.run(
                rounds({"agent": agent_server, "plain": plain_server}, targets, args.scrape, args.repeats)
            )
            print(f"load_1min_after={os.getloadavg()[0]:.2f}")
    for name, value in figures.items():
        print(f"{name}={value:.3f}" if isinstance(value, float) else f"{name}={value}")


if __name__ == "__main__":
    main()
