"""Running GPU pods for the live-check tests: each pod exercises one rule, on a real Prometheus.

`NOW` is the moment the tests ask about; every pod still runs then (its series reach `NOW`). The
data holds what dcgm-exporter would have shown (metricgen): GR_ENGINE_ACTIVE on A100s and MIG
slices, GPU_UTIL alone on T4s, free GPUs with empty pod labels, one pod scraped with
`honorLabels: false` (`exported_pod`), and a pod whose name an earlier, busy pod used.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.adapters.prometheus import metricgen
from tests.adapters.prometheus.metricgen import Gpu, GpuUse, PodTrace, Signal
from tests.adapters.prometheus.promserver import PrometheusServer, backfill
from tests.adapters.prometheus.scenario import START, const, uid

SCRAPE = 15.0
HOUR = 3600.0
# Eight hours of data; the tests ask about its last moment (on a scrape boundary).
NOW = START + 8 * HOUR
CUDA_CONTEXT_MIB = 300.0


def a100(index: int, host: str = "gpu-a") -> Gpu:
    return Gpu(host, index, f"GPU-a100-{host}-{index}")


def t4(index: int, host: str = "gpu-t") -> Gpu:
    return Gpu(host, index, f"GPU-t4-{host}-{index}", model="Tesla T4", fb_total_mib=15360, has_prof=False)


MIG = Gpu("gpu-m", 0, "GPU-a100-gpu-m-0", fb_total_mib=40192, mig_profile="3g.40gb", mig_instance=1)
MIG_OTHER = Gpu("gpu-m", 0, "GPU-a100-gpu-m-0", fb_total_mib=40192, mig_profile="3g.40gb", mig_instance=2)


def busy_until(moment: float, level: float = 80.0) -> Signal:
    return lambda t: level if t < moment else 0.0


@dataclass(frozen=True)
class LivePod:
    """A running pod of the scenario: its trace and what the live check must conclude."""

    trace: PodTrace
    idle_gpus: int  # GPUs that idled the whole window (0: no nudge)
    # Expected start of the idle stretch (Unix seconds), for pods that idle.
    idle_since: float | None = None
    memory_held: bool = False
    namespace: str = "ml"

    @property
    def name(self) -> str:
        return self.trace.name

    @property
    def uid(self) -> str:
        return self.trace.uid


def _pod(
    n: int,
    name: str,
    start: float,
    gpus: list[GpuUse],
    *,
    namespace: str = "ml",
    exported: bool = False,
    end: float = NOW + 1,
) -> PodTrace:
    return PodTrace(namespace, name, uid(n), start, end, gpus=gpus, exported_labels=exported)


def pods() -> list[LivePod]:
    idle = const(0.0)
    ctx = const(CUDA_CONTEXT_MIB)
    started = NOW - 3 * HOUR
    return [
        # Idle from the start on both GPUs: idle since the pod got them.
        LivePod(
            _pod(101, "idle-from-start", started, [GpuUse(a100(0), idle, ctx), GpuUse(a100(1), idle, ctx)]),
            idle_gpus=2,
            idle_since=started,
        ),
        # Busy for an hour, then idle for two: caught, idle since the hour ended.
        LivePod(
            _pod(102, "busy-then-idle", started, [GpuUse(a100(2), busy_until(started + HOUR), ctx)]),
            idle_gpus=1,
            idle_since=started + HOUR,
        ),
        # Idle only for the last 30 minutes: less than the window, no nudge.
        LivePod(
            _pod(103, "idle-briefly", started, [GpuUse(a100(3), busy_until(NOW - 1800), ctx)]),
            idle_gpus=0,
        ),
        # Busy throughout.
        LivePod(_pod(104, "busy", started, [GpuUse(a100(4), const(65.0), const(30000))]), idle_gpus=0),
        # GPU memory held (a loaded model) at 0 % compute.
        LivePod(
            _pod(105, "memory-held", NOW - 2 * HOUR, [GpuUse(a100(5), idle, const(12000))]),
            idle_gpus=1,
            idle_since=NOW - 2 * HOUR,
            memory_held=True,
        ),
        # An idle MIG slice (no GPU_UTIL there: GR_ENGINE_ACTIVE decides), beside a busy one.
        LivePod(_pod(106, "mig-idle", started, [GpuUse(MIG, idle, ctx)]), idle_gpus=1, idle_since=started),
        LivePod(_pod(107, "mig-busy", started, [GpuUse(MIG_OTHER, const(40.0), const(9000))]), idle_gpus=0),
        # Two of four GPUs never used.
        LivePod(
            _pod(
                108,
                "half-idle",
                started,
                [
                    GpuUse(a100(0, "gpu-b"), const(70.0), const(20000)),
                    GpuUse(a100(1, "gpu-b"), const(70.0), const(20000)),
                    GpuUse(a100(2, "gpu-b"), idle, ctx),
                    GpuUse(a100(3, "gpu-b"), idle, ctx),
                ],
            ),
            idle_gpus=2,
            idle_since=started,
        ),
        # A T4 (GPU_UTIL only) scraped through the chart's honorLabels: false (exported_pod).
        LivePod(
            _pod(109, "exported-idle", started, [GpuUse(t4(0), idle, ctx)], exported=True),
            idle_gpus=1,
            idle_since=started,
        ),
        # Younger than the window: never idle yet.
        LivePod(_pod(110, "young", NOW - 1800, [GpuUse(a100(6), idle, ctx)]), idle_gpus=0),
        # Workspaces (the service tests record them from Coder's and JupyterHub's labels) and a pod
        # whose owner opted out.
        LivePod(
            _pod(111, "coder-ws-gpu", started, [GpuUse(a100(7), idle, ctx)], namespace="coder"),
            idle_gpus=1,
            idle_since=started,
            namespace="coder",
        ),
        LivePod(
            _pod(
                112, "jupyter-j51000101", NOW - 2 * HOUR, [GpuUse(t4(1), idle, const(9000))], namespace="jhub"
            ),
            idle_gpus=1,
            idle_since=NOW - 2 * HOUR,
            memory_held=True,
            namespace="jhub",
        ),
        LivePod(_pod(113, "opted-out", started, [GpuUse(t4(2), idle, ctx)]), idle_gpus=1, idle_since=started),
    ]


def earlier_pods() -> list[PodTrace]:
    """A pod that ended before the scenario's JupyterHub server took its name (JupyterHub reuses
    `jupyter-<user>`), busy on the same GPU: its busy samples must not count for the new pod."""
    return [
        PodTrace(
            "jhub",
            "jupyter-j51000101",
            uid(199),
            NOW - 5 * HOUR,
            NOW - 2 * HOUR - 60,
            gpus=[GpuUse(t4(1), const(90.0), const(9000))],
        )
    ]


def gpus() -> list[Gpu]:
    found: dict[tuple[str, int, int | None], Gpu] = {}
    for pod in [*(p.trace for p in pods()), *earlier_pods()]:
        for use in pod.gpus:
            found.setdefault((use.gpu.host, use.gpu.index, use.gpu.mig_instance), use.gpu)
    # A free GPU (empty pod labels, as dcgm-exporter writes them).
    found[("gpu-a", 9, None)] = a100(9)
    return list(found.values())


@contextmanager
def serve(tmp: Path) -> Iterator[PrometheusServer]:
    """A Prometheus holding the scenario's eight hours."""
    openmetrics = tmp / "live.om"
    metricgen.generate(
        openmetrics,
        gpus(),
        [*(p.trace for p in pods()), *earlier_pods()],
        start=NOW - 8 * HOUR,
        end=NOW + 1,
        scrape=SCRAPE,
    )
    backfill(openmetrics, tmp / "tsdb")
    openmetrics.unlink()
    with PrometheusServer(tmp / "tsdb") as server:
        yield server
