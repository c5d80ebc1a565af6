"""Generated dcgm-exporter and cAdvisor series from pod traces, with the ground truth they imply.

A trace says which pod held which GPU when, and what its GPUs, containers' memory and CPU did
over time (functions of unix time). ``generate`` writes what Prometheus would have scraped every
``scrape`` seconds as OpenMetrics text (for promtool) and records, per pod, exactly the values it
wrote: tests compare the adapter's figures with these, not with numbers typed into the test.

Shapes follow dcgm-exporter (FB in MiB, GR_ENGINE_ACTIVE a 0–1 ratio, ``GPU_I_PROFILE``/``GPU_I_ID``
on MIG instances, pod labels only while a pod holds the GPU, or as ``exported_*`` with
``honorLabels: false``) and the kubelet's cAdvisor (``container``/``image``/``pod``/``namespace``/``id``
labels, the pod cgroup as ``container=""``).
"""

from __future__ import annotations

import math
import shutil
import tempfile
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from inno_notify.adapters.prometheus.batching import PodWindow

Signal = Callable[[float], float]


@dataclass(frozen=True)
class Gpu:
    host: str
    index: int
    uuid: str
    model: str = "NVIDIA A100-SXM4-80GB"
    fb_total_mib: int = 81920
    has_prof: bool = True  # DCGM_FI_PROF_* needs Volta+ and the profiling module
    mig_profile: str | None = None
    mig_instance: int | None = None
    reports_fb_free: bool = True  # benchmarks leave it out to keep the data set small


@dataclass(frozen=True)
class GpuUse:
    gpu: Gpu
    util_percent: Signal
    fb_used_mib: Signal


@dataclass(frozen=True)
class Container:
    name: str
    memory_bytes: Signal
    cores: Signal
    image: str = "registry.example/train:1.0"
    throttled_fraction: float | None = None  # share of CPU time throttled, when cAdvisor reports it


@dataclass(frozen=True)
class PodTrace:
    namespace: str
    name: str
    uid: str
    start: float
    end: float
    gpus: Sequence[GpuUse] = ()
    containers: Sequence[Container] = ()
    exported_labels: bool = False  # dcgm-exporter scraped with honorLabels: false
    pod_cgroup_series: bool = True  # also write the pod-level cgroup (container="") as the kubelet does
    # Write this pod's samples only every so many seconds (background load that no test measures).
    coarse_scrape: float | None = None


def window(p: PodTrace) -> PodWindow:
    """The pod's window as the usage service asks the meter for it."""
    return PodWindow(
        p.namespace, p.name, p.uid, datetime.fromtimestamp(p.start, UTC), datetime.fromtimestamp(p.end, UTC)
    )


@dataclass
class GpuTruth:
    util: list[float] = field(default_factory=list)  # percent, from PROF where written, else GPU_UTIL
    fb_used_mib: list[float] = field(default_factory=list)
    fb_total_mib: float | None = None
    # The same samples with their times: t -> value (the usage series are checked against them).
    util_at: dict[float, float] = field(default_factory=dict)
    fb_used_mib_at: dict[float, float] = field(default_factory=dict)

    @property
    def util_mean(self) -> float | None:
        return sum(self.util) / len(self.util) if self.util else None


@dataclass
class PodTruth:
    gpus: dict[str, GpuTruth] = field(default_factory=lambda: defaultdict(GpuTruth))  # by UUID[/GI]
    memory_sum: dict[float, float] = field(default_factory=lambda: defaultdict(float))  # t -> bytes
    cpu_seconds: dict[str, float] = field(default_factory=dict)  # container -> last counter value
    cpu_rates: dict[float, float] = field(default_factory=lambda: defaultdict(float))  # t -> cores
    throttled_seconds: dict[str, float] = field(default_factory=dict)
    samples: int = 0
    # Per container series: t -> working set bytes.
    container_memory: dict[str, dict[float, float]] = field(default_factory=lambda: defaultdict(dict))

    @property
    def memory_peak(self) -> float | None:
        return max(self.memory_sum.values()) if self.memory_sum else None

    @property
    def cpu_total_seconds(self) -> float | None:
        return sum(self.cpu_seconds.values()) if self.cpu_seconds else None

    def cpu_p95(self) -> float | None:
        """Nearest-rank p95 of the per-scrape-interval CPU rate (cores)."""
        rates = sorted(self.cpu_rates.values())
        return rates[max(0, math.ceil(0.95 * len(rates)) - 1)] if rates else None


def scrape_times(start: float, end: float, scrape: float) -> Iterable[float]:
    """Scrape instants t with start <= t < end, on multiples of ``scrape``."""
    t = math.ceil(start / scrape) * scrape
    while t < end:
        yield t
        t += scrape


def _labels(pairs: Iterable[tuple[str, str]]) -> str:
    return ",".join(f'{k}="{v}"' for k, v in pairs if v != "")


class _Writer:
    """One temporary file per metric family: OpenMetrics wants each family's samples together."""

    def __init__(self, directory: Path) -> None:
        self._dir = directory
        self._files: dict[str, TextIO] = {}
        self.samples = 0

    def write(self, metric: str, labels: str, value: str, t: float) -> None:
        handle = self._files.get(metric)
        if handle is None:
            handle = self._files[metric] = (self._dir / f"{metric}.part").open("w")
        handle.write(f"{metric}{{{labels}}} {value} {t:.3f}\n")
        self.samples += 1

    def finish(self, out: Path) -> None:
        with out.open("w") as dest:
            for metric, handle in sorted(self._files.items()):
                handle.close()
                with (self._dir / f"{metric}.part").open() as src:
                    shutil.copyfileobj(src, dest)
            dest.write("# EOF\n")


def _dcgm_labels(gpu: Gpu, holder: PodTrace | None) -> str:
    base = [
        ("gpu", str(gpu.index)),
        ("UUID", gpu.uuid),
        ("device", f"nvidia{gpu.index}"),
        ("modelName", gpu.model),
        ("Hostname", gpu.host),
    ]
    if gpu.mig_profile is not None:
        base += [("GPU_I_PROFILE", gpu.mig_profile), ("GPU_I_ID", str(gpu.mig_instance))]
    if holder is None:
        return _labels(base)
    if holder.exported_labels:
        return _labels(
            [
                *base,
                ("exported_pod", holder.name),
                ("exported_namespace", holder.namespace),
                ("exported_container", "main"),
                ("pod", f"dcgm-exporter-{gpu.host}"),
                ("namespace", "gpu-operator"),
                ("container", "nvidia-dcgm-exporter"),
            ]
        )
    return _labels([*base, ("pod", holder.name), ("namespace", holder.namespace), ("container", "main")])


def generate(
    out: Path,
    gpus: Sequence[Gpu],
    pods: Sequence[PodTrace],
    *,
    start: float,
    end: float,
    scrape: float = 15.0,
    idle_scrape: float | None = None,
) -> tuple[dict[str, PodTruth], int]:
    """Write the OpenMetrics file; return the truth per pod uid and the number of samples written.

    Idle GPUs (no holder) are written every ``idle_scrape`` seconds (default ``scrape``) with empty
    pod labels, as dcgm-exporter reports them; a larger value keeps big data sets small.
    """
    truth: dict[str, PodTruth] = defaultdict(PodTruth)
    holders: dict[str, list[tuple[PodTrace, GpuUse]]] = defaultdict(list)
    for pod in pods:
        for use in pod.gpus:
            holders[_gpu_id(use.gpu)].append((pod, use))
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        writer = _Writer(Path(tmp))
        for gpu in gpus:
            _write_gpu(writer, gpu, holders.get(_gpu_id(gpu), []), truth, start, end, scrape, idle_scrape)
        for pod in pods:
            _write_cadvisor(writer, pod, truth[pod.uid], scrape)
        writer.finish(out)
    return dict(truth), writer.samples


def _gpu_id(gpu: Gpu) -> str:
    return gpu.uuid if gpu.mig_instance is None else f"{gpu.uuid}/{gpu.mig_instance}"


def _write_gpu(
    writer: _Writer,
    gpu: Gpu,
    uses: list[tuple[PodTrace, GpuUse]],
    truth: dict[str, PodTruth],
    start: float,
    end: float,
    scrape: float,
    idle_scrape: float | None,
) -> None:
    idle_every = round((idle_scrape or scrape) / scrape)
    idle_labels = _dcgm_labels(gpu, None)
    key = _gpu_id(gpu)
    uses = sorted(uses, key=lambda pu: pu[0].end)
    labels = {pod.uid: _dcgm_labels(gpu, pod) for pod, _ in uses}
    first = 0  # uses before this index have ended
    for i, t in enumerate(scrape_times(start, end, scrape)):
        while first < len(uses) and uses[first][0].end <= t:
            first += 1
        active = [(p, u) for p, u in uses[first:] if p.start <= t < p.end]
        if not active:
            if i % idle_every == 0:
                _write_gpu_sample(writer, gpu, idle_labels, 0.0, 0.0, t)
            continue
        coarse = active[0][0].coarse_scrape
        if coarse is not None and len(active) == 1 and i % round(coarse / scrape):
            continue
        # Time-slicing with virtual GPUs: every holder gets a copy of the whole GPU's values.
        util = min(100.0, sum(u.util_percent(t) for _, u in active))
        fb = min(float(gpu.fb_total_mib), sum(round(u.fb_used_mib(t)) for _, u in active))
        for pod, _ in active:
            written_util, written_fb = _write_gpu_sample(writer, gpu, labels[pod.uid], util, fb, t)
            gt = truth[pod.uid].gpus[key]
            if written_util is not None:
                gt.util.append(written_util)
                gt.util_at[t] = written_util
            gt.fb_used_mib.append(written_fb)
            gt.fb_used_mib_at[t] = written_fb
            gt.fb_total_mib = float(gpu.fb_total_mib)


def _write_gpu_sample(
    writer: _Writer, gpu: Gpu, labels: str, util: float, fb_used: float, t: float
) -> tuple[float | None, float]:
    written: float | None = None
    if gpu.has_prof:
        prof = f"{util / 100:.4f}"
        writer.write("DCGM_FI_PROF_GR_ENGINE_ACTIVE", labels, prof, t)
        written = float(prof) * 100
    if gpu.mig_profile is None:
        # GPU_UTIL is coarser and reads higher than GR_ENGINE_ACTIVE; MIG instances have none.
        dev = str(min(100, round(util * 1.1 + 3)) if util > 0 else 0)
        writer.write("DCGM_FI_DEV_GPU_UTIL", labels, dev, t)
        if written is None:
            written = float(dev)
    writer.write("DCGM_FI_DEV_FB_USED", labels, str(int(fb_used)), t)
    if gpu.reports_fb_free:
        writer.write("DCGM_FI_DEV_FB_FREE", labels, str(int(gpu.fb_total_mib - fb_used)), t)
    return written, fb_used


def _write_cadvisor(writer: _Writer, pod: PodTrace, truth: PodTruth, scrape: float) -> None:
    qos = "burstable"
    pod_cgroup = f"/kubepods/{qos}/pod{pod.uid}"
    times = list(scrape_times(pod.start, pod.end, pod.coarse_scrape or scrape))
    truth.samples = len(times)
    pod_memory: dict[float, float] = defaultdict(float)
    pod_cpu: dict[float, float] = defaultdict(float)
    for n, container in enumerate(pod.containers):
        labels = _labels(
            [
                ("container", container.name),
                ("id", f"{pod_cgroup}/{n:064x}"),
                ("image", container.image),
                ("name", f"{n:064x}"),
                ("namespace", pod.namespace),
                ("pod", pod.name),
            ]
        )
        counter = 0.0
        throttled = 0.0
        previous = pod.start
        for t in times:
            cores = container.cores(previous)
            used = cores * (t - previous)
            counter += used
            if t > previous:
                truth.cpu_rates[t] += used / (t - previous)
            previous = t
            memory = int(container.memory_bytes(t))
            writer.write("container_memory_working_set_bytes", labels, str(memory), t)
            counter_text = f"{counter:.6f}"
            writer.write("container_cpu_usage_seconds_total", labels, counter_text, t)
            truth.memory_sum[t] += memory
            truth.container_memory[container.name][t] = memory
            truth.cpu_seconds[container.name] = float(counter_text)
            pod_memory[t] += memory
            pod_cpu[t] = pod_cpu[t] + float(counter_text)
            if container.throttled_fraction is not None:
                throttled += used * container.throttled_fraction
                throttled_text = f"{throttled:.6f}"
                writer.write("container_cpu_cfs_throttled_seconds_total", labels, throttled_text, t)
                truth.throttled_seconds[container.name] = float(throttled_text)
    if pod.pod_cgroup_series:
        # The pod cgroup holds the sum of its containers: counting it too would double every figure.
        labels = _labels([("id", pod_cgroup), ("namespace", pod.namespace), ("pod", pod.name)])
        for t in times:
            writer.write("container_memory_working_set_bytes", labels, str(int(pod_memory[t])), t)
            writer.write("container_cpu_usage_seconds_total", labels, f"{pod_cpu[t]:.6f}", t)
