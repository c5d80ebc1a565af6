"""The cluster the integration tests query: days of background work on dozens of GPUs, then one round
of finished pods that each exercise one rule (idle GPUs, a memory spike, a job shorter than a
scrape, MIG, time-slicing, a retry, a reused pod name)."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from datetime import UTC, datetime

from tests.adapters.prometheus.metricgen import Container, Gpu, GpuUse, PodTrace, Signal

GIB = 1024**3
SCRAPE = 15.0
DAY = 86400.0
# A fixed Monday: the data is the same on every run, whatever the clock says.
START = datetime(2025, 1, 6, tzinfo=UTC).timestamp()


def uid(n: int) -> str:
    return f"{n:08x}-0000-4000-8000-{n:012x}"


def const(v: float) -> Signal:
    return lambda t: v


def wave(level: float) -> Signal:
    """Utilisation swinging 5 points either side of `level` (a 30-minute period)."""
    return lambda t: level + 5 * math.sin(t / 300)


@dataclass(frozen=True)
class Cluster:
    gpus: list[Gpu]
    background: list[PodTrace]
    round: list[PodTrace]
    start: float
    end: float

    def by_name(self, name: str) -> PodTrace:
        return next(p for p in self.round if p.name == name)


def build(days: float = 3.0, nodes: int = 3, seed: int = 7) -> Cluster:
    rng = random.Random(seed)
    end = START + days * DAY
    gpus: list[Gpu] = []
    for n in range(nodes):
        host = f"gpu-node-{n}"
        for i in range(8):
            if n == 1:
                gpus.append(
                    Gpu(
                        host,
                        i,
                        f"GPU-{n:02d}{i:02d}-t4",
                        model="Tesla T4",
                        fb_total_mib=15360,
                        has_prof=False,
                    )
                )
            elif n == 2 and i == 0:
                for gi in (1, 2):
                    gpus.append(
                        Gpu(
                            host,
                            0,
                            "GPU-0200-a100",
                            fb_total_mib=40192,
                            mig_profile="3g.40gb",
                            mig_instance=gi,
                        )
                    )
            else:
                gpus.append(Gpu(host, i, f"GPU-{n:02d}{i:02d}-a100"))
    by_host = {(g.host, g.index, g.mig_instance): g for g in gpus}

    def g(node: int, index: int, mig: int | None = None) -> Gpu:
        return by_host[(f"gpu-node-{node}", index, mig)]

    # Background: every whole GPU busy on and off until 8 h before the end, 1-4 h jobs.
    background: list[PodTrace] = []
    quiet_from = end - 8 * 3600
    n = 1000
    for gpu in gpus:
        if gpu.mig_instance is not None:
            continue
        t = START + rng.uniform(0, 3600)
        while True:
            length = rng.uniform(3600, 4 * 3600)
            if t + length > quiet_from:
                break
            level = rng.uniform(5, 95)
            n += 1
            background.append(
                PodTrace(
                    namespace=rng.choice(["vision", "nlp", "speech"]),
                    name=f"bg-{n}-{rng.randrange(16**5):05x}",
                    uid=uid(n),
                    start=t,
                    end=t + length,
                    gpus=[GpuUse(gpu, wave(level), const(8000))],
                    containers=[Container("main", const(8 * GIB), const(2.0))],
                    pod_cgroup_series=False,
                    coarse_scrape=60.0,
                )
            )
            t += length + rng.uniform(600, 3 * 3600)

    e = end - 1800  # the round's pods end in the half hour before this
    spike_at = e - 3600 + 1807  # 20 s, not on a scrape boundary

    def busy(t: float) -> float:
        return 70 + 20 * math.sin(t / 600)

    rounds = [
        PodTrace(
            "vision",
            "train-4gpu-7xk2p",
            uid(1),
            e - 2 * 3600,
            e - 300,
            gpus=[
                GpuUse(g(0, 0), busy, lambda t: 30000 + (t % 3600)),
                GpuUse(g(0, 1), busy, const(20000)),
                GpuUse(g(0, 2), lambda t: 1.0 if int(t) % 60 == 0 else 0.0, const(300)),
                GpuUse(g(0, 3), const(0.0), const(300)),
            ],
            containers=[
                Container(
                    "trainer",
                    lambda t: 20 * GIB + (t % 7200) * 1000,
                    lambda t: 8.0 if (t % 1000) < 200 else 4.0,
                    throttled_fraction=0.05,
                ),
                Container("logger", const(200 * 1024 * 1024), const(0.1), image="registry.example/fluent:2"),
            ],
        ),
        PodTrace(
            "nlp",
            "mem-spike-q9z8w",
            uid(2),
            e - 3600,
            e - 120,
            gpus=[GpuUse(g(1, 0), const(50.0), const(6000))],
            containers=[
                Container(
                    "main", lambda t: 30 * GIB if spike_at <= t < spike_at + 20 else 4 * GIB, const(1.5)
                ),
                Container("side", const(1 * GIB), const(0.2)),
            ],
        ),
        PodTrace(
            "nlp",
            "too-short-4hj2k",
            uid(3),
            e - 600 + 3,
            e - 600 + 10,
            gpus=[GpuUse(g(1, 1), const(99.0), const(1000))],
            containers=[Container("main", const(1 * GIB), const(1.0))],
        ),
        PodTrace(
            "vision",
            "mig-job-p2m4c",
            uid(4),
            e - 5400,
            e - 600,
            gpus=[GpuUse(g(2, 0, 1), const(30.0), const(10000))],
            containers=[Container("main", const(6 * GIB), const(1.0))],
        ),
        PodTrace(
            "nlp",
            "slice-a-1b2c3",
            uid(5),
            e - 3 * 3600,
            e - 1200,
            gpus=[GpuUse(g(2, 1), const(30.0), const(5000))],
            containers=[Container("main", const(2 * GIB), const(1.0))],
        ),
        PodTrace(
            "nlp",
            "slice-b-4d5e6",
            uid(6),
            e - 2 * 3600,
            e - 600,
            gpus=[GpuUse(g(2, 1), const(20.0), const(7000))],
            containers=[Container("main", const(3 * GIB), const(1.0))],
        ),
        PodTrace(
            "speech",
            "asr-retry-0-aaaaa",
            uid(7),
            e - 4000,
            e - 3400,
            gpus=[GpuUse(g(0, 4), const(90.0), const(9000))],
            containers=[Container("main", const(5 * GIB), const(3.0))],
        ),
        PodTrace(
            "speech",
            "asr-retry-1-bbbbb",
            uid(8),
            e - 3300,
            e - 60,
            gpus=[GpuUse(g(0, 4), const(40.0), const(9000))],
            containers=[Container("main", const(7 * GIB), const(2.0))],
        ),
        PodTrace(
            "vision",
            "notebook-alice",
            uid(9),
            e - 2 * 3600,
            e - 1800,
            gpus=[GpuUse(g(0, 6), const(25.0), const(4000))],
            containers=[Container("main", const(3 * GIB), const(1.0))],
        ),
    ]
    # A bare pod of the same name ran earlier, inside the round's query range: the measurement must
    # not mix the two.
    background.append(
        PodTrace(
            "vision",
            "notebook-alice",
            uid(10),
            e - 3 * 3600,
            e - 2.5 * 3600,
            gpus=[GpuUse(g(0, 6), const(95.0), const(60000))],
            containers=[Container("main", const(50 * GIB), const(6.0))],
        )
    )
    return Cluster(gpus=gpus, background=background, round=rounds, start=START, end=end)


def exported_cluster() -> Cluster:
    """A small cluster whose dcgm-exporter was scraped with honorLabels: false (``exported_*``)."""
    end = START + 6 * 3600
    gpus = [Gpu("gpu-node-9", i, f"GPU-09{i:02d}-h100", model="NVIDIA H100 80GB HBM3") for i in range(4)]
    pods = [
        PodTrace(
            "research",
            f"exp-{k}-zz{k:03d}",
            uid(100 + k),
            START + 600 * k,
            START + 3 * 3600 + 600 * k,
            gpus=[GpuUse(gpus[k], const(10.0 * (k + 1)), const(1000 * (k + 1)))],
            containers=[Container("main", const((k + 1) * GIB), const(1.0))],
            exported_labels=True,
        )
        for k in range(4)
    ]
    return Cluster(gpus=gpus, background=[], round=pods, start=START, end=end)
